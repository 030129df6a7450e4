"""16.4: convolution as a matrix product (GEMM), explicitly (im2col) and implicitly.

    im2col          X [N, C, H, W] → X_col [C·R·S, N·H'·W']: column (n, y, x) holds the R×S
                    window of every channel that output pixel (y, x) of image n sees; row
                    (c, r, s) is one filter tap. One thread per element of X_col; version 1
                    takes the sizes at run time, version 2 is compiled per layer shape,
                    version 3 also does its index arithmetic in unsigned 32-bit integers.
    col2im          the backward step: dX from dX_col, one thread per input element, summing
                    the X_col entries that were copies of it (a gather, so no atomics).
    conv2d_im2col   Y_mat = W_mat · X_col with W_mat = W reshaped to [K, C·R·S], then Y_mat
                    [K, N·H'·W'] is laid out as Y [N, K, H', W']. The GEMM is gpulib.gemm's.
    backward        dW_mat = dY_mat · X_colᵀ and dX = col2im(W_matᵀ · dY_mat): two more GEMMs.

Implicit GEMM, the same product without X_col in memory, is in implicit_gemm.py.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import cuda, float32, uint32

from gpulib.arrays import blocks, output, outputs, require, require_bool, require_int, to_device
from gpulib.gemm import VERSIONS, matmul
from gpulib.shapes import bias_or_zeros, check_conv_inputs, conv_output_size, layer_shapes, require_shape

BLOCK = 256


@cuda.jit
def im2col_kernel(X, X_col, R, S, padding, stride, Ho, Wo):
    """One thread per X_col[row, col]: row = (c, r, s), col = (n, y, x)."""
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y
    if col < X_col.shape[1]:
        x = col % Wo
        y = (col // Wo) % Ho
        n = col // (Wo * Ho)
        s = row % S
        r = (row // S) % R
        c = row // (R * S)
        iy = y * stride + r - padding
        ix = x * stride + s - padding
        inside = 0 <= iy < X.shape[2] and 0 <= ix < X.shape[3]
        X_col[row, col] = X[n, c, iy, ix] if inside else float32(0.0)


@lru_cache(maxsize=None)
def im2col_specialized(C: int, H: int, W: int, R: int, S: int, padding: int, stride: int):
    """``im2col_kernel`` with every size fixed when it is compiled, one kernel per layer shape.

    The work of ``im2col_kernel`` is not its memory traffic (neighbouring threads read
    neighbouring pixels and write neighbouring columns) but its index arithmetic: six
    divisions and remainders by sizes known only at run time, each dozens of instructions
    on a GPU. Numba takes the sizes captured here as constants, so the compiler turns each
    division into a multiplication and a shift. The rows of X_col are the grid's y axis, so
    (c, r, s) costs one division per block, not per element.
    """
    Ho = (H + 2 * padding - R) // stride + 1
    Wo = (W + 2 * padding - S) // stride + 1

    @cuda.jit
    def im2col_specialized_kernel(X, X_col):
        col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        row = cuda.blockIdx.y
        if col < X_col.shape[1]:
            x = col % Wo
            y = (col // Wo) % Ho
            n = col // (Wo * Ho)
            s = row % S
            r = (row // S) % R
            c = row // (R * S)
            iy = y * stride + r - padding
            ix = x * stride + s - padding
            inside = 0 <= iy < H and 0 <= ix < W
            X_col[row, col] = X[n, c, iy, ix] if inside else float32(0.0)

    return im2col_specialized_kernel


@lru_cache(maxsize=None)
def im2col_unsigned(C: int, H: int, W: int, R: int, S: int, padding: int, stride: int):
    """Version 3: version 2 in unsigned 32-bit arithmetic, on flat views of X and X_col.

    Version 2 still pays for the way Numba treats integers: every index is a signed 64-bit
    number, so each division by a compiled-in size becomes a 64-bit multiply-high sequence,
    and every array index is tested for a negative value (Python's wraparound) before use.
    Here the column and everything derived from it is a uint32: a division by a constant is
    one 32-bit multiply-high and a shift, positions are counted in the padded image (so they
    are never negative), and loads and stores take unsigned offsets into 1-D views, which
    Numba does not test. Every offset must fit in 32 bits.
    """
    Ho = (H + 2 * padding - R) // stride + 1
    Wo = (W + 2 * padding - S) // stride + 1
    U_C, U_H, U_W, U_S, U_R, U_RS = uint32(C), uint32(H), uint32(W), uint32(S), uint32(R), uint32(R * S)
    U_HO, U_WO, U_STRIDE, U_PAD = uint32(Ho), uint32(Wo), uint32(stride), uint32(padding)
    U_H_END, U_W_END = uint32(H + padding), uint32(W + padding)  # where the image ends, in padded coordinates

    @cuda.jit
    def im2col_unsigned_kernel(X_flat, X_col_flat, cols):
        col = uint32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        row = uint32(cuda.blockIdx.y)
        if col < uint32(cols):
            x = uint32(col % U_WO)
            rest = uint32(col // U_WO)
            y = uint32(rest % U_HO)
            n = uint32(rest // U_HO)
            s = uint32(row % U_S)
            r = uint32(uint32(row // U_S) % U_R)
            c = uint32(row // U_RS)
            py = uint32(y * U_STRIDE + r)  # the tap's position in the padded image
            px = uint32(x * U_STRIDE + s)
            value = float32(0.0)
            if U_PAD <= py < U_H_END and U_PAD <= px < U_W_END:
                value = X_flat[uint32(uint32(uint32(n * U_C + c) * U_H + (py - U_PAD)) * U_W + (px - U_PAD))]
            X_col_flat[uint32(row * uint32(cols) + col)] = value

    return im2col_unsigned_kernel


@cuda.jit
def col2im_kernel(dX_col, dX, R, S, padding, stride, Ho, Wo):
    """One thread per dX[n, c, iy, ix]: the sum of the X_col entries that copied it."""
    i = cuda.grid(1)
    N, C, H, W = dX.shape
    if i < N * C * H * W:
        ix = i % W
        iy = (i // W) % H
        c = (i // (W * H)) % C
        n = i // (W * H * C)
        acc = float32(0.0)
        for r in range(R):
            ty = iy + padding - r
            if ty >= 0 and ty % stride == 0 and ty // stride < Ho:
                for s in range(S):
                    tx = ix + padding - s
                    if tx >= 0 and tx % stride == 0 and tx // stride < Wo:
                        col = (n * Ho + ty // stride) * Wo + tx // stride
                        acc += dX_col[(c * R + r) * S + s, col]
        dX[n, c, iy, ix] = acc


@cuda.jit
def nchw_to_cols_kernel(Y, Y_mat):
    """Y_mat[k, (n, y, x)] = Y[n, k, y, x]: a gradient dY [N, K, H', W'] as the GEMM's [K, N·H'·W']."""
    i = cuda.grid(1)
    N, K, Ho, Wo = Y.shape
    if i < Y.size:
        p = i % (Ho * Wo)
        k = (i // (Ho * Wo)) % K
        n = i // (Ho * Wo * K)
        Y_mat[k, n * Ho * Wo + p] = Y[n, k, p // Wo, p % Wo]


@cuda.jit
def cols_to_nchw_kernel(Y_mat, b, Y):
    """Y[n, k, y, x] = Y_mat[k, (n, y, x)] + b[k]: the GEMM's [K, N·H'·W'] back to NCHW."""
    i = cuda.grid(1)
    N, K, Ho, Wo = Y.shape
    if i < Y.size:
        p = i % (Ho * Wo)
        k = (i // (Ho * Wo)) % K
        n = i // (Ho * Wo * K)
        Y[n, k, p // Wo, p % Wo] = Y_mat[k, n * Ho * Wo + p] + b[k]


IM2COL_VERSIONS = ("v1", "v2", "v3")
U32_LIMIT = 2**32


def im2col(X, R: int, S: int, padding: int = 0, stride: int = 1, *, out=None, version: str | None = None):
    """X_col [C·R·S, N·H'·W'] on the device (R·S times the size of X, roughly).

    ``version`` "v1" is ``im2col_kernel`` (sizes passed at run time), "v2"
    ``im2col_specialized``, compiled once per layer shape with its sizes as constants, "v3"
    ``im2col_unsigned``, version 2 in 32-bit unsigned arithmetic. By default (None) version 3,
    or version 2 where X or X_col has 2³² elements or more."""
    if version is not None and version not in IM2COL_VERSIONS:
        raise ValueError(f"unknown version {version!r}; choose one of {IM2COL_VERSIONS}")
    require(X, "X", 4, layout="[N, C, H, W]")
    R, S = require_int(R, "R", 1), require_int(S, "S", 1)
    N, _, Ho, Wo = check_conv_inputs(X, np.empty((1, X.shape[1], R, S), np.float32), None, padding, stride)
    X_col = output(out, (X.shape[1] * R * S, N * Ho * Wo), "out")
    grid = (blocks(X_col.shape[1], BLOCK), X_col.shape[0])
    fits_32_bits = max(X.size, X_col.size) < U32_LIMIT
    if version is None:
        version = "v3" if fits_32_bits else "v2"
    if version == "v3" and not fits_32_bits:
        raise ValueError(f"version 'v3' indexes with 32-bit offsets, but X has {X.size} and X_col {X_col.size} "
                         f"elements (at most {U32_LIMIT - 1}); use version 'v2'")
    if version == "v1":
        im2col_kernel[grid, BLOCK](to_device(X), X_col, R, S, padding, stride, Ho, Wo)
    elif version == "v3":
        _, C, H, W = X.shape
        X_dev = to_device(X)
        im2col_unsigned(C, H, W, R, S, padding, stride)[grid, BLOCK](
            X_dev.reshape(X_dev.size), X_col.reshape(X_col.size), X_col.shape[1])
    else:
        _, C, H, W = X.shape
        im2col_specialized(C, H, W, R, S, padding, stride)[grid, BLOCK](to_device(X), X_col)
    return X_col


def col2im(dX_col, input_shape, R: int, S: int, padding: int = 0, stride: int = 1, *, out=None):
    """dX [N, C, H, W] from dX_col [C·R·S, N·H'·W'] (the adjoint of im2col)."""
    require_shape(input_shape, "input_shape", "[N, C, H, W]")
    for name, value, least in (("R", R, 1), ("S", S, 1), ("padding", padding, 0), ("stride", stride, 1),
                               *((f"input_shape's {a}", n, 1) for a, n in zip("NCHW", input_shape))):
        require_int(value, name, least)
    require(dX_col, "dX_col", 2, layout="[C·R·S, N·H'·W']")
    N, C, H, W = input_shape
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(W, S, padding, stride)
    if tuple(dX_col.shape) != (C * R * S, N * Ho * Wo):
        raise ValueError(f"dX_col must have shape {(C * R * S, N * Ho * Wo)}, not {tuple(dX_col.shape)}")
    dX = output(out, tuple(input_shape), "out")
    col2im_kernel[blocks(dX.size, BLOCK), BLOCK](to_device(dX_col), dX, R, S, padding, stride, Ho, Wo)
    return dX


def _check_gemm(gemm: str) -> None:
    if gemm not in VERSIONS:
        raise ValueError(f"unknown gemm {gemm!r}: the matmul version to multiply with, one of {VERSIONS}")


def conv2d_im2col(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None, gemm: str = "library"):
    """Y = conv(X, W) + b as im2col, one GEMM (W_mat · X_col), and a reshape to NCHW.

    ``gemm`` is the ``gpulib.gemm.matmul`` version that multiplies: "library" (cuBLAS on a GPU),
    or the book's "v1", "v2", "v3"."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    _check_gemm(gemm)
    _, C, R, S = W.shape
    Y = output(out, (N, K, Ho, Wo), "out")
    X_col = im2col(X, R, S, padding, stride)
    W_mat = to_device(W).reshape(K, C * R * S)
    Y_mat = matmul(W_mat, X_col, version=gemm)
    cols_to_nchw_kernel[blocks(Y.size, BLOCK), BLOCK](Y_mat, bias_or_zeros(b, K), Y)
    return Y


@layer_shapes
def backward_workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1, need_dX: bool = True) -> int:
    """The extra float32 arrays ``conv2d_im2col_backward`` holds at once: dY_mat [K, N·H'·W'],
    X_col [C·R·S, N·H'·W'] and, when dX is needed, dX_col of X_col's shape."""
    N, C = X_shape[0], X_shape[1]
    K, _, R, S = W_shape
    Ho, Wo = conv_output_size(X_shape[2], R, padding, stride), conv_output_size(X_shape[3], S, padding, stride)
    columns = N * Ho * Wo
    return 4 * columns * (K + C * R * S * (2 if need_dX else 1))


def conv2d_im2col_backward(X, W, dY, padding: int = 0, stride: int = 1, *, need_dX: bool = True, out=None,
                           gemm: str = "library"):
    """(dX, dW) of Y = conv(X, W) through GEMMs: dW_mat = dY_mat · X_colᵀ, dX_col = W_matᵀ · dY_mat,
    dX = col2im(dX_col). dX is None when ``need_dX`` is False (the first layer needs no dX).
    ``out`` may hold (dX, dW) output arrays (either may be None)."""
    need_dX = require_bool(need_dX, "need_dX")
    N, K, Ho, Wo = check_conv_inputs(X, W, None, padding, stride)
    _check_gemm(gemm)
    _, C, R, S = W.shape
    require(dY, "dY", 4, layout="[N, K, H', W']")
    if tuple(dY.shape) != (N, K, Ho, Wo):
        raise ValueError(f"dY must have the output's shape {(N, K, Ho, Wo)} (X's images, W's filters), "
                         f"not {tuple(dY.shape)}")
    out_dX, out_dW = outputs(out, ("dX", "dW"))
    dW = output(out_dW, (K, C, R, S), "dW")
    dX = output(out_dX, tuple(X.shape), "dX") if need_dX else None
    dY = to_device(dY)
    dY_mat = cuda.device_array((K, N * Ho * Wo), np.float32)
    nchw_to_cols_kernel[blocks(dY.size, BLOCK), BLOCK](dY, dY_mat)
    X_col = im2col(X, R, S, padding, stride)
    matmul(dY_mat, X_col, version=gemm, trans_b=True, out=dW.reshape(K, C * R * S))
    if need_dX:
        W_mat = to_device(W).reshape(K, C * R * S)
        dX_col = matmul(W_mat, dY_mat, version=gemm, trans_a=True)
        col2im(dX_col, X.shape, R, S, padding, stride, out=dX)
    return dX, dW
