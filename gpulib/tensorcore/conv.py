"""16.5: implicit-GEMM convolution on the tensor cores, fp16 inputs, fp32 accumulation.

The GEMM of 16.4 (Y_mat [K, N·H'·W'] = W_mat [K, C·R·S] · X_col), computed like tensor-core
GEMM version 2 (and with its warp_mma / warp_store): a block of 4 warps owns a 64x64 tile of Y_mat, each warp 32x32 in 2x2
accumulator fragments. Per 16-deep step the block stages W_mat's 64x16 tile and a 16x64 tile
of X_col in shared memory (fp16); the X_col tile is gathered from X on the fly (no X_col in
memory), with (c, r, s) of each row from implicit GEMM's row table. At the end the warps
store their accumulators to a shared fp32 tile, and the block writes it to Y [N, K, H', W']
with the bias added (Y_mat's columns are not rows of Y, so wmma.store cannot write Y).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, types

from gpulib.arrays import blocks, output, to_device
from gpulib.conv.direct import check_conv_inputs
from gpulib.conv.implicit_gemm import row_table
from gpulib.tensorcore import wmma
from gpulib.tensorcore.gemm import warp_mma, warp_store
from gpulib.tensorcore.wmma import AB_DTYPE, AB_FRAGMENT, ACC_FRAGMENT, SHARED_ALIGN, TILE

float16 = types.float16
BM = BN = 64
THREADS = 128


@wmma.kernel
def tc_conv_kernel(X, W_mat, b, Y, padding, stride, rows):
    a_tile = cuda.shared.array((BM, TILE), float16, alignment=SHARED_ALIGN)
    b_tile = cuda.shared.array((TILE, BN), float16, alignment=SHARED_ALIGN)
    y_tile = cuda.shared.array((BM, BN), float32, alignment=SHARED_ALIGN)
    a = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    bf = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    acc = cuda.local.array((4, ACC_FRAGMENT), float32)
    t = cuda.threadIdx.x
    warp = t // 32
    wy, wx = (warp // 2) * 32, (warp % 2) * 32
    row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN  # filters, output pixels
    H, Wd = X.shape[2], X.shape[3]
    K, Ho, Wo = Y.shape[1], Y.shape[2], Y.shape[3]
    CRS = W_mat.shape[1]
    NP = Y.shape[0] * Ho * Wo
    for f in range(4):
        wmma.fill(acc[f], float32(0.0))
    for k0 in range(0, CRS, TILE):
        for e in range(t, BM * TILE, THREADS):
            r, c = e // TILE, e % TILE  # W_mat tile
            gi, gk = row0 + r, k0 + c
            a_tile[r, c] = W_mat[gi, gk] if gi < K and gk < CRS else float16(0.0)
            r, c = e // BN, e % BN  # X_col tile, gathered from X
            row, col = k0 + r, col0 + c
            v = float16(0.0)
            if row < CRS and col < NP:
                n = col // (Ho * Wo)
                p = col % (Ho * Wo)
                iy = (p // Wo) * stride - padding + rows[row, 1]
                ix = (p % Wo) * stride - padding + rows[row, 2]
                if 0 <= iy < H and 0 <= ix < Wd:
                    v = X[n, rows[row, 0], iy, ix]
            b_tile[r, c] = v
        cuda.syncthreads()
        warp_mma(a_tile, b_tile, a, bf, acc, wy, wx, 0)
        cuda.syncthreads()
    warp_store(y_tile, acc, wy, wx, 2, 2)
    cuda.syncthreads()
    for e in range(t, BM * BN, THREADS):  # shared fp32 tile → Y[n, k, y, x] + b[k]
        r, c = e // BN, e % BN
        k, col = row0 + r, col0 + c
        if k < K and col < NP:
            p = col % (Ho * Wo)
            Y[col // (Ho * Wo), k, p // Wo, p % Wo] = y_tile[r, c] + b[k]


def conv2d_tc(X, W, b=None, padding: int = 0, stride: int = 1, out=None):
    """Y = conv(X, W) + b on the tensor cores: X and W rounded to fp16, sums in fp32, Y float32."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    _, C, R, S = W.shape
    X16 = to_device(np.asarray(X.copy_to_host() if hasattr(X, "copy_to_host") else X, np.float16))
    W16 = to_device(np.asarray(W.copy_to_host() if hasattr(W, "copy_to_host") else W, np.float16).reshape(K, C * R * S))
    bias = to_device(np.zeros(K, np.float32) if b is None else b)
    Y = output(out, (N, K, Ho, Wo), "out")
    table = to_device(row_table(C, R, S))
    grid = (blocks(N * Ho * Wo, BN), blocks(K, BM))
    tc_conv_kernel[grid, THREADS](X16, W16, bias, Y, padding, stride, table)
    return Y


def reference(X, W, b=None, padding: int = 0, stride: int = 1) -> np.ndarray:
    """What the tensor cores compute, in float64: the fp16-rounded X and W convolved exactly."""
    from gpulib import reference as ref

    as16 = lambda a: np.asarray(a, np.float16).astype(np.float64)  # noqa: E731
    return ref.conv2d(as16(X), as16(W), b, padding, stride)
