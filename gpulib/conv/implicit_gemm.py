"""16.4: implicit GEMM, convolution as Y_mat = W_mat · X_col without X_col in memory, as cuDNN's
IMPLICIT_GEMM (every load splits its row and column indices) and IMPLICIT_PRECOMP_GEMM (the
(c, r, s) of each row from a table made once per filter shape, ``row_table``).

The kernel is gemm version 3 (gpulib/gemm/kernels.py) with its B tile gathered from X and its
result written straight to Y [N, K, H', W'] with the bias; 16.4's notebook explains both. What
must stay true: neither allocates X_col (the extra memory is zero, or the table).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import cuda, float32, int32, uint32

from gpulib.arrays import blocks, integer_arguments, output, require, to_device, to_host
from gpulib.env import sized
from gpulib.gemm.kernels import check_tile
from gpulib.shapes import bias_or_zeros, check_conv_inputs

# default block tile on a GPU (tuned on the H200, see benchmarks/conv_gemm.py) and a small one
# for the simulator, where every thread runs as Python code
TILE = dict(BM=64, BN=128, BK=8, TM=8, TN=8, PREFETCH=True)  # fastest on the H200
TILE_SIM = dict(BM=16, BN=16, BK=4, TM=2, TN=2, PREFETCH=True)


@lru_cache(maxsize=None)
def implicit_gemm_kernel(R: int, S: int, PRECOMPUTED: bool, BM: int = 64, BN: int = 128, BK: int = 8,
                         TM: int = 8, TN: int = 8, PREFETCH: bool = True):
    """The implicit GEMM kernel for an R×S filter; launch with (BN // TN) × (BM // TM) threads.

    The GEMM is M = K filters, N = N·H'·W' output pixels, inner dimension C·R·S. PREFETCH
    loads the next tiles into registers while the current ones are multiplied, as in gemm v3.
    """
    THREADS_X, THREADS_Y = BN // TN, BM // TM
    THREADS = THREADS_X * THREADS_Y
    if THREADS % BN or (BK * BN) % THREADS or (BM * BK) % THREADS:
        raise ValueError(f"the tiles need a whole number of threads per column: {THREADS} threads, BN={BN}")
    A_LOADS = BM * BK // THREADS  # W_mat elements each thread loads per step
    B_LOADS = BK * BN // THREADS  # X_col elements each thread gathers per step, all in one column
    K_STEP = THREADS // BN        # rows between them
    A_ROW = BM + 4  # the A tile's row length: 4 floats of padding
    A_SIZE, B_SIZE = BK * A_ROW, BK * BN

    @cuda.jit(device=True)
    def fetch(X, W_mat, rows, a_next, b_next, row0, k0, flat, col, img, y0, x0, padding, stride, Ho, Wo):
        """This thread's share of the next W_mat tile and of the X_col tile, gathered from X."""
        K, CRS = W_mat.shape
        H, Wd = X.shape[2], X.shape[3]
        NP = X.shape[0] * Ho * Wo
        for i in range(A_LOADS):  # A tile from W_mat, as in gemm version 3
            e = flat + i * THREADS
            gi, gk = row0 + e // BK, k0 + e % BK
            a_next[i] = W_mat[uint32(gi), uint32(gk)] if gi < K and gk < CRS else float32(0.0)
        for i in range(B_LOADS):  # B tile gathered from X: X_col[row, col], never stored
            row = k0 + flat // BN + i * K_STEP
            v = float32(0.0)
            if row < CRS and col < NP:
                if PRECOMPUTED:  # (c, r, s) of this row from the table: no division
                    r_u = uint32(row)  # unsigned indices skip Numba's negative-index checks
                    iy = y0 + rows[r_u, 1]
                    ix = x0 + rows[r_u, 2]
                    if 0 <= iy < H and 0 <= ix < Wd:
                        v = X[uint32(img), uint32(rows[r_u, 0]), uint32(iy), uint32(ix)]
                else:  # split row into (c, r, s) and col into (n, y, x) for every load
                    c = row // (R * S)
                    r = (row // S) % R
                    s = row % S
                    n = col // (Ho * Wo)
                    iy = ((col // Wo) % Ho) * stride + r - padding
                    ix = (col % Wo) * stride + s - padding
                    if 0 <= iy < H and 0 <= ix < Wd:
                        v = X[n, c, iy, ix]
            b_next[i] = v

    @cuda.jit
    def implicit_gemm(X, W_mat, b, Y, padding, stride, rows):
        a_flat = cuda.shared.array(A_SIZE, float32)  # W_mat tile transposed: [k, m] at k·A_ROW + m
        b_flat = cuda.shared.array(B_SIZE, float32)  # X_col tile: [k, n] at k·BN + n
        acc = cuda.local.array((TM, TN), float32)
        a_reg = cuda.local.array(TM, float32)
        b_reg = cuda.local.array(TN, float32)
        a_next = cuda.local.array(A_LOADS, float32)
        b_next = cuda.local.array(B_LOADS, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        flat = ty * THREADS_X + tx
        row0 = cuda.blockIdx.y * BM  # first filter of this block
        col0 = cuda.blockIdx.x * BN  # first output pixel of this block
        K, Ho, Wo = Y.shape[1], Y.shape[2], Y.shape[3]
        CRS = W_mat.shape[1]
        NP = Y.shape[0] * Ho * Wo
        for m in range(TM):
            for n in range(TN):
                acc[m, n] = float32(0.0)
        # the column of the B tile this thread always gathers for (its first row is flat // BN)
        col = col0 + flat % BN
        img = col // (Ho * Wo)  # split once: image n and the window's top-left corner
        p = col % (Ho * Wo)
        y0 = (p // Wo) * stride - padding
        x0 = (p % Wo) * stride - padding
        if PREFETCH:
            fetch(X, W_mat, rows, a_next, b_next, row0, 0, flat, col, img, y0, x0, padding, stride, Ho, Wo)
        for k0 in range(0, CRS, BK):
            if not PREFETCH:
                fetch(X, W_mat, rows, a_next, b_next, row0, k0, flat, col, img, y0, x0, padding, stride, Ho, Wo)
            for i in range(A_LOADS):  # registers → shared tiles
                e = flat + i * THREADS
                a_flat[(e % BK) * A_ROW + e // BK] = a_next[i]
            for i in range(B_LOADS):
                b_flat[(flat // BN + i * K_STEP) * BN + flat % BN] = b_next[i]
            cuda.syncthreads()
            if PREFETCH and k0 + BK < CRS:
                fetch(X, W_mat, rows, a_next, b_next, row0, k0 + BK, flat, col, img, y0, x0, padding, stride,
                      Ho, Wo)
            for k in range(BK):
                a_k = uint32(k * A_ROW + ty)  # unsigned offsets, as in gemm version 3
                b_k = uint32(k * BN + tx)
                for m in range(TM):
                    a_reg[m] = a_flat[a_k + uint32(m * THREADS_Y)]
                for n in range(TN):
                    b_reg[n] = b_flat[b_k + uint32(n * THREADS_X)]
                for m in range(TM):
                    for n in range(TN):
                        acc[m, n] += a_reg[m] * b_reg[n]
            cuda.syncthreads()
        out_n = cuda.local.array(TN, int32)  # where this thread's TN output columns go in Y
        out_y = cuda.local.array(TN, int32)
        out_x = cuda.local.array(TN, int32)
        for n in range(TN):  # split each output column (n, y, x) once
            j = col0 + tx + n * THREADS_X
            out_n[n] = j // (Ho * Wo)
            out_y[n] = (j // Wo) % Ho
            out_x[n] = j % Wo
        for m in range(TM):  # Y[n, k, y, x] = acc + b[k]
            for n in range(TN):
                i, j = row0 + ty + m * THREADS_Y, col0 + tx + n * THREADS_X
                if i < K and j < NP:
                    Y[out_n[n], i, out_y[n], out_x[n]] = acc[m, n] + b[i]

    return implicit_gemm


@integer_arguments(C=1, R=1, S=1)
def row_table(C: int, R: int, S: int) -> np.ndarray:
    """The precomputed variant's table: row (c, r, s) of X_col → [c, r, s] (int32 [C·R·S, 3])."""
    rows = np.arange(C * R * S)
    return np.stack([rows // (R * S), (rows // S) % R, rows % S], axis=1).astype(np.int32)


@lru_cache(maxsize=64)
def device_row_table(C: int, R: int, S: int):
    """``row_table`` on the device, made once per (C, R, S): a layer called again (a training
    loop, the auto-tuner's timing) does not copy it over again."""
    return to_device(row_table(C, R, S))


@lru_cache(maxsize=1)
def _no_table():
    return to_device(np.zeros((1, 3), np.int32))


def tile_shape() -> dict:
    """The block tile used here: ``TILE`` on a GPU, ``TILE_SIM`` on the simulator."""
    return sized(gpu=TILE, sim=TILE_SIM)


def _check_table(table, C: int, R: int, S: int) -> None:
    """A caller's table must be this layer's: a table of another (C, R, S) with as many rows
    sends every load to the wrong tap, and nothing else would notice."""
    require(table, "table", 2, np.int32, "[C·R·S, 3]")
    if tuple(table.shape) != (C * R * S, 3) or not np.array_equal(to_host(table), row_table(C, R, S)):
        raise ValueError(f"table is not row_table(C={C}, R={R}, S={S}) of this layer (shape {tuple(table.shape)}); "
                         f"pass that, or no table")


def _launch(X, W, b, padding, stride, out, precomputed: bool, table, tile: dict | None):
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    _, C, R, S = W.shape
    t = check_tile(tile) if tile is not None else tile_shape()
    Y = output(out, (N, K, Ho, Wo), "out")
    if precomputed and table is not None:
        _check_table(table, C, R, S)
    elif precomputed:
        table = device_row_table(C, R, S)
    else:
        table = _no_table()  # the on-the-fly variant reads no table
    W_mat = to_device(W).reshape(K, C * R * S)
    grid = (blocks(N * Ho * Wo, t["BN"]), blocks(K, t["BM"]))
    threads = (t["BN"] // t["TN"], t["BM"] // t["TM"])
    kernel = implicit_gemm_kernel(R, S, precomputed, **t)  # may refuse a tile (ValueError) before launching
    kernel[grid, threads](
        to_device(X), W_mat, bias_or_zeros(b, K), Y, padding, stride, table)
    return Y


def conv2d_implicit_gemm(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None, tile: dict | None = None):
    """Y = conv(X, W) + b as one implicit GEMM (cuDNN's IMPLICIT_GEMM): no X_col in memory, every
    load splits its indices. ``tile`` overrides the block tile (a dict of BM, BN, BK, TM, TN)."""
    return _launch(X, W, b, padding, stride, out, False, None, tile)


def conv2d_implicit_precomp_gemm(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None, table=None,
                                 tile: dict | None = None):
    """Y = conv(X, W) + b as one implicit GEMM with precomputed indices (cuDNN's
    IMPLICIT_PRECOMP_GEMM): ``table`` may hold ``row_table(C, R, S)`` already on the device (by
    default it is made once per (C, R, S) and kept); ``tile`` overrides the block tile."""
    return _launch(X, W, b, padding, stride, out, True, table, tile)
