"""16.5: implicit-GEMM convolution on the tensor cores, fp16 inputs, fp32 sums: the ladder's one
convention, and ``conv2d_tc`` for NCHW layers.

    operands = prepare(X, W, b, padding, stride, version="v3")   # the version's layouts, on the device
    launch(operands, Y)                                           # Y of operands.out_shape
    Y = conv2d_tc(X, W, b, padding, stride, version="v2")         # NCHW in and out

Version 1 works in NCHW on WMMA fragments (tensor-core GEMM v2's tiling, X_col's tile gathered
through implicit GEMM's row table); version 2 in NHWC with 16-byte asynchronous gathers;
version 3 on Hopper's warpgroup MMA; version 4 brings its tiles by TMA as boxes of the image
(stride 1); version 5 is version 4 persistent, its filters loaded once per block and kept;
version 6 is version 5 with one box per filter column instead of one per tap (the patch and
the rows below it, which every tap of that column reads from); version 7 is version 6 with
the operands the other way round (the filters as the multiply's A, a patch's pixels as its B)
and roles: a producer warpgroup and two multiplying warpgroups taking turns at the patches.
The kernels are in conv/tc_kernels.py; 16.5's notebook explains each. What must stay true:
every version is prepared and launched the same way, checked before any launch.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import numpy as np
from numba import cuda

from gpulib import reference as ref
from gpulib.arrays import (
    blocks,
    is_device_array,
    output,
    require,
    require_bool,
    require_int,
    require_real,
    to_device,
    to_host,
)
from gpulib.conv.implicit_gemm import device_row_table
from gpulib.conv.tc_kernels import (  # noqa: F401  (the kernels, reached from here)
    BM,
    BN,
    LAYOUT_ROWS,
    LAYOUT_TILE,
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
    V5_FILTER_BOX_BYTES,
    V5_MAX_FILTER_BOXES,
    V5_RING_BYTES,
    V5_STAGES,
    V6_MAX_STAGES,
    V7_KERNELS,
    V7_MAX_STAGES,
    V7_THREADS,
    V7_TILES,
    W_LD,
    X_LD,
    bias_rows_kernel,
    filters_to_krsc16_kernel,
    filters_to_rsck16_kernel,
    halo_tile,
    make_tc_conv_v5,
    make_tc_conv_v6,
    make_tc_conv_v7,
    nchw_to_nhwc16_kernel,
    nhwc_rows_to_nchw_kernel,
    pixel_tile,
    tc_conv_halo16_kernel,
    tc_conv_halo_kernel,
    tc_conv_kernel,
    tc_conv_nhwc_kernel,
    tc_conv_nhwc_uncapped_kernel,
    tc_conv_persistent16_kernel,
    tc_conv_persistent_kernel,
    tc_conv_tma_kernel,
    tc_conv_wgmma_kernel,
    to_fp16_kernel,
    v7_tile,
)
from gpulib.gemm.tensorcore import resident_blocks
from gpulib.shapes import (
    bias_or_zeros,
    check_conv_inputs,
    conv_output_size,
    filter_shape,
    layer_shapes,
    output_shape,
    require_shape,
)
from gpulib.tensorcore import tma, wgmma

VERSIONS = ("v1", "v2", "v3", "v4", "v5", "v6", "v7")
MAX_SHARED = 227 * 1024  # a block's opt-in shared memory (compute capability 9.0)
# what a halo ring's dynamic shared memory may take: the kernel's static shared arrays (conv v6's
# and v7's mbarriers, at most 33 of 8 bytes) come out of the same 227 KiB, so a launch asking for
# all of it is refused by the driver (cuKernelSetAttribute: CUDA_ERROR_INVALID_VALUE)
MAX_DYNAMIC_SHARED = MAX_SHARED - 1024


@dataclass(frozen=True)
class Operands:
    """One layer's operands as one version reads them, on the device (made by ``prepare``):

        v1  X [N, C, H, W] fp16, W [K, C·R·S] fp16, bias [K] fp32, table (implicit GEMM's rows)
        v2  X [N·H·W, C8] fp16, W [R·S·C8, K16] fp16, bias [16, K rounded to 64] fp32 (16 rows)
        v3  X [N·H·W, C8] fp16, W [K, R·S·C8] fp16 (K-major, "KRSC"), bias [K] fp32
        v4  as v3
        v5  as v3
        v6  as v3
        v7  as v3

    with C8 = C rounded up to 8 and K16 = K to 16 (zeros). ``out_shape`` is what ``launch`` writes:
    Y [N, K, H', W'] for v1, Y [N·H'·W' rounded up to 16, K16] for v2, Y [N·H'·W', K] for v3 and v4."""

    version: str
    X: object
    W: object
    bias: object
    table: object  # v1's row table, else None
    X_shape: tuple  # the layer in NCHW: X [N, C, H, W], W [K, C, R, S]
    W_shape: tuple
    padding: int
    stride: int

    @property
    def out_shape(self) -> tuple:
        N, K, Ho, Wo = output_shape(self.X_shape, self.W_shape, self.padding, self.stride)
        if self.version == "v1":
            return (N, K, Ho, Wo)
        if self.version == "v2":
            return (blocks(N * Ho * Wo, 16) * 16, blocks(K, 16) * 16)
        return (N * Ho * Wo, K)


@filter_shape
def supports(W_shape, stride: int = 1, *, version: str = "v2") -> str | None:
    """Why ``version`` cannot run a layer with filters ``W_shape`` [K, C, R, S] and ``stride``, or None:
    v1 and v2 run any layer; v3-v5 need wgmma (the simulator, or compute capability 9.0 on a
    GPU), v4-v7 also stride 1 (a box moves whole rows of neighbouring pixels), v5-v7 filters
    that fit their shared memory (R·S·C/64 ≤ V5_MAX_FILTER_BOXES; v6 and v7 beside two of their
    tallest boxes)."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, not {version!r}")
    if len(W_shape) != 4 or any(int(d) < 1 for d in W_shape):
        raise ValueError(f"W_shape must be [K, C, R, S] of positive sizes, not {tuple(W_shape)}")
    if version in ("v1", "v2"):
        return None
    if version in ("v4", "v5", "v6", "v7") and stride != 1:
        return f"conv {version} (TMA boxes) needs stride 1, not {stride}"
    K, C, R, S = (int(d) for d in W_shape)
    boxes = R * S * blocks(blocks(C, 8) * 8, V3_BK)
    if version in ("v5", "v6", "v7") and boxes > V5_MAX_FILTER_BOXES:
        return (f"conv {version} keeps a block's filters in shared memory: R·S x (C / 64) = {boxes} boxes of 64 "
                f"filters, at most {V5_MAX_FILTER_BOXES}")
    tallest = max((128 // w + R - 1) * w for w in V4_PIXEL_TILES)  # a box's pixels, at its widest patch
    if version == "v6" and v6_shared_bytes((K, C, R, S), 2, tallest, True) > MAX_DYNAMIC_SHARED:
        return f"conv v6 needs two halo boxes of {R} pixel rows beside its filters: R = {R} is too tall"
    tallest = max((h + R - 1) * w for h, w in V7_TILES)
    if version == "v7" and v7_shared_bytes((K, C, R, S), 2, tallest) > MAX_DYNAMIC_SHARED:
        return f"conv v7 needs two halo boxes of {R} pixel rows beside its filters: R = {R} is too tall"
    return wgmma.unsupported_device() or None


def prepare(X, W, b=None, padding: int = 0, stride: int = 1, *, version: str = "v2") -> Operands:
    """``version``'s operands from NCHW X [N, C, H, W], W [K, C, R, S] and b [K] (checked first), converted
    on the device by kernels: nothing goes through the host (NumPy inputs are copied over once)."""
    check_conv_inputs(X, W, b, padding, stride)
    reason = supports(W.shape, stride, version=version)
    if reason:
        raise ValueError(reason)
    X, W = to_device(X), to_device(W)
    N, C, H, Wd = X.shape
    K, _, R, S = W.shape
    C8, K16 = blocks(C, 8) * 8, blocks(K, 16) * 16
    layer = dict(X_shape=tuple(X.shape), W_shape=tuple(W.shape), padding=padding, stride=stride)
    if version == "v1":
        return Operands("v1", fp16_copy(X), fp16_copy(W).reshape(K, C * R * S), to_device(bias_or_zeros(b, K)),
                        device_row_table(C, R, S), **layer)
    Xn = _workspace("X", (N * H * Wd, C8), np.float16)
    _to_nhwc16(X, Xn)
    if version == "v2":
        Wt = cuda.device_array((R * S * C8, K16), np.float16)
        bias_rows = cuda.device_array((16, blocks(K, 64) * 64), np.float32)
        filters_to_rsck16_kernel[blocks(Wt.size, 256), 256](W, Wt)
        bias_rows_kernel[blocks(bias_rows.size, 256), 256](bias_or_zeros(b, K), bias_rows)
        return Operands("v2", Xn, Wt, bias_rows, None, **layer)
    Wk = _workspace("W", (K, R * S * C8), np.float16)
    filters_to_krsc16_kernel[blocks(Wk.size, 256), 256](W, Wk)
    return Operands(version, Xn, Wk, _bias_vector(b, K), None, **layer)


_WORKSPACES: dict = {}  # (role, shape, dtype) -> the device buffer prepare and conv2d_tc reuse


def _workspace(role: str, shape: tuple, dtype):
    """A device buffer for one of the converted operands (or v2-v4's output rows), made once per
    shape: a layer called again (every training step) allocates nothing. The next call of the
    same shape writes it again, so ``prepare``'s operands hold until then."""
    key = (role, tuple(shape), np.dtype(dtype))
    if key not in _WORKSPACES:
        _WORKSPACES[key] = cuda.device_array(shape, dtype)
    return _WORKSPACES[key]


_ZEROS: dict = {}


def _bias_vector(b, K: int):
    """The bias as v3 and v4 read it, a float32 device vector [K]: a contiguous float32 device
    ``b`` as it is, a NumPy one copied over, None as K zeros (made once per K)."""
    if b is None:
        if K not in _ZEROS:
            _ZEROS[K] = cuda.to_device(np.zeros(K, np.float32))
        return _ZEROS[K]
    if is_device_array(b) and np.dtype(b.dtype) == np.float32 and b.is_c_contiguous():
        return b
    return to_device(np.ascontiguousarray(to_host(b), np.float32))


def _to_nhwc16(X, Xn) -> None:
    """Xn [N·H·W, C8] fp16 = X [N, C, H, W] (float32, on the device) in NHWC, channels padded with
    zeros: one kernel (nchw_to_nhwc16_kernel's tiles)."""
    N, C, H, Wd = X.shape
    grid = (blocks(H * Wd, LAYOUT_TILE), blocks(Xn.shape[1], LAYOUT_TILE), N)
    nchw_to_nhwc16_kernel[grid, (LAYOUT_TILE, LAYOUT_ROWS)](X.reshape(N, C * H * Wd), Xn, H * Wd)


def _to_nchw_rows(Yn, Y) -> None:
    """Y [N, K, H', W'] (float32, on the device) = the rows Yn [≥ N·H'·W', ≥ K] turned back to
    NCHW: one kernel (nhwc_rows_to_nchw_kernel's tiles)."""
    N, K, Ho, Wo = Y.shape
    grid = (blocks(Ho * Wo, LAYOUT_TILE), blocks(K, LAYOUT_TILE), N)
    nhwc_rows_to_nchw_kernel[grid, (LAYOUT_TILE, LAYOUT_ROWS)](Yn, Y.reshape(N, K * Ho * Wo), Ho * Wo)


def launch(operands: Operands, Y) -> None:
    """Every version the same way: ``operands`` from ``prepare``, Y a float32 device array of
    ``operands.out_shape``; checked before any launch (ValueError naming the argument)."""
    if not isinstance(operands, Operands):
        raise ValueError(f"operands must come from prepare(...), not {type(operands).__name__}")
    if not is_device_array(Y) or np.dtype(Y.dtype) != np.float32 or tuple(Y.shape) != operands.out_shape:
        raise ValueError(f"Y must be a float32 device array of shape {list(operands.out_shape)} for {operands.version}, "
                         f"not {type(Y).__name__} {np.dtype(getattr(Y, 'dtype', None)).name} {list(getattr(Y, 'shape', ()))}")
    if not (Y.is_c_contiguous() if hasattr(Y, "is_c_contiguous") else True):
        raise ValueError("Y must be C-contiguous (the kernels write it row by row)")
    reason = supports(operands.W_shape, operands.stride, version=operands.version)
    if reason:
        raise ValueError(reason)
    o = operands
    (N, _, H, Wd), (K, _, R, S) = o.X_shape, o.W_shape
    Ho, Wo = conv_output_size(H, R, o.padding, o.stride), conv_output_size(Wd, S, o.padding, o.stride)
    if o.version == "v1":
        tc_conv_kernel[(blocks(N * Ho * Wo, BN), blocks(K, BM)), THREADS](o.X, o.W, o.bias, Y, o.padding, o.stride,
                                                                           o.table)
    elif o.version == "v2":
        grid = (blocks(N * Ho * Wo, V2_BM), blocks(o.W.shape[1], V2_BN))
        tc_conv_nhwc_kernel[grid, V2_THREADS](o.X, o.W, o.bias, Y, H, Wd, Ho, Wo, S, o.padding, o.stride)
    else:
        _launch_wgmma(o.version, o.X, o.W, o.bias, Y, N, H, Wd, R, S, o.padding, o.stride)


def _launch_wgmma(version, X, Wk, bias, Y, N, H, Wd, R, S, padding, stride) -> tuple:
    """Versions 3-7 on X [N·H·W, C8] and Wk [K, R·S·C8] fp16, bias [K] float32, into Y [N·H'·W', K]
    float32 (fp16 for v5-v7; any arrays of those sizes in that order: the 4-D NHWC forms are the
    same memory). Returns the launch, (kernel, grid, block, shared bytes, arguments), which
    ``conv2d_tc_nhwc16`` keeps to repeat."""
    plan = launch_plan(version, X, Wk, bias, Y, N, H, Wd, R, S, padding, stride)
    wgmma.launch(*plan[:4], *plan[4])
    return plan


def launch_plan(version, X, Wk, bias, Y, N, H, Wd, R, S, padding, stride, tile=None) -> tuple:
    """What ``_launch_wgmma`` launches: (kernel, grid, block, shared bytes, arguments); ``tile``,
    one of V7_TILES, overrides v7's choice (16.5's benchmark times each)."""
    C8, K = tuple(X.shape)[-1], Wk.shape[0]
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(Wd, S, padding, stride)
    X, Wk, Y = X.reshape(N * H * Wd, C8), Wk.reshape(K, Wk.size // K), Y.reshape(N * Ho * Wo, K)
    if version == "v3":
        grid = (blocks(N * Ho * Wo, V3_BM), blocks(K, V3_BN))
        return tc_conv_wgmma_kernel, grid, V3_THREADS, V3_SHARED, (X, Wk, bias, Y, H, Wd, Ho, Wo, S, padding, stride)
    w_map = tma.cached_map(Wk.reshape(K, R * S, C8), (V3_BN, 1, tma.BOX_K)).argument
    half = np.dtype(Y.dtype) == np.float16
    cols = blocks(K, V3_BN)  # (v5-v7: one block per SM, cols of them per patch of pixels, each through many patches)
    if version == "v7":  # v6's boxes, its own patch shape; Y written straight from the registers, any dtype
        height, width, patches_x, patches, box_bytes, stages, shared = _v7_plan(Ho, Wo, K, C8, R, S, tile)
        grid = min(N * patches, max(resident_blocks() // cols, 1)) * cols
        x_map = tma.cached_map(X.reshape(N, H, Wd, C8), (1, height + R - 1, width, tma.BOX_K)).argument
        kernel = V7_KERNELS[(height, width), "fp16" if half else "fp32"]
        return kernel, grid, V7_THREADS, shared, (x_map, w_map, bias, Y, C8, Ho, Wo, R, S, padding, patches_x,
                                                  patches, cols, box_bytes, stages)
    if version == "v6":  # as v5, its boxes the patch and the R - 1 rows below it, its patch shape its own
        height, width, patches_x, patches, box_bytes, stages, shared = _v6_plan(Ho, Wo, K, C8, R, S, half)
        grid = min(N * patches, max(resident_blocks() // cols, 1)) * cols
        x_map = tma.cached_map(X.reshape(N, H, Wd, C8), (1, height + R - 1, width, tma.BOX_K)).argument
        kernel, y_map = (tc_conv_halo16_kernel, _y_map(Y, N, Ho, Wo, height, width)) if half else \
            (tc_conv_halo_kernel, x_map)  # (fp32 Y: the map is not read)
        return kernel, grid, V3_THREADS, shared, (x_map, w_map, y_map, bias, Y, C8, Ho, Wo, R, S, padding, width,
                                                  patches_x, patches, cols, box_bytes, stages)
    height, width = pixel_tile(Ho, Wo)
    patches_x = blocks(Wo, width)
    patches = blocks(Ho, height) * patches_x
    x_map = tma.cached_map(X.reshape(N, H, Wd, C8), (1, height, width, tma.BOX_K)).argument
    if version == "v5":
        grid = min(N * patches, max(resident_blocks() // cols, 1)) * cols
        kernel, y_map = (tc_conv_persistent16_kernel, _y_map(Y, N, Ho, Wo, height, width)) if half else \
            (tc_conv_persistent_kernel, x_map)
        return kernel, grid, V3_THREADS, v5_shared_bytes((K, C8, R, S), half), (
            x_map, w_map, y_map, bias, Y, C8, Ho, Wo, S, R * S, padding, width, patches_x, patches, cols)
    return tc_conv_tma_kernel, (N * patches, cols), V3_THREADS, V4_SHARED, (
        x_map, w_map, bias, Y, C8, Ho, Wo, S, R * S, padding, width, patches_x, patches)


def _y_map(Y, N, Ho, Wo, height, width):
    """A 16-bit Y's tensor map for v5 and v6's TMA stores: boxes of one patch of 64 filters."""
    return tma.cached_map(Y.reshape(N, Ho, Wo, Y.shape[1]), (1, height, width, tma.BOX_K)).argument


def v5_shared_bytes(W_shape, fp16_out: bool = False) -> int:
    """conv v5's dynamic shared memory for filters W_shape [K, C, R, S]: its ring of X boxes, the
    R·S x (C / 64) filter boxes it keeps, the box of 16-bit results if Y is fp16, and the
    alignment of the first buffer."""
    K, C, R, S = require_shape(W_shape, "W_shape", "[K, C, R, S]")
    require_bool(fp16_out, "fp16_out")
    filters = R * S * blocks(blocks(C, 8) * 8, V3_BK) * V5_FILTER_BOX_BYTES
    return V5_RING_BYTES + filters + (V3_A_BYTES if fp16_out else 0) + wgmma.ATOM_BYTES


@functools.lru_cache(maxsize=64)
def _v6_plan(Ho: int, Wo: int, K: int, C8: int, R: int, S: int, half: bool) -> tuple:
    """conv v6's launch for one layer, worked out once: (patch height, width, patches across,
    patches per image, box bytes, ring stages, shared bytes). Worked out at every call, its
    Python (the tile search, the checked sizes) cost more than the kernel's own time on a GPU."""
    return _halo_plan(halo_tile(Ho, Wo, R), Ho, Wo, (K, C8, R, S), half, V6_MAX_STAGES, "v6")


def _halo_plan(tile: tuple, Ho: int, Wo: int, W_shape: tuple, half: bool, most: int, version: str) -> tuple:
    """v6's and v7's launch in patches of ``tile``: (patch height, width, patches across, patches
    per image, box bytes, ring stages, shared bytes) for boxes of the patch and R - 1 rows."""
    height, width = tile
    patches_x = blocks(Wo, width)
    pixels = (height + W_shape[2] - 1) * width
    stages = _ring_stages(W_shape, pixels, half, most, version)
    return (height, width, patches_x, blocks(Ho, height) * patches_x, pixels * 2 * tma.BOX_K, stages,
            v6_shared_bytes(W_shape, stages, pixels, half))


def v6_shared_bytes(W_shape, stages: int, box_pixels: int, fp16_out: bool = False) -> int:
    """conv v6's dynamic shared memory: ``stages`` halo boxes of ``box_pixels`` pixels (64
    channels each), the filter boxes it keeps, a box of 16-bit results if Y is fp16, alignment."""
    K, C, R, S = require_shape(W_shape, "W_shape", "[K, C, R, S]")
    stages, box_pixels = require_int(stages, "stages", 1), require_int(box_pixels, "box_pixels", 1)
    require_bool(fp16_out, "fp16_out")
    filters = R * S * blocks(blocks(C, 8) * 8, V3_BK) * V5_FILTER_BOX_BYTES
    return stages * box_pixels * 2 * V3_BK + filters + (V3_A_BYTES if fp16_out else 0) + wgmma.ATOM_BYTES


def v6_stages(W_shape, box_pixels: int, fp16_out: bool = False) -> int:
    """How many halo boxes conv v6's ring holds: as many as fit beside its filters, at most V6_MAX_STAGES."""
    return _ring_stages(W_shape, box_pixels, fp16_out, V6_MAX_STAGES, "v6")


def _ring_stages(W_shape, box_pixels: int, fp16_out: bool, most: int, version: str) -> int:
    """The most halo boxes (2 .. ``most``) that fit in shared memory beside the filters."""
    fit = [s for s in range(2, most + 1) if v6_shared_bytes(W_shape, s, box_pixels, fp16_out) <= MAX_DYNAMIC_SHARED]
    if not fit:
        raise ValueError(f"box_pixels={box_pixels}: conv {version} needs two such boxes beside the filters "
                         f"{tuple(W_shape)} in {MAX_DYNAMIC_SHARED} bytes of shared memory")
    return fit[-1]


@functools.lru_cache(maxsize=64)
def _v7_plan(Ho: int, Wo: int, K: int, C8: int, R: int, S: int, tile=None) -> tuple:
    """conv v7's launch for one layer, worked out once: (patch height, width, patches across,
    patches per image, box bytes, ring stages, shared bytes), in v7_tile's patches or ``tile``'s."""
    return _halo_plan(tile or v7_tile(Ho, Wo, R), Ho, Wo, (K, C8, R, S), False, V7_MAX_STAGES, "v7")


def v7_shared_bytes(W_shape, stages: int, box_pixels: int) -> int:
    """conv v7's dynamic shared memory: ``stages`` halo boxes of ``box_pixels`` pixels (64 channels
    each), the filter boxes it keeps, alignment: v6's without a staged box (its results leave
    from registers)."""
    return v6_shared_bytes(W_shape, stages, box_pixels, False)


def v7_stages(W_shape, box_pixels: int) -> int:
    """How many halo boxes conv v7's ring holds: as many as fit beside its filters, at most V7_MAX_STAGES."""
    return _ring_stages(W_shape, box_pixels, False, V7_MAX_STAGES, "v7")


NHWC16_VERSIONS = ("v3", "v4", "v5", "v6", "v7")  # the versions that read NHWC fp16 as it is


def image_nhwc16(X, *, out=None):
    """X [N, H, W, C8] fp16 on the device from X [N, C, H, W] (NCHW, NumPy or device float32),
    channels padded with zeros to a multiple of 8: what a channels-last fp16 model holds
    between its layers. One kernel."""
    require(X, "X", 4, layout="[N, C, H, W]")
    X = to_device(X)
    N, C, H, Wd = X.shape
    Xn = output(out, (N, H, Wd, blocks(C, 8) * 8), "out", dtype=np.float16)
    _to_nhwc16(X, Xn.reshape(N * H * Wd, Xn.shape[3]))
    return Xn


def filters_krsc16(W, *, out=None):
    """Wk [K, R, S, C8] fp16 on the device from filters W [K, C, R, S] (NumPy or device float32),
    channels padded with zeros: the filters as ``conv2d_tc_nhwc16`` reads them. A layer converts
    its filters when they change (after an update), not at every call. One kernel."""
    require(W, "W", 4, layout="[K, C, R, S]")
    W = to_device(W)
    K, C, R, S = W.shape
    Wk = output(out, (K, R, S, blocks(C, 8) * 8), "out", dtype=np.float16)
    filters_to_krsc16_kernel[blocks(Wk.size, 256), 256](W, Wk.reshape(K, Wk.size // K))
    return Wk


def _require_device16(a, name: str, layout: str) -> None:
    if not is_device_array(a):
        raise ValueError(f"{name} {layout} must be a device array of fp16 (image_nhwc16 and filters_krsc16 make "
                         f"them), not {type(a).__name__}")
    require(a, name, 4, dtype=np.float16, layout=layout)


def conv2d_tc_nhwc16(X, Wk, b=None, padding: int = 0, stride: int = 1, *, out=None, version: str = "v3"):
    """Y [N, H', W', K] float32 (NHWC; fp16 with versions v5-v7 when ``out`` is fp16, as cuDNN writes
    it) = conv(X, W) + b on the tensor cores with X already NHWC
    fp16 [N, H, W, C] and the filters KRSC fp16 [K, R, S, C] (C a multiple of 8; image_nhwc16 and
    filters_krsc16 make them), all on the device: nothing is converted, copied or allocated
    (given ``out``) on the way, so the call costs its kernel and its launch. ``version`` "v3"
    (cp.async gathers), "v4" (TMA boxes, stride 1), "v5" (v4 persistent), "v6" (v5 with a box
    per filter column) or "v7" (v6 with the operands swapped and roles); b a float32 [K] (None: zeros). Every
    precondition is a ValueError before the launch.

    A call on the very arrays of an earlier call (the same objects, as a layer's buffers are at
    every step) repeats that call's checked launch: the checks, the patch plan, the tensor maps
    and the reshaped views cost more Python than a fast kernel's whole time on a GPU."""
    key = _call_key(X, Wk, b, out, padding, stride, version)
    plan = _CALLS.get(key) if key is not None else None
    if plan is not None and all(ref() is a for ref, a in zip(plan[0], (X, Wk, b, out))):
        wgmma.launch(*plan[1][:4], *plan[1][4])
        return out
    if version not in NHWC16_VERSIONS:
        raise ValueError(f"version must be one of {NHWC16_VERSIONS}, not {version!r}")
    _require_device16(X, "X", "[N, H, W, C]")
    _require_device16(Wk, "Wk", "[K, R, S, C]")
    padding, stride = require_int(padding, "padding", 0), require_int(stride, "stride", 1)
    (N, H, Wd, C), (K, R, S, Cw) = X.shape, Wk.shape
    if C % 8 or Cw != C:
        raise ValueError(f"X [N, H, W, C] and Wk [K, R, S, C] need the same C, a multiple of 8 (16-byte copies); got "
                         f"X {tuple(X.shape)} and Wk {tuple(Wk.shape)}")
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(Wd, S, padding, stride)  # (filters that fit)
    if b is not None:
        require(b, "b", 1, layout="[K]")
        if b.shape[0] != K:
            raise ValueError(f"b must have K = {K} values (Wk's filters), not {b.shape[0]}")
    half = out is not None and hasattr(out, "dtype") and np.dtype(out.dtype) == np.float16
    if half and version not in ("v5", "v6", "v7"):
        raise ValueError(f"out in fp16 needs version 'v5', 'v6' or 'v7' (their epilogues round to fp16), "
                         f"not {version!r}")
    if half and version != "v7" and K % 8:
        raise ValueError(f"out in fp16 needs K a multiple of 8 (the copy engine writes 16-byte rows); got K={K}")
    Y = output(out, (N, Ho, Wo, K), "out", dtype=np.float16 if half else np.float32)
    reason = supports((K, C, R, S), stride, version=version)
    if reason:
        raise ValueError(reason)
    launched = _launch_wgmma(version, X, Wk, _bias_vector(b, K), Y, N, H, Wd, R, S, padding, stride)
    if key is not None:
        _remember_call(key, (X, Wk, b, out), launched)
    return Y


_CALLS: dict = {}  # conv2d_tc_nhwc16's checked launches: key -> (weak references to its arrays, the launch, finalizers)
MAX_CALLS = 64


def _call_key(X, Wk, b, out, padding, stride, version):
    """What makes two calls the same: the very arrays (id, shape, dtype: a CuPy array's shape can
    be set in place) and the other arguments; None where a call cannot be repeated (no ``out``:
    each call makes its own; a host ``b``, copied over at each call)."""
    if out is None or not (b is None or is_device_array(b)):
        return None
    try:
        return (version, padding, stride) + tuple(
            (id(a), tuple(a.shape), a.dtype) if a is not None else None for a in (X, Wk, b, out))
    except (AttributeError, TypeError):  # not arrays: the checks say what is wrong
        return None


def _remember_call(key, arrays, launched) -> None:
    """Keep ``launched`` for ``key`` while all its arrays live (weak references: the plan's views
    and maps would otherwise keep freed arrays' memory), at most MAX_CALLS of them."""
    try:
        refs = tuple(weakref.ref(a) if a is not None else _none for a in arrays)
    except TypeError:  # an array type without weak references: not remembered
        return
    _forget(key)
    while _CALLS and len(_CALLS) >= MAX_CALLS:
        _forget(next(iter(_CALLS)))  # the oldest
    finalizers = tuple(weakref.finalize(a, _CALLS.pop, key, None) for a in arrays if a is not None)
    _CALLS[key] = (refs, launched, finalizers)


def _forget(key) -> None:
    """Drop ``key``'s launch and the callbacks that would have dropped it (none pile up on a
    long-lived array whose launch is evicted and remembered again)."""
    entry = _CALLS.pop(key, None)
    if entry is not None:
        for finalizer in entry[2]:
            finalizer.detach()


def _none():
    return None


def fp16_copy(a):
    """An fp16 copy of a float32 array, made on the device."""
    require(a, "a", None)  # float32, C-contiguous, not empty
    a = to_device(a)
    out = cuda.device_array(a.shape, np.float16)
    to_fp16_kernel[blocks(a.size, 256), 256](a.reshape(a.size), out.reshape(out.size))
    return out


def to_nchw(Yn, shape) -> np.ndarray:
    """A v2-v4 output [rows ≥ N·H'·W', ≥ K] on the device as a NumPy Y [N, K, H', W'] (shape): the
    padding rows and filters cropped, the layout turned back to NCHW."""
    N, K, Ho, Wo = require_shape(shape, "shape", "[N, K, H', W']")
    require(Yn, "Yn", 2, layout="[rows, filters]")
    if Yn.shape[0] < N * Ho * Wo or Yn.shape[1] < K:
        raise ValueError(f"Yn {tuple(Yn.shape)} is smaller than shape {tuple(shape)} needs: "
                         f"[≥ N·H'·W' = {N * Ho * Wo}, ≥ K = {K}]")
    return to_host(Yn)[:N * Ho * Wo, :K].reshape(N, Ho, Wo, K).transpose(0, 3, 1, 2)


def conv2d_tc(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None, version: str = "v2"):
    """Y = conv(X, W) + b on the tensor cores: X and W rounded to fp16, sums in fp32, Y float32
    [N, K, H', W'] on the device. Version 1 works in NCHW; versions 2-4 convert to NHWC and back.
    Every conversion (to fp16, to NHWC, back to NCHW) is a kernel: nothing goes through the host."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, not {version!r}")
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    Y = output(out, (N, K, Ho, Wo), "out")
    operands = prepare(X, W, b, padding, stride, version=version)
    if version == "v1":
        launch(operands, Y)
        return Y
    Yn = _workspace("Y", operands.out_shape, np.float32)
    launch(operands, Yn)
    _to_nchw_rows(Yn, Y)
    return Y


@layer_shapes
def workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1, *, version: str = "v2") -> int:
    """Extra device memory: the fp16 copies of X and W (v1 adds the row table; v2 pads C to 8
    and K to 16, repeats the bias in 16 rows and stores Y as [N·H'·W' rounded to 16, K16] fp32)."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, not {version!r}")
    N, C, H, Wd = X_shape
    K, _, R, S = W_shape
    if version == "v1":
        return 2 * (N * C * H * Wd + K * C * R * S) + 12 * C * R * S
    C8, K16 = blocks(C, 8) * 8, blocks(K, 16) * 16
    _, _, Ho, Wo = output_shape(X_shape, W_shape, padding, stride)
    if version in ("v3", "v4", "v5", "v6", "v7"):  # fp16 X and Wk with C8 channels, the bias, Y [N·H'·W', K] fp32
        return 2 * (N * H * Wd * C8 + K * R * S * C8) + 4 * K + 4 * N * Ho * Wo * K
    rows = blocks(N * Ho * Wo, 16) * 16
    return 2 * (N * H * Wd * C8 + R * S * C8 * K16) + 4 * 16 * blocks(K, 64) * 64 + 4 * rows * K16


# one function per version, as the registry (gpulib/conv/algorithms.py) lists them
def conv2d_tc_nchw(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 1: NCHW, fragments from shared tiles gathered through implicit GEMM's row table."""
    return conv2d_tc(X, W, b, padding, stride, out=out, version="v1")


def conv2d_tc_nhwc(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 2: NHWC, 16-byte asynchronous gathers, two pairs of shared tiles."""
    return conv2d_tc(X, W, b, padding, stride, out=out, version="v2")


def conv2d_tc_wgmma(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 3: NHWC on Hopper's warpgroup MMA, a ring of 4 swizzled buffers filled by cp.async."""
    return conv2d_tc(X, W, b, padding, stride, out=out, version="v3")


def conv2d_tc_tma(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 4: version 3 with its tiles brought by TMA as 4-D boxes of the image (stride 1)."""
    return conv2d_tc(X, W, b, padding, stride, out=out, version="v4")


def conv2d_tc_persistent(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 5: version 4 persistent, a block's filters loaded once and kept (stride 1)."""
    return conv2d_tc(X, W, b, padding, stride, out=out, version="v5")


def conv2d_tc_persistent_nhwc16(X, Wk, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 5 on NHWC fp16 X and KRSC fp16 filters as they are (conv2d_tc_nhwc16)."""
    return conv2d_tc_nhwc16(X, Wk, b, padding, stride, out=out, version="v5")


def conv2d_tc_wgmma_nhwc16(X, Wk, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 3 on NHWC fp16 X and KRSC fp16 filters as they are (conv2d_tc_nhwc16)."""
    return conv2d_tc_nhwc16(X, Wk, b, padding, stride, out=out, version="v3")


def conv2d_tc_tma_nhwc16(X, Wk, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 4 on NHWC fp16 X and KRSC fp16 filters as they are (conv2d_tc_nhwc16)."""
    return conv2d_tc_nhwc16(X, Wk, b, padding, stride, out=out, version="v4")


def reference(X, W, b=None, padding: int = 0, stride: int = 1) -> np.ndarray:
    """What the tensor cores compute, in float64: the fp16-rounded X and W convolved exactly."""
    as16 = lambda a, name: require_real(a, name, "[N, C, H, W]" if name == "X" else "[K, C, R, S]").astype(  # noqa: E731
        np.float16).astype(np.float64)
    return ref.conv2d(as16(X, "X"), as16(W, "W"), b, padding, stride)


@filter_shape
def supports_nchw(W_shape, stride: int = 1) -> str | None:
    return supports(W_shape, stride, version="v1")


@filter_shape
def supports_nhwc(W_shape, stride: int = 1) -> str | None:
    return supports(W_shape, stride, version="v2")


@filter_shape
def supports_wgmma(W_shape, stride: int = 1) -> str | None:
    return supports(W_shape, stride, version="v3")


@filter_shape
def supports_tma(W_shape, stride: int = 1) -> str | None:
    return supports(W_shape, stride, version="v4")


@layer_shapes
def workspace_nchw(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    return workspace_bytes(X_shape, W_shape, padding, stride, version="v1")


@layer_shapes
def workspace_nhwc(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    return workspace_bytes(X_shape, W_shape, padding, stride, version="v2")


@layer_shapes
def workspace_wgmma(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    return workspace_bytes(X_shape, W_shape, padding, stride, version="v3")


@filter_shape
def supports_persistent(W_shape, stride: int = 1) -> str | None:
    return supports(W_shape, stride, version="v5")


@layer_shapes
def workspace_persistent(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    return workspace_bytes(X_shape, W_shape, padding, stride, version="v5")


@layer_shapes
def workspace_tma(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    return workspace_bytes(X_shape, W_shape, padding, stride, version="v4")


def conv2d_tc_halo(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 6: version 5 with one box per filter column, which its R taps share (stride 1)."""
    return conv2d_tc(X, W, b, padding, stride, out=out, version="v6")


def conv2d_tc_halo_nhwc16(X, Wk, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 6 on channels-last fp16 operands as they are (``conv2d_tc_nhwc16``)."""
    return conv2d_tc_nhwc16(X, Wk, b, padding, stride, out=out, version="v6")


@filter_shape
def supports_halo(W_shape, stride: int = 1) -> str | None:
    return supports(W_shape, stride, version="v6")


@layer_shapes
def workspace_halo(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    return workspace_bytes(X_shape, W_shape, padding, stride, version="v6")


def conv2d_tc_pingpong(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 7: version 6 with the filters as A, the pixels as B and a producer warpgroup
    feeding two multiplying warpgroups that take turns at the patches (stride 1)."""
    return conv2d_tc(X, W, b, padding, stride, out=out, version="v7")


def conv2d_tc_pingpong_nhwc16(X, Wk, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Version 7 on NHWC fp16 X and KRSC fp16 filters as they are (conv2d_tc_nhwc16)."""
    return conv2d_tc_nhwc16(X, Wk, b, padding, stride, out=out, version="v7")


@filter_shape
def supports_pingpong(W_shape, stride: int = 1) -> str | None:
    return supports(W_shape, stride, version="v7")


@layer_shapes
def workspace_pingpong(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    return workspace_bytes(X_shape, W_shape, padding, stride, version="v7")
