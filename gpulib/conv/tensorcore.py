"""16.5: implicit-GEMM convolution on the tensor cores, fp16 inputs, fp32 accumulation.

The GEMM of 16.4 (Y_mat [K, N·H'·W'] = W_mat [K, C·R·S] · X_col), computed like tensor-core
GEMM version 2 (and with its warp_mma / warp_store): a block of 4 warps owns a 64x64 tile of Y_mat, each warp 32x32 in 2x2
accumulator fragments. Per 16-deep step the block stages W_mat's 64x16 tile and a 16x64 tile
of X_col in shared memory (fp16); the X_col tile is gathered from X on the fly (no X_col in
memory), with (c, r, s) of each row from implicit GEMM's row table. At the end the warps
store their accumulators to a shared fp32 tile, and the block writes it to Y [N, K, H', W']
with the bias added (Y_mat's columns are not rows of Y, so wmma.store cannot write Y).

That is version 1. Version 2 is laid out the way cuDNN's fast fp16 kernels want it, NHWC
("channels last"): the GEMM becomes Y [N·H'·W', K] = X_col [N·H'·W', R·S·C] · W [R·S·C, K],
where a row of X_col is, for each (r, s), the C channels of one input pixel, which lie next to
each other in memory. So the X_col tile is gathered 8 channels (16 bytes) at a time with
asynchronous copies (cp.async, zero-filled where the window leaves the image), two pairs of
shared tiles overlap the copies of the next step with the tensor-core work (tensor-core GEMM
version 4's pipeline), the accumulators start from the bias (``wmma.load_c``: D = A·B + C),
and every warp stores its 16x16 tiles straight into Y, which is NHWC. C must be a multiple of
8 and K of 16; ``conv2d_tc`` pads both with zeros and converts NCHW in and out.

Version 3 is version 2 on Hopper's warpgroup MMA (tensor-core GEMM v5's structure, wgmma.py):
Y [N·H'·W', K] = X_col [N·H'·W', R·S·C] · Wk [K, R·S·C]ᵀ with the filters K-major (each
filter's (r, s, c) values in a run, "KRSC"), so both operands are K-major as wgmma reads fp16
from shared memory. A block of 2 warpgroups owns 128 output pixels x 64 filters; per 64-deep
step it gathers the X_col tile with 16-byte cp.async copies (8 channels of one input pixel,
zeros where the window leaves the image) and copies Wk's tile, both into the 128-byte swizzled
layout of a ring of 4 buffers; the accumulators start from the bias, and each thread stores its
32 results straight into Y (NHWC, any K: nothing padded but C to a multiple of 8).

Version 4 is version 3 with the tiles brought by the tensor memory accelerator (GEMM v6's
pipeline, tma.py). A block owns a patch of 128 output pixels, 128 / w rows of w
(``pixel_tile``), and 64 filters. With stride 1, the inputs that tap
(r, s) of the filters meets under the patch form the same patch of X moved by (r - padding,
s - padding): one 4-D box [1, 128 / w, w, 64 channels] of NHWC X, which lands as the 128 rows
of X_col's tile in the swizzled layout. Rows and columns of the box before or past the image
arrive as zeros, which is exactly the padding. Each 64-deep step is (r, s, 64 channels), and
its filter tile is one 3-D box [64 filters, 1 tap, 64 channels] of Wk seen as [K, R·S, C].
No thread computes an address or a bound. Stride 1 only; pixels of a patch outside the image
are computed and not stored.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpulib import reference as ref
from gpulib.arrays import blocks, output, to_device, to_host
from gpulib.conv.implicit_gemm import device_row_table
from gpulib.conv.tc_kernels import (  # noqa: F401  (the kernels, reached from here)
    BM,
    BN,
    THREADS,
    V2_BK,
    V2_BM,
    V2_BN,
    V2_THREADS,
    V3_A_BYTES,
    V3_ACC,
    V3_BK,
    V3_BM,
    V3_BN,
    V3_SHARED,
    V3_STAGE_BYTES,
    V3_STAGES,
    V3_THREADS,
    V4_PIXEL_TILES,
    V4_SHARED,
    V4_STAGES,
    W_LD,
    X_LD,
    bias_rows_kernel,
    filters_to_krsc16_kernel,
    filters_to_rsck16_kernel,
    nchw_to_nhwc16_kernel,
    nhwc_rows_to_nchw_kernel,
    pixel_tile,
    tc_conv_kernel,
    tc_conv_nhwc_kernel,
    tc_conv_nhwc_uncapped_kernel,
    tc_conv_tma_kernel,
    tc_conv_wgmma_kernel,
    to_fp16_kernel,
)
from gpulib.shapes import bias_or_zeros, check_conv_inputs, conv_output_size, output_shape
from gpulib.tensorcore import tma, wgmma


def nhwc_operands(X, W, b=None):
    """Version 2's operands from NCHW X [N, C, H, W] and W [K, C, R, S]: X as [N·H·W, C8] fp16,
    W as [R·S·C8, K16] fp16 (C padded to a multiple of 8, K to 16, with zeros) and the bias
    repeated in 16 rows [16, K rounded up to 64], fp32. Converted on the device, by kernels:
    nothing goes through the host (NumPy inputs are copied to the device once)."""
    X, W = to_device(X), to_device(W)
    N, C, H, Wd = X.shape
    K, _, R, S = W.shape
    C8, K16 = blocks(C, 8) * 8, blocks(K, 16) * 16
    Xn = cuda.device_array((N * H * Wd, C8), np.float16)
    Wt = cuda.device_array((R * S * C8, K16), np.float16)
    bias_rows = cuda.device_array((16, blocks(K, 64) * 64), np.float32)
    nchw_to_nhwc16_kernel[blocks(Xn.size, 256), 256](X, Xn)
    filters_to_rsck16_kernel[blocks(Wt.size, 256), 256](W, Wt)
    bias_rows_kernel[blocks(bias_rows.size, 256), 256](bias_or_zeros(b, K), bias_rows)
    return Xn, Wt, bias_rows


def wgmma_operands(X, W, b=None):
    """Version 3's operands from NCHW X [N, C, H, W] and W [K, C, R, S]: X as [N·H·W, C8] fp16
    (C padded to a multiple of 8), W as Wk [K, R·S·C8] fp16 and the bias [K] fp32, on the device."""
    X, W = to_device(X), to_device(W)
    N, C, H, Wd = X.shape
    K, _, R, S = W.shape
    C8 = blocks(C, 8) * 8
    Xn = cuda.device_array((N * H * Wd, C8), np.float16)
    Wk = cuda.device_array((K, R * S * C8), np.float16)
    nchw_to_nhwc16_kernel[blocks(Xn.size, 256), 256](X, Xn)
    filters_to_krsc16_kernel[blocks(Wk.size, 256), 256](W, Wk)
    return Xn, Wk, to_device(np.ascontiguousarray(bias_or_zeros(b, K), np.float32))


def supports_wgmma(W_shape, stride) -> str:
    """"" where version 3 can run: any layer, on the simulator or a Hopper GPU."""
    return wgmma.unsupported_device()


def launch_wgmma(Xn, Wk, bias, Y, shape, padding: int, stride: int):
    """Version 3 on prepared operands (``wgmma_operands``); shape = (N, H, W, R, S); Y [N·H'·W', K]."""
    N, H, Wd, R, S = shape
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(Wd, S, padding, stride)
    if tuple(Y.shape) != (N * Ho * Wo, Wk.shape[0]):
        raise ValueError(f"Y must be [N·H'·W', K] = {[N * Ho * Wo, Wk.shape[0]]}, not {list(Y.shape)}")
    grid = (blocks(N * Ho * Wo, V3_BM), blocks(Wk.shape[0], V3_BN))
    wgmma.launch(tc_conv_wgmma_kernel, grid, V3_THREADS, V3_SHARED, Xn, Wk, bias, Y, H, Wd, Ho, Wo, S, padding, stride)


def supports_tma(W_shape, stride) -> str:
    """"" where version 4 can run: stride 1 (a box moves whole rows of neighbouring pixels) on the
    simulator or a Hopper GPU."""
    if stride != 1:
        return f"conv v4 (TMA boxes) needs stride 1, not {stride}"
    return wgmma.unsupported_device()


def launch_tma(Xn, Wk, bias, Y, shape, padding: int, stride: int = 1):
    """Version 4 on version 3's operands (``wgmma_operands``); shape = (N, H, W, R, S); Y [N·H'·W', K]."""
    N, H, Wd, R, S = shape
    reason = supports_tma((Wk.shape[0], None, R, S), stride)
    if reason:
        raise ValueError(reason)
    C = Xn.shape[1]
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(Wd, S, padding, stride)
    if tuple(Y.shape) != (N * Ho * Wo, Wk.shape[0]):
        raise ValueError(f"Y must be [N·H'·W', K] = {[N * Ho * Wo, Wk.shape[0]]}, not {list(Y.shape)}")
    height, width = pixel_tile(Ho, Wo)
    patches_x = blocks(Wo, width)
    patches = blocks(Ho, height) * patches_x
    x_map = tma.cached_map(Xn.reshape(N, H, Wd, C), (1, height, width, tma.BOX_K)).argument
    w_map = tma.cached_map(Wk.reshape(Wk.shape[0], R * S, C), (V3_BN, 1, tma.BOX_K)).argument
    grid = (N * patches, blocks(Wk.shape[0], V3_BN))
    wgmma.launch(tc_conv_tma_kernel, grid, V3_THREADS, V4_SHARED, x_map, w_map, bias, Y, C, Ho, Wo, S, R * S,
                 padding, width, patches_x, patches)


def fp16_copy(a):
    """An fp16 copy of a float32 array, made on the device."""
    a = to_device(a)
    out = cuda.device_array(a.shape, np.float16)
    to_fp16_kernel[blocks(a.size, 256), 256](a.reshape(a.size), out.reshape(out.size))
    return out


def launch_nchw(X16, W16, bias, Y, padding: int, stride: int, table):
    """Version 1 on device operands: X16 [N, C, H, W] and W16 [K, C·R·S] fp16, the bias, Y
    [N, K, H', W'] fp32 and implicit GEMM's row table."""
    N, K, Ho, Wo = Y.shape
    tc_conv_kernel[(blocks(N * Ho * Wo, BN), blocks(K, BM)), THREADS](X16, W16, bias, Y, padding, stride, table)


def launch_nhwc(X2, Wt, bias_rows, Y, shape, padding: int, stride: int):
    """Version 2 on prepared operands (``nhwc_operands``); shape = (N, H, W, R, S)."""
    N, H, Wd, R, S = shape
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(Wd, S, padding, stride)
    rows = blocks(N * Ho * Wo, 16) * 16
    if Y.shape[0] < rows or Y.shape[0] % 16 or Y.shape[1] != Wt.shape[1]:
        raise ValueError(f"Y must be [{rows} (N·H'·W' = {N * Ho * Wo} rounded up to 16), {Wt.shape[1]}], "
                         f"not {list(Y.shape)}: the warps store whole 16x16 tiles")
    grid = (blocks(N * Ho * Wo, V2_BM), blocks(Wt.shape[1], V2_BN))
    tc_conv_nhwc_kernel[grid, V2_THREADS](X2, Wt, bias_rows, Y, H, Wd, Ho, Wo, S, padding, stride)


def nhwc_rows_to_nchw(Yn, shape) -> np.ndarray:
    """Version 2's output [rows ≥ N·H'·W', K16] on the device as a NumPy Y [N, K, H', W']:
    the padding rows and filters cropped, the layout turned back to NCHW."""
    N, K, Ho, Wo = shape
    return to_host(Yn)[:N * Ho * Wo, :K].reshape(N, Ho, Wo, K).transpose(0, 3, 1, 2)


VERSIONS = ("v1", "v2", "v3", "v4")


def conv2d_tc(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None, version: str = "v2"):
    """Y = conv(X, W) + b on the tensor cores: X and W rounded to fp16, sums in fp32, Y float32
    [N, K, H', W']. Version 1 works in NCHW; version 2 converts to NHWC and back. Every conversion
    (to fp16, to NHWC, back to NCHW) is a kernel: nothing goes through the host."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    if version not in VERSIONS:
        raise ValueError(f"unknown version {version!r}; choose one of {VERSIONS}")
    _, C, R, S = W.shape
    Y = output(out, (N, K, Ho, Wo), "out")
    if version in ("v3", "v4"):
        Xn, Wk, bias = wgmma_operands(X, W, b)
        Yn = cuda.device_array((N * Ho * Wo, K), np.float32)
        (launch_wgmma if version == "v3" else launch_tma)(Xn, Wk, bias, Yn, (N, X.shape[2], X.shape[3], R, S),
                                                          padding, stride)
        nhwc_rows_to_nchw_kernel[blocks(Y.size, 256), 256](Yn, Y)
        return Y
    if version == "v2":
        X2, Wt, bias_rows = nhwc_operands(X, W, b)
        Yn = cuda.device_array((blocks(N * Ho * Wo, 16) * 16, Wt.shape[1]), np.float32)
        launch_nhwc(X2, Wt, bias_rows, Yn, (N, X.shape[2], X.shape[3], R, S), padding, stride)
        nhwc_rows_to_nchw_kernel[blocks(Y.size, 256), 256](Yn, Y)
        return Y
    X16 = fp16_copy(X)
    W16 = fp16_copy(W).reshape(K, C * R * S)
    launch_nchw(X16, W16, bias_or_zeros(b, K), Y, padding, stride, device_row_table(C, R, S))
    return Y


def workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1, version: str = "v2") -> int:
    """Extra device memory: the fp16 copies of X and W (v1 adds the row table; v2 pads C to 8
    and K to 16, repeats the bias in 16 rows and stores Y as [N·H'·W' rounded to 16, K16] fp32)."""
    N, C, H, Wd = X_shape
    K, _, R, S = W_shape
    if version == "v1":
        return 2 * (N * C * H * Wd + K * C * R * S) + 12 * C * R * S
    C8, K16 = blocks(C, 8) * 8, blocks(K, 16) * 16
    _, _, Ho, Wo = output_shape(X_shape, W_shape, padding, stride)
    if version in ("v3", "v4"):  # fp16 X and Wk with C8 channels, the bias, Y [N·H'·W', K] fp32
        return 2 * (N * H * Wd * C8 + K * R * S * C8) + 4 * K + 4 * N * Ho * Wo * K
    rows = blocks(N * Ho * Wo, 16) * 16
    return 2 * (N * H * Wd * C8 + R * S * C8 * K16) + 4 * 16 * blocks(K, 64) * 64 + 4 * rows * K16


def reference(X, W, b=None, padding: int = 0, stride: int = 1) -> np.ndarray:
    """What the tensor cores compute, in float64: the fp16-rounded X and W convolved exactly."""
    as16 = lambda a: np.asarray(a, np.float16).astype(np.float64)  # noqa: E731
    return ref.conv2d(as16(X), as16(W), b, padding, stride)
