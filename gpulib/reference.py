"""Float64 NumPy references: the trusted answer every kernel is checked against.

Each function computes one operation of the chapter in plain NumPy, in float64, with the
same names and layouts as the kernels: X [N, n_in] (one sample per row), W [n_out, n_in],
b [n_out], H [N, n_out]. Nothing here is fast; everything here is easy to read.
"""

from __future__ import annotations

import numpy as np

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
