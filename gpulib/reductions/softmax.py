"""16.6: softmax's max and sum are reductions: one block per row, a shared-memory tree for each
(``block_reduce`` of reductions.py).

16.1's ``softmax_xent_kernel`` gives each row to one thread, which is right for 10 classes. A
row of thousands (a language model's vocabulary, an attention row) needs a block: every
thread folds a strided slice of the row into one value, then the block halves the number of
active threads at each step of a tree in shared memory, log2(BLOCK) steps with a barrier
between them. The same tree runs twice, for the maximum and for the sum of exp(z - max).

A GPU would finish the last 32 values with warp shuffles (``cuda.shfl_down_sync``) and no
shared memory; the simulator has no warp functions, so the book's tree stays in shared memory
all the way down, which is correct on both.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from gpulib.arrays import integer_arguments, output, require, to_device
from gpulib.reductions.tree import BLOCK, block_reduce


@cuda.jit
def softmax_rows_kernel(Z, P):
    """Block n computes P[n] = softmax(Z[n]); thread t handles columns t, t + BLOCK, ..."""
    buffer = cuda.shared.array(BLOCK, float32)
    n = cuda.blockIdx.x
    t = cuda.threadIdx.x
    cols = Z.shape[1]
    local_max = float32(-math.inf)
    for k in range(t, cols, BLOCK):
        local_max = max(local_max, Z[n, k])
    m = block_reduce(buffer, local_max, True)
    local_sum = float32(0.0)
    for k in range(t, cols, BLOCK):
        local_sum += math.exp(Z[n, k] - m)
    total = block_reduce(buffer, local_sum, False)
    for k in range(t, cols, BLOCK):
        P[n, k] = math.exp(Z[n, k] - m) / total


def softmax_rows(Z, *, out=None):
    """P = softmax of each row of Z [rows, cols] (float32), one block of BLOCK threads per row."""
    require(Z, "Z", 2, layout="[rows, cols]")
    P = output(out, tuple(Z.shape), "out")
    softmax_rows_kernel[Z.shape[0], BLOCK](to_device(Z), P)
    return P


@integer_arguments(cols=1)
def reduction_steps(cols: int) -> dict:
    """What one row costs: each thread's serial share, the tree's steps and its barriers."""
    serial = -(-cols // BLOCK)
    steps = int(np.log2(BLOCK))
    return dict(serial_per_thread=serial, tree_steps=steps, barriers=2 * (steps + 1))
