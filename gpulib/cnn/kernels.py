"""16.2 kernels: the backward pass of a convolution, ReLU and pooling on [N, C, H, W] tensors.

The forward convolution is gpulib/conv/direct.py (16.3). Here, as there, every thread owns
one output element of its kernel:
    conv2d_input_grad_kernel    one input element dX[n, c, iy, ix]  (the transposed convolution)
    conv2d_weight_grad_kernel   one weight dW[k, c, r, s]            (a convolution of X with dY)
    conv2d_bias_grad_kernel     one bias db[k]
    flip_filters_kernel         one weight of W turned 180° with its channels swapped (16.6:
                                dX of a stride-1 layer as a forward convolution of dY)
    pooling kernels             one output element forward, one input element backward
"""

import math

from numba import cuda, float32

# ------------------------------------------------------------------ convolution backward


@cuda.jit
def conv2d_input_grad_kernel(dY, W, dX, padding, stride):
    """dX[n, c, iy, ix] = Σ_{k,r,s} W[k, c, r, s]·dY[n, k, y, x] over the (y, x) whose window
    put tap (r, s) on (iy, ix), i.e. y·stride + r - padding = iy (and the same for x)."""
    ix = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    iy = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    C = dX.shape[1]
    for plane in range(cuda.blockIdx.z, dX.shape[0] * C, cuda.gridDim.z):  # (image, channel) planes
        n = plane // C
        c = plane % C
        Ho, Wo = dY.shape[2], dY.shape[3]
        if iy < dX.shape[2] and ix < dX.shape[3]:
            acc = float32(0.0)
            for k in range(W.shape[0]):
                for r in range(W.shape[2]):
                    ty = iy + padding - r
                    if ty >= 0 and ty % stride == 0 and ty // stride < Ho:
                        y = ty // stride
                        for s in range(W.shape[3]):
                            tx = ix + padding - s
                            if tx >= 0 and tx % stride == 0 and tx // stride < Wo:
                                acc += W[k, c, r, s] * dY[n, k, y, tx // stride]
            dX[n, c, iy, ix] = acc


@cuda.jit
def conv2d_weight_grad_kernel(X, dY, dW, padding, stride):
    """One thread per weight: dW[k, c, r, s] = Σ_{n,y,x} dY[n, k, y, x]·X[n, c, y·stride + r - p, x·stride + s - p]."""
    i = cuda.grid(1)
    K, C, R, S = dW.shape
    if i < K * C * R * S:
        k = i // (C * R * S)
        c = (i // (R * S)) % C
        r = (i // S) % R
        s = i % S
        H, Wd = X.shape[2], X.shape[3]
        acc = float32(0.0)
        for n in range(X.shape[0]):
            for y in range(dY.shape[2]):
                iy = y * stride + r - padding
                if 0 <= iy < H:
                    for x in range(dY.shape[3]):
                        ix = x * stride + s - padding
                        if 0 <= ix < Wd:
                            acc += dY[n, k, y, x] * X[n, c, iy, ix]
        dW[k, c, r, s] = acc


@cuda.jit
def conv2d_bias_grad_kernel(dY, db):
    """One thread per output channel: db[k] = Σ_{n,y,x} dY[n, k, y, x]."""
    k = cuda.grid(1)
    if k < db.shape[0]:
        acc = float32(0.0)
        for n in range(dY.shape[0]):
            for y in range(dY.shape[2]):
                for x in range(dY.shape[3]):
                    acc += dY[n, k, y, x]
        db[k] = acc


@cuda.jit
def flip_filters_kernel(W, Wf, zeros):
    """Wf[c, k, R-1-r, S-1-s] = W[k, c, r, s], one thread per weight; the first C threads also
    zero ``zeros`` (C values: the bias of the convolution Wf is for)."""
    i = cuda.grid(1)
    K, C, R, S = W.shape
    if i < C:
        zeros[i] = float32(0.0)
    if i < K * C * R * S:
        k = i // (C * R * S)
        c = (i // (R * S)) % C
        r = (i // S) % R
        s = i % S
        Wf[c, k, R - 1 - r, S - 1 - s] = W[k, c, r, s]


# ------------------------------------------------------------------ ReLU (any shape, flattened)
@cuda.jit
def relu_kernel(Z, H):
    """H = max(0, Z) element by element (NaN passes through, as in NumPy)."""
    i = cuda.grid(1)
    if i < Z.shape[0]:
        H[i] = float32(0.0) if Z[i] < float32(0.0) else Z[i]


@cuda.jit
def relu_backward_kernel(H, dH, dZ):
    """dZ = dH where the output was positive, 0 elsewhere."""
    i = cuda.grid(1)
    if i < H.shape[0]:
        dZ[i] = dH[i] if H[i] > float32(0.0) else float32(0.0)


# ------------------------------------------------------------------ pooling (window = stride = size)
@cuda.jit(device=True)
def window_max(X, n, c, y, x, size):
    """(maximum, where) of the size×size window (y, x) of plane (n, c): where = i·size + j inside the
    window, the first on ties. A NaN in the window is its maximum, as in NumPy: the first NaN wins
    and stays."""
    best = -math.inf
    where = 0
    for i in range(size):
        for j in range(size):
            v = X[n, c, y * size + i, x * size + j]
            if v > best or (math.isnan(v) and not math.isnan(best)):
                best = v
                where = i * size + j
    return best, where


@cuda.jit
def max_pool_kernel(X, size, Y, argmax):
    """One thread per output: the window's maximum, and where in the window it was (window_max)."""
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    C = Y.shape[1]
    for plane in range(cuda.blockIdx.z, Y.shape[0] * C, cuda.gridDim.z):  # (image, channel) planes
        n = plane // C
        c = plane % C
        if y < Y.shape[2] and x < Y.shape[3]:
            best, where = window_max(X, n, c, y, x, size)
            Y[n, c, y, x] = best
            argmax[n, c, y, x] = where


@cuda.jit
def avg_pool_kernel(X, size, Y):
    """One thread per output: the mean of its size×size window."""
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    C = Y.shape[1]
    for plane in range(cuda.blockIdx.z, Y.shape[0] * C, cuda.gridDim.z):  # (image, channel) planes
        n = plane // C
        c = plane % C
        if y < Y.shape[2] and x < Y.shape[3]:
            acc = float32(0.0)
            for i in range(size):
                for j in range(size):
                    acc += X[n, c, y * size + i, x * size + j]
            Y[n, c, y, x] = acc / float32(size * size)


@cuda.jit
def max_pool_backward_kernel(dY, argmax, size, dX):
    """One thread per input element: the window's gradient if this element was its maximum, else 0."""
    ix = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    iy = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    C = dX.shape[1]
    for plane in range(cuda.blockIdx.z, dX.shape[0] * C, cuda.gridDim.z):  # (image, channel) planes
        n = plane // C
        c = plane % C
        if iy < dX.shape[2] and ix < dX.shape[3]:
            y, x = iy // size, ix // size
            g = float32(0.0)
            if y < dY.shape[2] and x < dY.shape[3]:  # rows/columns past the last window get nothing
                if argmax[n, c, y, x] == (iy % size) * size + ix % size:
                    g = dY[n, c, y, x]
            dX[n, c, iy, ix] = g


@cuda.jit
def avg_pool_backward_kernel(dY, size, dX):
    """One thread per input element: its window's gradient shared equally, dY / size²."""
    ix = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    iy = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    C = dX.shape[1]
    for plane in range(cuda.blockIdx.z, dX.shape[0] * C, cuda.gridDim.z):  # (image, channel) planes
        n = plane // C
        c = plane % C
        if iy < dX.shape[2] and ix < dX.shape[3]:
            y, x = iy // size, ix // size
            g = float32(0.0)
            if y < dY.shape[2] and x < dY.shape[3]:
                g = dY[n, c, y, x] / float32(size * size)
            dX[n, c, iy, ix] = g
