"""Float64 NumPy references: the trusted answer every kernel is checked against.

Each function computes one operation of the chapter in plain NumPy, in float64, with the
same names and layouts as the kernels: X [N, n_in] (one sample per row), W [n_out, n_in],
b [n_out], H [N, n_out]. Nothing here is fast; everything here is easy to read.
"""

from __future__ import annotations

import numpy as np

from gpulib.shapes import conv_output_size

ACTIVATIONS = ("identity", "relu", "sigmoid", "tanh")


def _f64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def _check_activation(name: str) -> None:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {ACTIVATIONS}")


# ---------------------------------------------------------------- 16.1: activations
def activate(Z, activation: str):
    """σ(Z) element by element."""
    _check_activation(activation)
    (Z,) = _f64(Z)
    if activation == "relu":
        return np.maximum(Z, 0.0)
    if activation == "sigmoid":
        return 1.0 / (1.0 + np.exp(-Z))
    if activation == "tanh":
        return np.tanh(Z)
    return Z


def activation_grad(H, activation: str):
    """σ'(Z) written in terms of the output H = σ(Z), which is what the backward pass keeps."""
    _check_activation(activation)
    (H,) = _f64(H)
    if activation == "relu":
        return (H > 0.0).astype(np.float64)
    if activation == "sigmoid":
        return H * (1.0 - H)
    if activation == "tanh":
        return 1.0 - H * H
    return np.ones_like(H)


# ---------------------------------------------------------------- 16.1: one layer
def layer_forward(W, b, h_prev, activation: str = "relu"):
    """One layer for one sample: h = σ(W h_prev + b)."""
    W, b, h_prev = _f64(W, b, h_prev)
    return activate(W @ h_prev + b, activation)


def dense_forward(X, W, b, activation: str = "relu"):
    """One layer for a batch (one sample per row): H = σ(X Wᵀ + b)."""
    X, W, b = _f64(X, W, b)
    return activate(X @ W.T + b, activation)


def dense_magnitude(X, W, b):
    """|X|·|W|ᵀ + |b|: the size of the terms summed into each Z = X Wᵀ + b.

    Float32 rounding error in Z is proportional to this, not to |Z| (terms can cancel), so
    it is the fair ``scale`` for gpulib.validate.
    """
    X, W, b = _f64(X, W, b)
    return np.abs(X) @ np.abs(W).T + np.abs(b)


def dense_backward(X, W, H, dH, activation: str = "relu"):
    """Gradients of one layer H = σ(X Wᵀ + b), given dH = ∂L/∂H.

    Returns (dX, dW, db): dZ = dH ⊙ σ'(Z), dX = dZ W (per sample: dx = Wᵀ dz),
    dW = dZᵀ X, db = Σ_n dZ.
    """
    X, W, H, dH = _f64(X, W, H, dH)
    dZ = dH * activation_grad(H, activation)
    return dZ @ W, dZ.T @ X, dZ.sum(axis=0)


# ---------------------------------------------------------------- 16.1 / 16.2: softmax
def softmax(Z):
    """Row-wise softmax, shifted by the row maximum so exp never overflows."""
    (Z,) = _f64(Z)
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def softmax_cross_entropy(Z, labels):
    """Per-sample loss -log softmax(Z)[label] and the probabilities P."""
    (Z,) = _f64(Z)
    labels = np.asarray(labels)
    m = Z.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(Z - m).sum(axis=1)) + m[:, 0]
    loss = log_sum - Z[np.arange(len(Z)), labels]
    return loss, softmax(Z)


def softmax_cross_entropy_grad(Z, labels):
    """∂(mean loss)/∂Z = (P - onehot(labels)) / N."""
    _, P = softmax_cross_entropy(Z, labels)
    P[np.arange(len(P)), np.asarray(labels)] -= 1.0
    return P / len(P)


# ---------------------------------------------------------------- 16.1: a whole MLP
def mlp_forward(params, X, activation: str = "relu"):
    """Activations of every layer [X, H1, ..., Z]; the last layer has no activation (logits)."""
    (H,) = _f64(X)
    outs = [H]
    for layer, (W, b) in enumerate(params):
        last = layer == len(params) - 1
        H = dense_forward(H, W, b, "identity" if last else activation)
        outs.append(H)
    return outs


def mlp_loss(params, X, labels, activation: str = "relu") -> float:
    """Mean softmax cross-entropy of the MLP on (X, labels)."""
    Z = mlp_forward(params, X, activation)[-1]
    return float(softmax_cross_entropy(Z, labels)[0].mean())


def mlp_loss_and_grads(params, X, labels, activation: str = "relu"):
    """Mean loss and [(dW, db), ...] for every layer, by backpropagation."""
    outs = mlp_forward(params, X, activation)
    loss = float(softmax_cross_entropy(outs[-1], labels)[0].mean())
    grads = [None] * len(params)
    dH = softmax_cross_entropy_grad(outs[-1], labels)  # the logits' layer is linear
    for layer in reversed(range(len(params))):
        W, _ = params[layer]
        act = "identity" if layer == len(params) - 1 else activation
        dX, dW, db = dense_backward(outs[layer], W, outs[layer + 1], dH, act)
        grads[layer] = (dW, db)
        dH = dX
    return loss, grads


def numerical_grad(f, x: np.ndarray, eps: float = 1e-6, indices=None):
    """Central differences (f(x+ε) - f(x-ε)) / 2ε of a scalar f at the chosen entries of x.

    ``x`` is perturbed in place and restored; ``indices`` (default: all) are flat indices.
    """
    flat = x.reshape(-1)
    indices = range(flat.size) if indices is None else indices
    out = {}
    for i in indices:
        keep = flat[i]
        flat[i] = keep + eps
        up = f()
        flat[i] = keep - eps
        down = f()
        flat[i] = keep
        out[int(i)] = (up - down) / (2 * eps)
    return out


# ---------------------------------------------------------------- 16.2 / 16.3: convolution
def conv2d(X, W, b=None, padding: int = 0, stride: int = 1):
    """Y[n, k, y, x] = Σ_{c,r,s} W[k, c, r, s]·Xpad[n, c, y·stride + r, x·stride + s] + b[k].

    X [N, C, H, W], W [K, C, R, S], Y [N, K, H', W']; Xpad is X with ``padding`` zeros on
    every side. Computed as R·S shifted matrix products, one per filter tap (r, s).
    """
    X, W = _f64(X, W)
    N, C, H, Wd = X.shape
    K, _, R, S = W.shape
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(Wd, S, padding, stride)
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    Y = np.zeros((N, K, Ho, Wo))
    for r in range(R):
        for s in range(S):
            patch = Xp[:, :, r:r + stride * (Ho - 1) + 1:stride, s:s + stride * (Wo - 1) + 1:stride]
            Y += np.einsum("nchw,kc->nkhw", patch, W[:, :, r, s])
    if b is not None:
        Y += np.asarray(b, dtype=np.float64)[None, :, None, None]
    return Y


def conv2d_backward(X, W, dY, padding: int = 0, stride: int = 1):
    """Gradients (dX, dW, db) of conv2d given dY = ∂L/∂Y.

    dX is the transposed convolution (each dY element sends W back over the window it came
    from); dW is another convolution, of X with dY; db sums dY over n, y and x.
    """
    X, W, dY = _f64(X, W, dY)
    N, C, H, Wd = X.shape
    K, _, R, S = W.shape
    Ho, Wo = dY.shape[2], dY.shape[3]
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    dXp = np.zeros_like(Xp)
    dW = np.zeros_like(W)
    for r in range(R):
        for s in range(S):
            rows = slice(r, r + stride * (Ho - 1) + 1, stride)
            cols = slice(s, s + stride * (Wo - 1) + 1, stride)
            dXp[:, :, rows, cols] += np.einsum("nkhw,kc->nchw", dY, W[:, :, r, s])
            dW[:, :, r, s] = np.einsum("nkhw,nchw->kc", dY, Xp[:, :, rows, cols])
    dX = dXp[:, :, padding:padding + H, padding:padding + Wd]
    return dX, dW, dY.sum(axis=(0, 2, 3))


def conv2d_magnitude(X, W, b=None, padding: int = 0, stride: int = 1):
    """conv2d of |X| with |W| (+|b|): the size of the terms summed into each output element."""
    return conv2d(np.abs(np.asarray(X, np.float64)), np.abs(np.asarray(W, np.float64)),
                  None if b is None else np.abs(np.asarray(b, np.float64)), padding, stride)


# ---------------------------------------------------------------- 16.2: pooling
def _windows(X, size: int):
    X = np.asarray(X, dtype=np.float64)
    N, C, H, Wd = X.shape
    Ho, Wo = H // size, Wd // size
    return X[:, :, :Ho * size, :Wo * size].reshape(N, C, Ho, size, Wo, size)


def max_pool2d(X, size: int = 2):
    """Maximum over each size×size window (stride = size); rows/columns left over are dropped."""
    return _windows(X, size).max(axis=(3, 5))


def avg_pool2d(X, size: int = 2):
    """Mean over each size×size window (stride = size)."""
    return _windows(X, size).mean(axis=(3, 5))


def max_pool2d_backward(X, dY, size: int = 2):
    """Route each dY element to the position of its window's maximum (the first one on ties)."""
    win = _windows(X, size)
    N, C, Ho, _, Wo, _ = win.shape
    flat = win.transpose(0, 1, 2, 4, 3, 5).reshape(N, C, Ho, Wo, size * size)
    first = flat.argmax(axis=-1)
    onehot = np.zeros_like(flat)
    np.put_along_axis(onehot, first[..., None], 1.0, axis=-1)
    grad = onehot * np.asarray(dY, np.float64)[..., None]
    grad = grad.reshape(N, C, Ho, Wo, size, size).transpose(0, 1, 2, 4, 3, 5)
    dX = np.zeros(np.shape(X))
    dX[:, :, :Ho * size, :Wo * size] = grad.reshape(N, C, Ho * size, Wo * size)
    return dX


def avg_pool2d_backward(X, dY, size: int = 2):
    """Spread each dY element evenly over its window."""
    dY = np.asarray(dY, np.float64)
    N, C, Ho, Wo = dY.shape
    dX = np.zeros(np.shape(X))
    dX[:, :, :Ho * size, :Wo * size] = np.repeat(np.repeat(dY, size, axis=2), size, axis=3) / size**2
    return dX


# ---------------------------------------------------------------- 16.4: im2col
def im2col(X, R: int, S: int, padding: int = 0, stride: int = 1):
    """X_col [C·R·S, N·H'·W']: row (c, r, s), column (n, y, x) holds Xpad[n, c, y·stride + r, x·stride + s]."""
    (X,) = _f64(X)
    N, C, H, W = X.shape
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(W, S, padding, stride)
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    cols = np.empty((C, R, S, N, Ho, Wo))
    for r in range(R):
        for s in range(S):
            cols[:, r, s] = Xp[:, :, r:r + stride * (Ho - 1) + 1:stride,
                               s:s + stride * (Wo - 1) + 1:stride].transpose(1, 0, 2, 3)
    return cols.reshape(C * R * S, N * Ho * Wo)


def col2im(dX_col, input_shape, R: int, S: int, padding: int = 0, stride: int = 1):
    """The adjoint of im2col: every X_col entry adds back into the X element it was copied from."""
    N, C, H, W = input_shape
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(W, S, padding, stride)
    cols = np.asarray(dX_col, np.float64).reshape(C, R, S, N, Ho, Wo)
    dXp = np.zeros((N, C, H + 2 * padding, W + 2 * padding))
    for r in range(R):
        for s in range(S):
            dXp[:, :, r:r + stride * (Ho - 1) + 1:stride,
                s:s + stride * (Wo - 1) + 1:stride] += cols[:, r, s].transpose(1, 0, 2, 3)
    return dXp[:, :, padding:padding + H, padding:padding + W]
