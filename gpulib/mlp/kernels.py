"""16.1 kernels: a dense layer forward and backward, softmax cross-entropy, and an SGD step.

Every kernel gives one thread one output element, the mapping of the chapter: a thread
computes one neuron of one sample (forward), one input gradient, one weight gradient or
one bias gradient (backward). No kernel here uses shared memory; 16.3 shows what it adds.

Layouts (row-major, one sample per row, as in gpulib.reference):
    X  [N, n_in]   the layer's input        W  [n_out, n_in]   weights (one row per neuron)
    b  [n_out]     biases                   H  [N, n_out]      the layer's output σ(Z)
In 2-D launches the grid's x dimension runs along the row (the fastest-varying index), so
neighbouring threads write neighbouring addresses.
"""

import math

from numba import cuda, float32

# Activation codes, passed to kernels as plain integers.
IDENTITY, RELU, SIGMOID, TANH = 0, 1, 2, 3
ACTIVATION_CODES = {"identity": IDENTITY, "relu": RELU, "sigmoid": SIGMOID, "tanh": TANH}


@cuda.jit(device=True)
def activate(z, act):
    """σ(z) for one value. ReLU is written as a comparison, not max(), so that a NaN passes
    through on the GPU as in NumPy (the GPU's fmaxf would silently turn NaN into 0)."""
    if act == RELU:
        return float32(0.0) if z < float32(0.0) else z
    if act == SIGMOID:
        return float32(1.0) / (float32(1.0) + math.exp(-z))
    if act == TANH:
        return math.tanh(z)
    return z


@cuda.jit(device=True)
def activation_grad(h, act):
    """σ'(z) from the output h = σ(z): ReLU 1 if h > 0, sigmoid h(1-h), tanh 1-h²."""
    if act == RELU:
        return float32(1.0) if h > float32(0.0) else float32(0.0)
    if act == SIGMOID:
        return h * (float32(1.0) - h)
    if act == TANH:
        return float32(1.0) - h * h
    return float32(1.0)


# ------------------------------------------------------------------ forward
@cuda.jit
def layer_forward_kernel(W, b, h_prev, h, act):
    """One sample, one thread per neuron j: h[j] = σ(Σ_i W[j, i]·h_prev[i] + b[j])."""
    j = cuda.grid(1)
    if j < h.shape[0]:
        z = b[j]
        for i in range(h_prev.shape[0]):
            z += W[j, i] * h_prev[i]
        h[j] = activate(z, act)


@cuda.jit
def dense_forward_kernel(X, W, b, H, act):
    """A batch, one thread per (sample n, neuron j): H[n, j] = σ(Σ_i X[n, i]·W[j, i] + b[j])."""
    j, n = cuda.grid(2)
    if n < H.shape[0] and j < H.shape[1]:
        z = b[j]
        for i in range(X.shape[1]):
            z += X[n, i] * W[j, i]
        H[n, j] = activate(z, act)


# ------------------------------------------------------------------ backward
@cuda.jit
def activation_backward_kernel(H, dH, dZ, act):
    """Through the activation, element by element: dZ = dH ⊙ σ'(Z), with σ' taken from H."""
    j, n = cuda.grid(2)
    if n < H.shape[0] and j < H.shape[1]:
        dZ[n, j] = dH[n, j] * activation_grad(H[n, j], act)


@cuda.jit
def input_grad_kernel(dZ, W, dX):
    """One thread per input element: dX[n, i] = Σ_j dZ[n, j]·W[j, i] (per sample dx = Wᵀ dz)."""
    i, n = cuda.grid(2)
    if n < dX.shape[0] and i < dX.shape[1]:
        acc = float32(0.0)
        for j in range(W.shape[0]):
            acc += dZ[n, j] * W[j, i]
        dX[n, i] = acc


@cuda.jit
def weight_grad_kernel(dZ, X, dW):
    """One thread per weight: dW[j, i] = Σ_n dZ[n, j]·X[n, i] (dW = dZᵀ X, summed over the batch)."""
    i, j = cuda.grid(2)
    if j < dW.shape[0] and i < dW.shape[1]:
        acc = float32(0.0)
        for n in range(X.shape[0]):
            acc += dZ[n, j] * X[n, i]
        dW[j, i] = acc


@cuda.jit
def bias_grad_kernel(dZ, db):
    """One thread per bias: db[j] = Σ_n dZ[n, j]."""
    j = cuda.grid(1)
    if j < db.shape[0]:
        acc = float32(0.0)
        for n in range(dZ.shape[0]):
            acc += dZ[n, j]
        db[j] = acc


# ------------------------------------------------------------------ loss
@cuda.jit
def softmax_xent_kernel(Z, labels, P, loss):
    """One thread per sample: P = softmax(Z[n]) and loss[n] = -log P[n, labels[n]].

    Two tricks keep float32 accurate. The row maximum m (at index top) is subtracted before
    exp, so no exp overflows. And the sum is split as 1 + rest, rest = Σ_{k≠top} exp(Z_k - m),
    so log Σ_k exp(Z_k) = m + log1p(rest): a confident prediction (rest ≈ 1e-6) keeps its
    small loss instead of losing it to rounding in log(1.000001).
    """
    n = cuda.grid(1)
    if n < Z.shape[0]:
        top = 0
        for k in range(1, Z.shape[1]):
            if Z[n, k] > Z[n, top]:
                top = k
        m = Z[n, top]
        rest = float32(0.0)
        for k in range(Z.shape[1]):
            if k != top:
                rest += math.exp(Z[n, k] - m)
        total = float32(1.0) + rest
        for k in range(Z.shape[1]):
            P[n, k] = math.exp(Z[n, k] - m) / total
        loss[n] = math.log1p(rest) + (m - Z[n, labels[n]])


@cuda.jit
def softmax_xent_backward_kernel(P, labels, dZ):
    """Gradient of the mean loss: dZ[n, k] = (P[n, k] - [k == labels[n]]) / N.

    For the label's own column, P - 1 is computed as minus the sum of the other
    probabilities: when the model is confident, P rounds to 1.0 in float32 and P - 1 would
    be 0, while the sum of the others keeps the small, correct gradient.
    """
    k, n = cuda.grid(2)
    if n < P.shape[0] and k < P.shape[1]:
        if k == labels[n]:
            others = float32(0.0)
            for j in range(P.shape[1]):
                if j != k:
                    others += P[n, j]
            dZ[n, k] = -others / float32(P.shape[0])
        else:
            dZ[n, k] = P[n, k] / float32(P.shape[0])


# ------------------------------------------------------------------ update
@cuda.jit
def sgd_update_kernel(theta, grad, lr):
    """Gradient descent on a flat parameter array: θ ← θ - η ∇θ."""
    i = cuda.grid(1)
    if i < theta.shape[0]:
        theta[i] -= lr * grad[i]
