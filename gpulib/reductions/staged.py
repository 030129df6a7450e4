"""16.6: dW and db of a stride-1 convolution with every image staged in shared memory.

The tree kernels (tree.py) give each weight a block, and every block reads all of X's channel
and dY's filter plane from global memory and works out (n, y, x) from a flat index with three
divisions per term. Here a block takes whole images instead: it copies image n of X (padded with
zeros, so that no term needs a bounds test) and of dY into shared memory once, and then each
thread sums its weights' H'·W' products for that image from there, with plain counters for y
and x. The block adds its images' sums into its own row of ``partial``; a second kernel adds
the rows up, in row order, so the result does not depend on which block ran first.

    weight_grad_staged_kernel    block b: images b, b + blocks, ...; row b of partial
    sum_rows_kernel              dW and db: the rows of partial added, one thread per sum
"""

from __future__ import annotations

from numba import cuda, float32, uint32

from gpulib.env import sized

BLOCK = 256  # threads a block: each sums every BLOCK-th weight of the layer
GROUPS = 264  # blocks at most (two for each multiprocessor of a 132-SM GPU); the batch may be smaller
STAGED_BYTES = 48 * 1024  # what one staged image may take: the shared memory a block gets without opting in


def staged_floats(C: int, H: int, W: int, K: int, Ho: int, Wo: int, padding: int) -> int:
    """Shared-memory floats one staged image takes: X's C planes padded on every side, dY's K planes."""
    return C * (H + 2 * padding) * (W + 2 * padding) + K * Ho * Wo


def block_threads() -> int:
    """Threads a block: BLOCK on a GPU, 32 on the simulator (every barrier makes each simulated thread take a turn)."""
    return sized(gpu=BLOCK, sim=32)


@cuda.jit
def weight_grad_staged_kernel(X, dY, relu_out, masked, partial, R, S, padding):
    """Row b of ``partial`` [blocks, K·C·R·S + K]: for each weight (k, c, r, s) and, after them,
    each bias k, the sum over images b, b + gridDim.x, ... of dY[n, k, y, x]·X[n, c, y + r - p,
    x + s - p] (the weight) or of dY[n, k, y, x] (the bias). Stride 1; the dynamic shared memory
    holds ``staged_floats`` floats. With ``masked``, dY is the gradient of ``relu_out`` = ReLU(the
    layer's output) and counts only where relu_out > 0: ReLU's backward pass, done while dY is staged."""
    staged = cuda.shared.array(0, float32)
    N, C, H, W = X.shape
    K, Ho, Wo = dY.shape[1], dY.shape[2], dY.shape[3]
    Hp, Wp = H + 2 * padding, W + 2 * padding
    x_size = C * Hp * Wp
    y_size = K * Ho * Wo
    weights = K * C * R * S
    t, threads, b = cuda.threadIdx.x, cuda.blockDim.x, cuda.blockIdx.x
    first = True
    for n in range(b, N, cuda.gridDim.x):
        for e in range(t, x_size, threads):  # X[n], padded with zeros: staged[(c·Hp + iy)·Wp + ix]
            c, rest = e // (Hp * Wp), e % (Hp * Wp)
            iy, ix = rest // Wp - padding, rest % Wp - padding
            staged[e] = X[n, c, iy, ix] if 0 <= iy < H and 0 <= ix < W else float32(0.0)
        for e in range(t, y_size, threads):  # dY[n], as it lies: staged[x_size + (k·Ho + y)·Wo + x]
            k, rest = e // (Ho * Wo), e % (Ho * Wo)
            g = dY[n, k, rest // Wo, rest % Wo]
            staged[x_size + e] = g if not masked or relu_out[n, k, rest // Wo, rest % Wo] > float32(0.0) else float32(0.0)
        cuda.syncthreads()
        for w in range(t, weights + K, threads):
            acc = float32(0.0)
            if w < weights:
                k, c = w // (C * R * S), (w // (R * S)) % C
                r, s = (w // S) % R, w % S
                # unsigned offsets: a signed index would be tested for Python's negative ones
                g = uint32(x_size + k * Ho * Wo)  # dY[n, k, 0, 0]
                a = uint32((c * Hp + r) * Wp + s)  # X[n, c, r - p, s - p], padded
                wo, skip = uint32(Wo), uint32(Wp - Wo)
                end = g + uint32(Ho) * wo
                while g < end:  # row by row: g walks dY's plane, a the window's rows in X's
                    row_end = g + wo
                    while g < row_end:
                        acc += staged[g] * staged[a]
                        g += uint32(1)
                        a += uint32(1)
                    a += skip
            else:
                g = uint32(x_size + (w - weights) * Ho * Wo)
                for i in range(Ho * Wo):
                    acc += staged[g + uint32(i)]
            if first:
                partial[b, w] = acc
            else:
                partial[b, w] += acc
        first = False
        cuda.syncthreads()  # every thread is done with image n before the next one is staged


@cuda.jit
def sum_rows_kernel(partial, rows, dW, db):
    """dW (flat, K·C·R·S) and db (K) = the first ``rows`` rows of ``partial`` added in row order."""
    w = cuda.grid(1)
    weights = dW.shape[0]
    if w < weights + db.shape[0]:
        acc = float32(0.0)
        for row in range(rows):
            acc += partial[row, w]
        if w < weights:
            dW[w] = acc
        else:
            db[w - weights] = acc
