"""16.4-16.5: the one registry of convolution algorithms, as cuDNN keeps one enum of them.

``ALGORITHMS[name]`` is an ``Algorithm``: its cuDNN name (CUDNN_CONVOLUTION_FWD_ALGO_<cudnn>),
``run(X, W, b=None, padding=0, stride=1, *, out=None)``, ``supports(W_shape, stride)`` (the
reason it cannot run a layer, or None), ``workspace`` (extra device bytes) and
``multiplications`` for a layer, the precision it multiplies in, its backward pass (dX and
dW, with its extra bytes) where it has one of its own, and its form for a channels-last fp16
model's operands (``run_nhwc16``: NHWC fp16 in, NHWC out, nothing converted) where it has one.
The bias gradient db is the same for every algorithm (cuDNN's cudnnConvolutionBackwardBias is a call of its own too), so the layer
(gpulib.cnn.conv2d_backward) computes it. The auto-tuner, the front door, the algorithm figure
and the benchmarks read this table; adding an algorithm is adding one entry. What must stay
true: this is the one module that imports every algorithm, and it imports nothing above them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpulib.conv import direct, fft, im2col, implicit_gemm, winograd
from gpulib.conv import tensorcore as tensorcore_conv
from gpulib.shapes import filter_shape, layer_shapes, output_shape


@dataclass(frozen=True)
class Algorithm:
    """A way to compute Y = conv(X, W) + b, with the cuDNN algorithm it corresponds to."""

    name: str
    label: str  # how tables and figures print it
    cudnn: str
    run: Callable  # run(X, W, b=None, padding=0, stride=1, *, out=None) -> Y on the device
    supports: Callable  # supports(W_shape, stride) -> None, or the reason it cannot
    workspace: Callable  # workspace(X_shape, W_shape, padding, stride) -> extra device bytes
    multiplications: Callable  # multiplications(X_shape, W_shape, padding, stride) -> count
    precision: str = "fp32"  # what its multiplications take: "fp32", or "fp16" on the tensor cores
    backward: Callable | None = None  # (X, W, dY, padding, stride, *, need_dX, out) -> (dX, dW)
    # its backward pass's extra device bytes: (X_shape, W_shape, padding, stride, need_dX) -> bytes
    # (the direct backward kernels, used where ``backward`` is None, need none)
    backward_workspace: Callable | None = None
    # the same algorithm on a channels-last fp16 model's operands as they are, nothing converted:
    # run_nhwc16(X [N, H, W, C] fp16, Wk [K, R, S, C] fp16, b, padding, stride, *, out) -> Y [N, H', W', K]
    run_nhwc16: Callable | None = None


@filter_shape
def _any_layer(W_shape, stride) -> None:
    return None


@layer_shapes
def _no_workspace(X_shape, W_shape, padding, stride) -> int:
    return 0


@layer_shapes
def direct_multiplications(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """N·K·H'·W'·C·R·S: one multiplication per filter tap per output, as every GEMM form does."""
    N, K, Ho, Wo = output_shape(X_shape, W_shape, padding, stride)
    return N * K * Ho * Wo * W_shape[1] * W_shape[2] * W_shape[3]


@layer_shapes
def _x_col_bytes(X_shape, W_shape, padding, stride) -> int:
    """X_col [C·R·S, N·H'·W'] and Y_mat [K, N·H'·W'], float32."""
    N, K, Ho, Wo = output_shape(X_shape, W_shape, padding, stride)
    return 4 * (W_shape[1] * W_shape[2] * W_shape[3] + K) * N * Ho * Wo


@layer_shapes
def _table_bytes(X_shape, W_shape, padding, stride) -> int:
    """The precomputed variant's (c, r, s) table: 3 int32 per row of X_col."""
    return 12 * W_shape[1] * W_shape[2] * W_shape[3]


_TABLE = [
    Algorithm(
        name="direct",
        label="direct (v2; sim: v1)",
        cudnn="DIRECT",
        run=direct.conv2d_direct,
        supports=_any_layer,
        workspace=_no_workspace,
        multiplications=direct_multiplications,
    ),
    Algorithm(
        name="gemm",
        label="im2col + GEMM",
        cudnn="GEMM",
        run=im2col.conv2d_im2col,
        supports=_any_layer,
        workspace=_x_col_bytes,
        multiplications=direct_multiplications,
        backward=im2col.conv2d_im2col_backward,
        backward_workspace=im2col.backward_workspace_bytes,
    ),
    Algorithm(
        name="implicit_gemm",
        label="implicit GEMM",
        cudnn="IMPLICIT_GEMM",
        run=implicit_gemm.conv2d_implicit_gemm,
        supports=_any_layer,
        workspace=_no_workspace,
        multiplications=direct_multiplications,
    ),
    Algorithm(
        name="implicit_precomp_gemm",
        label="implicit precomp GEMM",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=implicit_gemm.conv2d_implicit_precomp_gemm,
        supports=_any_layer,
        workspace=_table_bytes,
        multiplications=direct_multiplications,
    ),
    Algorithm(
        name="fft",
        label="FFT",
        cudnn="FFT",
        run=fft.conv2d_fft,
        supports=_any_layer,
        workspace=fft.workspace_bytes,
        multiplications=fft.multiplications,
    ),
    Algorithm(
        name="winograd",
        label="Winograd (fused)",
        cudnn="WINOGRAD",
        run=winograd.conv2d_winograd,
        supports=winograd.supports,
        workspace=winograd.workspace_bytes,
        multiplications=winograd.multiplications,
    ),
    Algorithm(
        name="winograd_nonfused",
        label="Winograd (non-fused)",
        cudnn="WINOGRAD_NONFUSED",
        run=winograd.conv2d_winograd_nonfused,
        supports=winograd.supports,
        workspace=winograd.nonfused_workspace_bytes,
        multiplications=winograd.multiplications,
    ),
    Algorithm(
        name="winograd_f4",
        label="Winograd F(4x4, 3x3)",
        cudnn="WINOGRAD_NONFUSED",
        run=winograd.conv2d_winograd_f4,
        supports=winograd.supports_f4,
        workspace=winograd.f4_workspace_bytes,
        multiplications=winograd.f4_multiplications,
    ),
    # the tensor-core forms: cuDNN's IMPLICIT_PRECOMP_GEMM with CUDNN_TENSOR_OP_MATH (fp16 in, fp32 sums)
    Algorithm(
        name="tc_implicit_gemm",
        label="tensor-core implicit GEMM (NCHW)",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=tensorcore_conv.conv2d_tc_nchw,
        supports=tensorcore_conv.supports_nchw,
        workspace=tensorcore_conv.workspace_nchw,
        multiplications=direct_multiplications,
        precision="fp16",
    ),
    Algorithm(
        name="tc_implicit_gemm_nhwc",
        label="tensor-core implicit GEMM (NHWC)",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=tensorcore_conv.conv2d_tc_nhwc,
        supports=tensorcore_conv.supports_nhwc,
        workspace=tensorcore_conv.workspace_nhwc,
        multiplications=direct_multiplications,
        precision="fp16",
    ),
    Algorithm(
        name="tc_implicit_gemm_wgmma",
        label="tensor-core implicit GEMM (NHWC, wgmma)",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=tensorcore_conv.conv2d_tc_wgmma,
        supports=tensorcore_conv.supports_wgmma,
        workspace=tensorcore_conv.workspace_wgmma,
        multiplications=direct_multiplications,
        precision="fp16",
        run_nhwc16=tensorcore_conv.conv2d_tc_wgmma_nhwc16,
    ),
    Algorithm(
        name="tc_implicit_gemm_tma",
        label="tensor-core implicit GEMM (NHWC, wgmma, TMA)",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=tensorcore_conv.conv2d_tc_tma,
        supports=tensorcore_conv.supports_tma,
        workspace=tensorcore_conv.workspace_tma,
        multiplications=direct_multiplications,
        precision="fp16",
        run_nhwc16=tensorcore_conv.conv2d_tc_tma_nhwc16,
    ),
    Algorithm(
        name="tc_implicit_gemm_persistent",
        label="tensor-core implicit GEMM (NHWC, wgmma, TMA, persistent)",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=tensorcore_conv.conv2d_tc_persistent,
        supports=tensorcore_conv.supports_persistent,
        workspace=tensorcore_conv.workspace_persistent,
        multiplications=direct_multiplications,
        precision="fp16",
        run_nhwc16=tensorcore_conv.conv2d_tc_persistent_nhwc16,
    ),
    Algorithm(
        name="tc_implicit_gemm_halo",
        label="tensor-core implicit GEMM (NHWC, wgmma, TMA, persistent, a box per filter column)",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=tensorcore_conv.conv2d_tc_halo,
        supports=tensorcore_conv.supports_halo,
        workspace=tensorcore_conv.workspace_halo,
        multiplications=direct_multiplications,
        precision="fp16",
        run_nhwc16=tensorcore_conv.conv2d_tc_halo_nhwc16,
    ),
    Algorithm(
        name="tc_implicit_gemm_pingpong",
        label="tensor-core implicit GEMM (NHWC, wgmma, TMA, filters as A, producer and two consumers)",
        cudnn="IMPLICIT_PRECOMP_GEMM",
        run=tensorcore_conv.conv2d_tc_pingpong,
        supports=tensorcore_conv.supports_pingpong,
        workspace=tensorcore_conv.workspace_pingpong,
        multiplications=direct_multiplications,
        precision="fp16",
        run_nhwc16=tensorcore_conv.conv2d_tc_pingpong_nhwc16,
    ),
]
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in _TABLE}
NAMES = tuple(ALGORITHMS)


def of_precision(precision: str = "fp32") -> list[Algorithm]:
    """The algorithms that multiply in ``precision`` (the auto-tuner compares like with like)."""
    if precision not in {a.precision for a in ALGORITHMS.values()}:
        raise ValueError(f"precision must be one of {sorted({a.precision for a in ALGORITHMS.values()})}, not {precision!r}")
    return [a for a in ALGORITHMS.values() if a.precision == precision]
