"""16.4: convolution as a matrix product (GEMM), explicitly (im2col) and implicitly.

    im2col          X [N, C, H, W] → X_col [C·R·S, N·H'·W']: column (n, y, x) holds the R×S
                    window of every channel that output pixel (y, x) of image n sees; row
                    (c, r, s) is one filter tap. One thread per element of X_col.
    col2im          the backward step: dX from dX_col, one thread per input element, summing
                    the X_col entries that were copies of it (a gather, so no atomics).
    conv2d_im2col   Y_mat = W_mat · X_col with W_mat = W reshaped to [K, C·R·S], then Y_mat
                    [K, N·H'·W'] is laid out as Y [N, K, H', W']. The GEMM is gpulib.gemm's.
    implicit GEMM   the same product without building X_col: the GEMM kernel computes, for
                    each B-tile element it loads, which X element X_col would have held there.
                    The "precomputed" variant looks the row and column parts of that index up
                    in two small tables made once per layer shape (cuDNN's IMPLICIT_PRECOMP_GEMM).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import cuda, float32

from gpulib import gemm
from gpulib.arrays import blocks, output, to_device
from gpulib.conv.direct import check_conv_inputs
from gpulib.reference import conv_output_size

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
def cols_to_nchw_kernel(Y_mat, b, Y):
    """Y[n, k, y, x] = Y_mat[k, (n, y, x)] + b[k]: the GEMM's [K, N·H'·W'] back to NCHW."""
    i = cuda.grid(1)
    N, K, Ho, Wo = Y.shape
    if i < Y.size:
        p = i % (Ho * Wo)
        k = (i // (Ho * Wo)) % K
        n = i // (Ho * Wo * K)
        Y[n, k, p // Wo, p % Wo] = Y_mat[k, n * Ho * Wo + p] + b[k]


def im2col(X, R: int, S: int, padding: int = 0, stride: int = 1, out=None):
    """X_col [C·R·S, N·H'·W'] on the device (R·S times the size of X, roughly)."""
    N, _, Ho, Wo = check_conv_inputs(X, np.empty((1, X.shape[1], R, S), np.float32), None, padding, stride)
    X_col = output(out, (X.shape[1] * R * S, N * Ho * Wo), "out")
    im2col_kernel[(blocks(X_col.shape[1], BLOCK), X_col.shape[0]), BLOCK](
        to_device(X), X_col, R, S, padding, stride, Ho, Wo)
    return X_col


def col2im(dX_col, input_shape, R: int, S: int, padding: int = 0, stride: int = 1, out=None):
    """dX [N, C, H, W] from dX_col [C·R·S, N·H'·W'] (the adjoint of im2col)."""
    N, C, H, W = input_shape
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(W, S, padding, stride)
    if tuple(dX_col.shape) != (C * R * S, N * Ho * Wo):
        raise ValueError(f"dX_col must have shape {(C * R * S, N * Ho * Wo)}, not {tuple(dX_col.shape)}")
    dX = output(out, tuple(input_shape), "out")
    col2im_kernel[blocks(dX.size, BLOCK), BLOCK](to_device(dX_col), dX, R, S, padding, stride, Ho, Wo)
    return dX


def conv2d_im2col(X, W, b=None, padding: int = 0, stride: int = 1, gemm_method: str = "library", out=None):
    """Y = conv(X, W) + b as im2col, one GEMM (W_mat · X_col), and a reshape to NCHW."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    _, C, R, S = W.shape
    X_col = im2col(X, R, S, padding, stride)
    W_mat = to_device(W).reshape(K, C * R * S)
    Y_mat = gemm.matmul(W_mat, X_col, gemm_method)
    Y = output(out, (N, K, Ho, Wo), "out")
    bias = to_device(np.zeros(K, np.float32) if b is None else b)
    cols_to_nchw_kernel[blocks(Y.size, BLOCK), BLOCK](Y_mat, bias, Y)
    return Y


# ------------------------------------------------------------------ implicit GEMM
@lru_cache(maxsize=None)
def implicit_gemm_kernel(PRECOMPUTED: bool, TILE: int = 16):
    """Y_mat = W_mat · X_col with X_col never stored: shared tiles as in gemm version 2, but
    each B-tile element is read straight from X at the place X_col would have copied it from.

    PRECOMPUTED=False derives (n, y, x) and (c, r, s) from the column and row numbers with
    six integer divisions per load; PRECOMPUTED=True looks them up in four small tables made
    once per layer shape (``index_tables``), the idea of cuDNN's IMPLICIT_PRECOMP_GEMM.
    """

    @cuda.jit
    def implicit_gemm(X, W_mat, b, Y, R, S, padding, stride, row_c, row_rs, col_n, col_yx):
        a_tile = cuda.shared.array((TILE, TILE), float32)
        b_tile = cuda.shared.array((TILE, TILE), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        H, Wd = X.shape[2], X.shape[3]
        K, Ho, Wo = Y.shape[1], Y.shape[2], Y.shape[3]
        CRS = W_mat.shape[1]
        NP = Y.shape[0] * Ho * Wo
        k = cuda.blockIdx.y * TILE + ty    # output channel = GEMM row
        col = cuda.blockIdx.x * TILE + tx  # output pixel (n, y, x) = GEMM column
        acc = float32(0.0)
        for k0 in range(0, CRS, TILE):
            a_tile[ty, tx] = W_mat[k, k0 + tx] if k < K and k0 + tx < CRS else float32(0.0)
            row = k0 + ty  # the X_col row (c, r, s) this thread fetches for its column
            v = float32(0.0)
            if row < CRS and col < NP:
                if PRECOMPUTED:
                    n, c = col_n[col], row_c[row]
                    iy = col_yx[col, 0] + row_rs[row, 0]
                    ix = col_yx[col, 1] + row_rs[row, 1]
                else:
                    c = row // (R * S)
                    n = col // (Wo * Ho)
                    iy = ((col // Wo) % Ho) * stride + (row // S) % R - padding
                    ix = (col % Wo) * stride + row % S - padding
                if 0 <= iy < H and 0 <= ix < Wd:
                    v = X[n, c, iy, ix]
            b_tile[ty, tx] = v
            cuda.syncthreads()
            for kk in range(TILE):
                acc += a_tile[ty, kk] * b_tile[kk, tx]
            cuda.syncthreads()
        if k < K and col < NP:
            p = col % (Ho * Wo)
            Y[col // (Ho * Wo), k, p // Wo, p % Wo] = acc + b[k]

    return implicit_gemm


def index_tables(N, C, R, S, Ho, Wo, padding, stride):
    """The four tables of the precomputed variant: row → c, (r, s); column → n, (y·stride - p, x·stride - p)."""
    rows = np.arange(C * R * S)
    cols = np.arange(N * Ho * Wo)
    row_c = (rows // (R * S)).astype(np.int32)
    row_rs = np.stack([(rows // S) % R, rows % S], axis=1).astype(np.int32)
    col_n = (cols // (Ho * Wo)).astype(np.int32)
    col_yx = np.stack([((cols // Wo) % Ho) * stride - padding, (cols % Wo) * stride - padding],
                      axis=1).astype(np.int32)
    return row_c, row_rs, col_n, col_yx


def conv2d_implicit_gemm(X, W, b=None, padding: int = 0, stride: int = 1, precomputed: bool = False,
                         out=None, tables=None):
    """Y = conv(X, W) + b as one implicit GEMM: no X_col in memory. ``tables`` may hold the
    result of ``index_tables`` to reuse (the precomputed variant makes them otherwise)."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    _, C, R, S = W.shape
    Y = output(out, (N, K, Ho, Wo), "out")
    if precomputed:
        tables = tables or tuple(to_device(t) for t in index_tables(N, C, R, S, Ho, Wo, padding, stride))
    else:
        tables = tuple(to_device(np.zeros(shape, np.int32)) for shape in ((1,), (1, 2), (1,), (1, 2)))
    W_mat = to_device(W).reshape(K, C * R * S)
    bias = to_device(np.zeros(K, np.float32) if b is None else b)
    tile = 16
    grid = (blocks(N * Ho * Wo, tile), blocks(K, tile))
    implicit_gemm_kernel(bool(precomputed), tile)[grid, (tile, tile)](
        to_device(X), W_mat, bias, Y, R, S, padding, stride, *tables)
    return Y
