"""16.6: the training step's kernels fused, for BookCNN(fused=True).

Each kernel here does the work of two to four of 16.1's and 16.2's, so that the tensor between
them never goes to global memory and back, and one launch replaces several:

    relu_max_pool_kernel          ReLU, then 2x2 max pooling            (relu_kernel + max_pool_kernel)
    dense_softmax_xent_kernel     FC logits, softmax, loss and dZ       (dense_forward + softmax_xent
                                                                         + softmax_xent_backward)
    dense_weight_bias_grad_kernel dW = dZᵀ X and db = Σ_n dZ           (weight_grad + bias_grad)
    dense_pool_input_grad_kernel  dX of FC, through the pooling and     (activation_backward + input_grad
                                  the ReLU before it                     + max_pool_backward + relu_backward)
    sgd_update_six_kernel         the SGD update of all six parameters  (six sgd_update_kernel)

Why the fusions are exact: ReLU is monotone, so the maximum of ReLU's outputs over a window is
ReLU of the window's maximum, and the window's first largest input is also where its first
largest output is whenever that output is positive. Where it is not, ReLU's gradient is 0 there
and so is every gradient of the window. The shortcuts therefore give the same numbers as the
kernels they replace (the sums over a row are added in another order, so they agree to rounding).
The simulator has no warp shuffles, so the sums across threads go through shared memory.
"""

from __future__ import annotations

import math

from numba import cuda, float32

from gpulib.cnn.kernels import window_max

LANES = 32  # threads that share one sum in the FC kernels (a warp)
SLICES = 8  # dense_weight_bias_grad_kernel: threads that split one weight's sum over the batch
MAX_CLASSES = 32  # dense_softmax_xent_kernel: one row of LANES threads per class, at most 1024 a block


@cuda.jit
def relu_max_pool_kernel(Z, size, Y, argmax):
    """One thread per output: Y = max(0, the size×size window's maximum of Z) and where in the
    window that maximum was (first on ties), as relu_kernel then max_pool_kernel would give."""
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    C = Y.shape[1]
    for plane in range(cuda.blockIdx.z, Y.shape[0] * C, cuda.gridDim.z):  # (image, channel) planes
        n = plane // C
        c = plane % C
        if y < Y.shape[2] and x < Y.shape[3]:
            best, where = window_max(Z, n, c, y, x, size)
            Y[n, c, y, x] = float32(0.0) if best < float32(0.0) else best  # a NaN passes through
            argmax[n, c, y, x] = where


@cuda.jit
def dense_softmax_xent_kernel(X, W, b, labels, loss, dZ):
    """A block per sample n, LANES threads per class j: Z[n, j] = Σ_i X[n, i]·W[j, i] + b[j], then
    loss[n] = -log softmax(Z[n])[labels[n]] and dZ[n] = (softmax(Z[n]) - onehot) / N, with the
    same guards as softmax_xent_kernel (the row's maximum subtracted, log1p of the rest) and
    softmax_xent_backward_kernel (the label's column as minus the others' sum)."""
    partial = cuda.shared.array(MAX_CLASSES * LANES, float32)
    z = cuda.shared.array(MAX_CLASSES, float32)
    lane, j, n = cuda.threadIdx.x, cuda.threadIdx.y, cuda.blockIdx.x
    classes = W.shape[0]
    acc = float32(0.0)
    for i in range(lane, X.shape[1], LANES):  # neighbouring threads read neighbouring inputs
        acc += X[n, i] * W[j, i]
    partial[j * LANES + lane] = acc
    cuda.syncthreads()
    if lane == 0:
        total = b[j]
        for k in range(LANES):
            total += partial[j * LANES + k]
        z[j] = total
    cuda.syncthreads()
    if lane == 0 and j == 0:
        top = 0
        for k in range(1, classes):
            if z[k] > z[top]:
                top = k
        m = z[top]
        rest = float32(0.0)
        for k in range(classes):
            if k != top:
                rest += math.exp(z[k] - m)
        denominator = float32(1.0) + rest
        label = labels[n]
        scale = float32(1.0) / float32(X.shape[0])
        others = float32(0.0)
        for k in range(classes):
            p = math.exp(z[k] - m) / denominator
            if k != label:
                others += p
                dZ[n, k] = p * scale
        dZ[n, label] = -others * scale
        loss[n] = math.log1p(rest) + (m - z[label])


@cuda.jit
def dense_weight_bias_grad_kernel(dZ, X, dW, db):
    """dW[j, i] = Σ_n dZ[n, j]·X[n, i] and, as column i = n_in (an input that is always 1),
    db[j] = Σ_n dZ[n, j]. Block (LANES, SLICES) per (LANES columns, row j): thread (t, s) sums the
    images s, s + SLICES, ...; thread (t, 0) adds the SLICES partial sums in order."""
    partial = cuda.shared.array(SLICES * LANES, float32)
    t, s = cuda.threadIdx.x, cuda.threadIdx.y
    i = cuda.blockIdx.x * LANES + t
    j = cuda.blockIdx.y
    n_in = X.shape[1]
    acc = float32(0.0)
    if i < n_in:
        for n in range(s, X.shape[0], SLICES):  # neighbouring threads read neighbouring inputs
            acc += dZ[n, j] * X[n, i]
    elif i == n_in:
        for n in range(s, X.shape[0], SLICES):
            acc += dZ[n, j]
    partial[s * LANES + t] = acc
    cuda.syncthreads()
    if s == 0 and i <= n_in:
        total = float32(0.0)
        for k in range(SLICES):
            total += partial[k * LANES + t]
        if i < n_in:
            dW[j, i] = total
        else:
            db[j] = total


@cuda.jit
def dense_pool_input_grad_kernel(dZ, W, Y, argmax, size, dX):
    """One thread per element of the pooling's input (the ReLU's input Z): the FC layer's input
    gradient Σ_j dZ[n, j]·W[j, f] of its window's pooled feature f, if it was the window's maximum
    and the pooled value is positive (ReLU's gradient), else 0. Y and argmax are
    relu_max_pool_kernel's; f = (c·Ho + y)·Wo + x is the window's place in the flattened features."""
    ix = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    iy = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    C, Ho, Wo = Y.shape[1], Y.shape[2], Y.shape[3]
    for plane in range(cuda.blockIdx.z, dX.shape[0] * C, cuda.gridDim.z):  # (image, channel) planes
        n = plane // C
        c = plane % C
        if iy < dX.shape[2] and ix < dX.shape[3]:
            y, x = iy // size, ix // size
            g = float32(0.0)
            if y < Ho and x < Wo:  # rows/columns past the last window get nothing
                if argmax[n, c, y, x] == (iy % size) * size + ix % size and Y[n, c, y, x] > float32(0.0):
                    f = (c * Ho + y) * Wo + x
                    for j in range(W.shape[0]):
                        g += dZ[n, j] * W[j, f]
            dX[n, c, iy, ix] = g


@cuda.jit
def sgd_update_six_kernel(p0, g0, p1, g1, p2, g2, p3, g3, p4, g4, p5, g5, lr):
    """θ ← θ - η ∇θ for six flat parameters in one launch: thread i updates element i of the six
    laid end to end (first p0's elements, then p1's, ...)."""
    i = cuda.grid(1)
    if i < p0.shape[0]:
        p0[i] -= lr * g0[i]
        return
    i -= p0.shape[0]
    if i < p1.shape[0]:
        p1[i] -= lr * g1[i]
        return
    i -= p1.shape[0]
    if i < p2.shape[0]:
        p2[i] -= lr * g2[i]
        return
    i -= p2.shape[0]
    if i < p3.shape[0]:
        p3[i] -= lr * g3[i]
        return
    i -= p3.shape[0]
    if i < p4.shape[0]:
        p4[i] -= lr * g4[i]
        return
    i -= p4.shape[0]
    if i < p5.shape[0]:
        p5[i] -= lr * g5[i]
