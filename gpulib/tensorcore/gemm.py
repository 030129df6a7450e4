"""16.5: GEMM on the tensor cores, C = A·B with A, B in fp16 and C accumulated in fp32.

    version 1   one warp per 16x16 tile of C; each step along K loads a 16x16 tile of A and
                of B straight from global memory into fragments and issues one tensor-core
                multiply-accumulate. 4 warps per block, one per tile down a column of tiles.

Tensor cores take whole 16x16x16 tiles, so ``matmul_tc`` pads A and B with zeros to
multiples of 16 (zeros add nothing to the products) and crops C back.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from gpulib.arrays import blocks, require, to_device
from gpulib.tensorcore import wmma
from gpulib.tensorcore.wmma import AB_DTYPE, AB_FRAGMENT, ACC_FRAGMENT, TILE  # compile-time constants

WARPS = 4  # warps per block, stacked along the rows of C


@wmma.kernel
def tc_gemm_v1_kernel(A, B, C):
    """Warp w of block (bx, by) owns C[16·(by·WARPS + w) : +16, 16·bx : +16]."""
    row = (cuda.blockIdx.y * WARPS + cuda.threadIdx.y) * TILE
    col = cuda.blockIdx.x * TILE
    if row < C.shape[0] and col < C.shape[1]:  # the same for all 32 threads of the warp
        a = cuda.local.array(AB_FRAGMENT, AB_DTYPE)
        b = cuda.local.array(AB_FRAGMENT, AB_DTYPE)
        acc = cuda.local.array(ACC_FRAGMENT, float32)
        wmma.fill(acc, float32(0.0))
        for k in range(0, A.shape[1], TILE):
            wmma.load_a(a, A, row, k)
            wmma.load_b(b, B, k, col)
            wmma.mma(acc, a, b)
        wmma.store(C, row, col, acc)


def _padded(a: np.ndarray) -> np.ndarray:
    rows, cols = (-(-n // TILE) * TILE for n in a.shape)
    out = np.zeros((rows, cols), np.float16)
    out[:a.shape[0], :a.shape[1]] = a
    return out


def matmul_tc(A, B) -> np.ndarray:
    """C = A·B (float32 result) with A and B rounded to fp16, on the tensor cores (emulated on
    the simulator). Any M, N, K: the operands are zero-padded to multiples of 16."""
    require(A, "A", 2, dtype=None, layout="[M, K]")
    require(B, "B", 2, dtype=None, layout="[K, N]")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"inner dimensions do not match: A is {tuple(A.shape)} and B is {tuple(B.shape)}")
    A16, B16 = _padded(np.asarray(A, np.float16)), _padded(np.asarray(B, np.float16))
    M, N = A16.shape[0], B16.shape[1]
    C = cuda.device_array((M, N), np.float32)
    grid = (N // TILE, blocks(M // TILE, WARPS))
    tc_gemm_v1_kernel[grid, (32, WARPS)](to_device(A16), to_device(B16), C)
    return C.copy_to_host()[:A.shape[0], :B.shape[1]]


def reference(A, B) -> np.ndarray:
    """What the tensor cores compute, in float64: the fp16-rounded operands multiplied exactly."""
    return np.asarray(A, np.float16).astype(np.float64) @ np.asarray(B, np.float16).astype(np.float64)
