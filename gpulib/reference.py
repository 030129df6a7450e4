"""Float64 NumPy references: the trusted answer every kernel is checked against.

Each function computes one operation of the chapter in plain NumPy, in float64, with the
same names and layouts as the kernels: X [N, n_in] (one sample per row), W [n_out, n_in],
b [n_out], H [N, n_out]. Nothing here is fast; everything here is easy to read.
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import require_int, require_positive
from gpulib.arrays import require_real as _real
from gpulib.shapes import conv_output_size, output_shape, require_shape

ACTIVATIONS = ("identity", "relu", "sigmoid", "tanh")


def _sizes_agree(what: str, got: int, want: int) -> None:
    if got != want:
        raise ValueError(f"{what}: {got}, but must be {want}")


def _labels(labels, n: int, classes: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or y.dtype.kind not in "iu" or len(y) != n:
        raise ValueError(f"labels must be {n} integer class numbers [N] (one per row of Z), not "
                         f"{type(labels).__name__} of shape {np.shape(labels)}")
    if n and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"labels must lie in [0, {classes}) (the number of classes), found {y.min()}..{y.max()}")
    return y


def _check_activation(name: str) -> None:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {ACTIVATIONS}")


# ---------------------------------------------------------------- 16.1: activations
def activate(Z, activation: str):
    """σ(Z) element by element."""
    _check_activation(activation)
    Z = _real(Z, "Z")
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
    H = _real(H, "H")
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
    W, b, h_prev = _real(W, "W", "[n_out, n_in]"), _real(b, "b", "[n_out]"), _real(h_prev, "h_prev", "[n_in]")
    _sizes_agree("b's entries (W's rows)", len(b), W.shape[0])
    _sizes_agree("h_prev's entries (W's columns)", len(h_prev), W.shape[1])
    return activate(W @ h_prev + b, activation)


def dense_forward(X, W, b, activation: str = "relu"):
    """One layer for a batch (one sample per row): H = σ(X Wᵀ + b)."""
    X, W, b = _dense_args(X, W, b)
    return activate(X @ W.T + b, activation)


def _dense_args(X, W, b):
    X, W, b = _real(X, "X", "[N, n_in]"), _real(W, "W", "[n_out, n_in]"), _real(b, "b", "[n_out]")
    _sizes_agree("X's columns (W's columns, n_in)", X.shape[1], W.shape[1])
    _sizes_agree("b's entries (W's rows, n_out)", len(b), W.shape[0])
    return X, W, b


def dense_magnitude(X, W, b):
    """|X|·|W|ᵀ + |b|: the size of the terms summed into each Z = X Wᵀ + b.

    Float32 rounding error in Z is proportional to this, not to |Z| (terms can cancel), so
    it is the fair ``scale`` for gpulib.validate.
    """
    X, W, b = _dense_args(X, W, b)
    return np.abs(X) @ np.abs(W).T + np.abs(b)


def dense_backward(X, W, H, dH, activation: str = "relu"):
    """Gradients of one layer H = σ(X Wᵀ + b), given dH = ∂L/∂H.

    Returns (dX, dW, db): dZ = dH ⊙ σ'(Z), dX = dZ W (per sample: dx = Wᵀ dz),
    dW = dZᵀ X, db = Σ_n dZ.
    """
    X, W = _real(X, "X", "[N, n_in]"), _real(W, "W", "[n_out, n_in]")
    H, dH = _real(H, "H", "[N, n_out]"), _real(dH, "dH", "[N, n_out]")
    _sizes_agree("X's columns (W's columns, n_in)", X.shape[1], W.shape[1])
    _sizes_agree("H's shape (X's rows, W's rows)", H.shape, (X.shape[0], W.shape[0]))
    _sizes_agree("dH's shape (H's)", dH.shape, H.shape)
    dZ = dH * activation_grad(H, activation)
    return dZ @ W, dZ.T @ X, dZ.sum(axis=0)


# ---------------------------------------------------------------- 16.1 / 16.2: softmax
def softmax(Z):
    """Row-wise softmax, shifted by the row maximum so exp never overflows."""
    Z = _real(Z, "Z", "[N, classes]")
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def softmax_cross_entropy(Z, labels):
    """Per-sample loss -log softmax(Z)[label] and the probabilities P."""
    Z = _real(Z, "Z", "[N, classes]")
    labels = _labels(labels, Z.shape[0], Z.shape[1])
    m = Z.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(Z - m).sum(axis=1)) + m[:, 0]
    loss = log_sum - Z[np.arange(len(Z)), labels]
    return loss, softmax(Z)


def softmax_cross_entropy_grad(Z, labels):
    """∂(mean loss)/∂Z = (P - onehot(labels)) / N."""
    _, P = softmax_cross_entropy(Z, labels)  # (checks Z and labels)
    P[np.arange(len(P)), np.asarray(labels)] -= 1.0
    return P / len(P)


# ---------------------------------------------------------------- 16.1: a whole MLP
def mlp_forward(params, X, activation: str = "relu"):
    """Activations of every layer [X, H1, ..., Z]; the last layer has no activation (logits)."""
    H = _real(X, "X", "[N, n_in]")
    if not isinstance(params, (list, tuple)) or not params:
        raise ValueError(f"params must be a non-empty list of (W, b) pairs, not {params!r:.60}")
    outs = [H]
    for layer, (W, b) in enumerate(params):
        if np.shape(W)[-1:] != H.shape[1:]:
            raise ValueError(f"params[{layer}].W takes {np.shape(W)[-1:]} features but X (or the layer below) "
                             f"gives {H.shape[1]}")
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
    if not callable(f):
        raise ValueError(f"f must be a function of no arguments (returning the loss), not {type(f).__name__}")
    if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
        raise ValueError(f"x must be a floating-point NumPy array (perturbed in place), not {type(x).__name__}")
    require_positive(eps, "eps")
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
    X, W, b = _conv_args(X, W, b, padding, stride)
    N, C, H, Wd = X.shape
    K, _, R, S = W.shape
    _, _, Ho, Wo = output_shape(X.shape, W.shape, padding, stride)
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    Y = np.zeros((N, K, Ho, Wo))
    for r in range(R):
        for s in range(S):
            patch = Xp[:, :, r:r + stride * (Ho - 1) + 1:stride, s:s + stride * (Wo - 1) + 1:stride]
            Y += np.einsum("nchw,kc->nkhw", patch, W[:, :, r, s])
    if b is not None:
        Y += b[None, :, None, None]
    return Y


def _conv_args(X, W, b, padding, stride):
    X, W = _real(X, "X", "[N, C, H, W]"), _real(W, "W", "[K, C, R, S]")
    output_shape(X.shape, W.shape, padding, stride)  # channels, filter size, padding and stride
    if b is not None:
        b = _real(b, "b", "[K]")
        _sizes_agree("b's entries (W's filters, K)", len(b), W.shape[0])
    return X, W, b


def conv2d_backward(X, W, dY, padding: int = 0, stride: int = 1):
    """Gradients (dX, dW, db) of conv2d given dY = ∂L/∂Y.

    dX is the transposed convolution (each dY element sends W back over the window it came
    from); dW is another convolution, of X with dY; db sums dY over n, y and x.
    """
    X, W, _ = _conv_args(X, W, None, padding, stride)
    dY = _real(dY, "dY", "[N, K, H', W']")
    _sizes_agree("dY's shape (Y's: X's images, W's filters)", dY.shape, output_shape(X.shape, W.shape, padding, stride))
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
    X, W, b = _conv_args(X, W, b, padding, stride)
    return conv2d(np.abs(X), np.abs(W), None if b is None else np.abs(b), padding, stride)


# ---------------------------------------------------------------- 16.2: pooling
def _windows(X, size: int):
    X = _real(X, "X", "[N, C, H, W]")
    size = require_int(size, "size", 1)
    N, C, H, Wd = X.shape
    if size > min(H, Wd):
        raise ValueError(f"size {size}: the pooling window is larger than the {H}x{Wd} image")
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
    dY = _real(dY, "dY", "[N, C, H', W']")
    _sizes_agree("dY's shape (the pooled X's)", dY.shape, (N, C, Ho, Wo))
    grad = onehot * dY[..., None]
    grad = grad.reshape(N, C, Ho, Wo, size, size).transpose(0, 1, 2, 4, 3, 5)
    dX = np.zeros(np.shape(X))
    dX[:, :, :Ho * size, :Wo * size] = grad.reshape(N, C, Ho * size, Wo * size)
    return dX


def avg_pool2d_backward(X, dY, size: int = 2):
    """Spread each dY element evenly over its window."""
    N, C, Ho, Wo = _windows(X, size).shape[:3] + (_windows(X, size).shape[4],)
    dY = _real(dY, "dY", "[N, C, H', W']")
    _sizes_agree("dY's shape (the pooled X's)", dY.shape, (N, C, Ho, Wo))
    dX = np.zeros(np.shape(X))
    dX[:, :, :Ho * size, :Wo * size] = np.repeat(np.repeat(dY, size, axis=2), size, axis=3) / size**2
    return dX


# ---------------------------------------------------------------- 16.4: im2col
def im2col(X, R: int, S: int, padding: int = 0, stride: int = 1):
    """X_col [C·R·S, N·H'·W']: row (c, r, s), column (n, y, x) holds Xpad[n, c, y·stride + r, x·stride + s]."""
    X = _real(X, "X", "[N, C, H, W]")
    N, C, H, W = X.shape
    R, S = require_int(R, "R", 1), require_int(S, "S", 1)
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
    N, C, H, W = require_shape(input_shape, "input_shape", "[N, C, H, W]")
    R, S = require_int(R, "R", 1), require_int(S, "S", 1)
    Ho, Wo = conv_output_size(H, R, padding, stride), conv_output_size(W, S, padding, stride)
    dX_col = _real(dX_col, "dX_col", "[C·R·S, N·H'·W']")
    _sizes_agree("dX_col's shape", dX_col.shape, (C * R * S, N * Ho * Wo))
    cols = dX_col.reshape(C, R, S, N, Ho, Wo)
    dXp = np.zeros((N, C, H + 2 * padding, W + 2 * padding))
    for r in range(R):
        for s in range(S):
            dXp[:, :, r:r + stride * (Ho - 1) + 1:stride,
                s:s + stride * (Wo - 1) + 1:stride] += cols[:, r, s].transpose(1, 0, 2, 3)
    return dXp[:, :, padding:padding + H, padding:padding + W]
