"""16.6: the reductions the profiler found, rewritten as shared-memory trees.

Profiling one training step of the book's model at a large batch (benchmarks/results/
book_model.json, "breakdown") puts almost all of its time in two kernels of 16.2:
``conv2d_bias_grad_kernel`` (one thread per output channel sums N·H'·W' values) and
``conv2d_weight_grad_kernel`` (one thread per weight sums as many products). Both are
reductions with far too few threads: 32 threads for 32 channels cannot use a GPU of 132
multiprocessors, however simple their loop.

Here each sum gets a block of BLOCK threads instead. Every thread adds a strided share of the
terms (neighbouring threads read neighbouring addresses), then ``block_reduce`` halves the
number of active threads at each step of a tree in shared memory: log2(BLOCK) steps with a
barrier between them. The same tree computes softmax's maximum and sum (softmax.py).
"""

from __future__ import annotations

from numba import cuda, float32

BLOCK = 128  # threads per sum: a power of two, so the tree halves evenly


@cuda.jit(device=True)
def block_reduce(buffer, value, is_max):
    """Reduce one value per thread over the block (maximum or sum); every thread gets the result."""
    t = cuda.threadIdx.x
    buffer[t] = value
    cuda.syncthreads()
    step = BLOCK // 2
    while step > 0:
        if t < step:
            if is_max:
                buffer[t] = max(buffer[t], buffer[t + step])
            else:
                buffer[t] += buffer[t + step]
        cuda.syncthreads()
        step //= 2
    result = buffer[0]
    cuda.syncthreads()  # every thread has read the result before the buffer is used again
    return result


@cuda.jit
def bias_grad_tree_kernel(dY, db):
    """Block k: db[k] = Σ_{n,y,x} dY[n, k, y, x], the terms spread over BLOCK threads."""
    buffer = cuda.shared.array(BLOCK, float32)
    k = cuda.blockIdx.x
    N, _, Ho, Wo = dY.shape
    plane = Ho * Wo
    acc = float32(0.0)
    for i in range(cuda.threadIdx.x, N * plane, BLOCK):
        p = i % plane
        acc += dY[i // plane, k, p // Wo, p % Wo]
    total = block_reduce(buffer, acc, False)
    if cuda.threadIdx.x == 0:
        db[k] = total


@cuda.jit
def weight_grad_tree_kernel(X, dY, dW, padding, stride):
    """Block (k, c, r, s): dW[k, c, r, s] = Σ_{n,y,x} dY[n, k, y, x]·X[n, c, y·stride + r - p, x·stride + s - p]."""
    buffer = cuda.shared.array(BLOCK, float32)
    K, C, R, S = dW.shape
    i = cuda.blockIdx.x
    k = i // (C * R * S)
    c = (i // (R * S)) % C
    r = (i // S) % R
    s = i % S
    N, _, Ho, Wo = dY.shape
    H, Wd = X.shape[2], X.shape[3]
    plane = Ho * Wo
    acc = float32(0.0)
    for j in range(cuda.threadIdx.x, N * plane, BLOCK):
        n = j // plane
        y = (j % plane) // Wo
        x = j % Wo
        iy = y * stride + r - padding
        ix = x * stride + s - padding
        if 0 <= iy < H and 0 <= ix < Wd:
            acc += dY[n, k, y, x] * X[n, c, iy, ix]
    total = block_reduce(buffer, acc, False)
    if cuda.threadIdx.x == 0:
        dW[k, c, r, s] = total
