"""16.1 wrappers: check the inputs, then launch the kernels of gpulib/mlp/kernels.py.

Each function takes NumPy or device arrays (float32, C-contiguous), raises ValueError that
names the problem before any launch, and returns a device array. ``out=`` lets a caller
pass the output, e.g. a ``gpulib.poisoned`` array so that an unwritten element is caught (a
tuple, one entry per result, for the functions that return several).
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import (
    blocks,
    integer_arguments,
    is_device_array,
    output,
    outputs,
    require,
    require_bool,
    require_int_labels,
    require_learning_rate,
    to_device,
)
from gpulib.mlp import kernels

BLOCK_1D = 128
BLOCK_2D = (16, 16)  # (x along a row, y down the rows)


@integer_arguments(rows=1, cols=1)
def grid_2d(rows: int, cols: int):
    """(grid, block) covering a [rows, cols] output with 16x16 blocks: x along a row, y down."""
    bx, by = BLOCK_2D
    return (blocks(cols, bx), blocks(rows, by)), BLOCK_2D


def activation_code(activation: str) -> int:
    """The kernels' code for an activation name; ValueError for an unknown one."""
    if activation not in kernels.ACTIVATION_CODES:
        raise ValueError(
            f"unknown activation {activation!r}; choose one of {tuple(kernels.ACTIVATION_CODES)}"
        )
    return kernels.ACTIVATION_CODES[activation]


def _check_layer(X, W, b):
    require(X, "X", 2, layout="[N, n_in]")
    require(W, "W", 2, layout="[n_out, n_in]")
    require(b, "b", 1, layout="[n_out]")
    if W.shape[1] != X.shape[1]:
        raise ValueError(
            f"W has shape {tuple(W.shape)} but X has {X.shape[1]} features per sample: "
            f"W must be [n_out, {X.shape[1]}]"
        )
    if b.shape[0] != W.shape[0]:
        raise ValueError(f"b has {b.shape[0]} entries but W has {W.shape[0]} rows (neurons)")


def layer_forward(W, b, h_prev, activation: str = "relu", *, out=None):
    """One sample: h = σ(W h_prev + b), one thread per neuron."""
    act = activation_code(activation)
    require(W, "W", 2, layout="[n_out, n_in]")
    require(b, "b", 1, layout="[n_out]")
    require(h_prev, "h_prev", 1, layout="[n_in]")
    if W.shape[1] != h_prev.shape[0]:
        raise ValueError(f"W has {W.shape[1]} columns but h_prev has {h_prev.shape[0]} entries")
    if b.shape[0] != W.shape[0]:
        raise ValueError(f"b has {b.shape[0]} entries but W has {W.shape[0]} rows (neurons)")
    h = output(out, (W.shape[0],))
    kernels.layer_forward_kernel[blocks(W.shape[0], BLOCK_1D), BLOCK_1D](
        to_device(W), to_device(b), to_device(h_prev), h, act
    )
    return h


def dense_forward(X, W, b, activation: str = "relu", *, out=None):
    """A batch: H = σ(X Wᵀ + b), one thread per (sample, neuron)."""
    act = activation_code(activation)
    _check_layer(X, W, b)
    H = output(out, (X.shape[0], W.shape[0]))
    grid, block = grid_2d(X.shape[0], W.shape[0])
    kernels.dense_forward_kernel[grid, block](to_device(X), to_device(W), to_device(b), H, act)
    return H


def dense_backward(X, W, H, dH, activation: str = "relu", *, need_dX: bool = True, out=None):
    """Gradients of H = σ(X Wᵀ + b) given dH = ∂L/∂H: returns (dX, dW, db).

    Four launches: dZ = dH ⊙ σ'(Z); dX = dZ W; dW = dZᵀ X; db = Σ_n dZ. With
    ``need_dX=False`` (the first layer, whose input is the data) dX is skipped and None.
    ``out`` may hold (dX, dW, db) output arrays.
    """
    need_dX = require_bool(need_dX, "need_dX")
    act = activation_code(activation)
    require(X, "X", 2, layout="[N, n_in]")
    require(W, "W", 2, layout="[n_out, n_in]")
    require(H, "H", 2, layout="[N, n_out]")
    require(dH, "dH", 2, layout="[N, n_out]")
    n, n_in = X.shape
    n_out = W.shape[0]
    if W.shape[1] != n_in:
        raise ValueError(f"W has shape {tuple(W.shape)} but X has {n_in} features: W must be [n_out, {n_in}]")
    for name, arr in (("H", H), ("dH", dH)):
        if tuple(arr.shape) != (n, n_out):
            raise ValueError(f"{name} must have shape {(n, n_out)} = [N, n_out] (X's rows, W's rows), not {tuple(arr.shape)}")
    out_dX, out_dW, out_db = outputs(out, ("dX", "dW", "db"))
    X, W, H, dH = map(to_device, (X, W, H, dH))

    dZ = output(None, (n, n_out))
    grid, block = grid_2d(n, n_out)
    kernels.activation_backward_kernel[grid, block](H, dH, dZ, act)

    dX = None
    if need_dX:
        dX = output(out_dX, (n, n_in), "dX")
        grid, block = grid_2d(n, n_in)
        kernels.input_grad_kernel[grid, block](dZ, W, dX)
    dW = output(out_dW, (n_out, n_in), "dW")
    grid, block = grid_2d(n_out, n_in)
    kernels.weight_grad_kernel[grid, block](dZ, X, dW)
    db = output(out_db, (n_out,), "db")
    kernels.bias_grad_kernel[blocks(n_out, BLOCK_1D), BLOCK_1D](dZ, db)
    return dX, dW, db


def _check_labels(labels, shape, values: bool) -> None:
    """Labels for a [N, classes] batch: their shape and dtype always, their values (a copy of N
    integers to the host) when ``values``."""
    if values:
        require_int_labels(labels, "labels", shape[0], shape[1])
    else:
        require(labels, "labels", 1, np.int32, "[N]")
        if labels.shape[0] != shape[0]:
            raise ValueError(f"labels has {labels.shape[0]} entries but there are {shape[0]} samples")


def softmax_cross_entropy(Z, labels, *, out=None, check_labels: bool = True):
    """Per-sample probabilities and loss (P, loss) of logits Z [N, classes]; one thread per
    sample. ``out`` may hold (P, loss) output arrays. ``check_labels=False`` skips reading the
    labels back to check their range, for a caller that has checked them already."""
    check_labels = require_bool(check_labels, "check_labels")
    require(Z, "Z", 2, layout="[N, classes]")
    _check_labels(labels, Z.shape, check_labels)
    out_P, out_loss = outputs(out, ("P", "loss"))
    P = output(out_P, tuple(Z.shape), "P")
    loss = output(out_loss, (Z.shape[0],), "loss")
    kernels.softmax_xent_kernel[blocks(Z.shape[0], BLOCK_1D), BLOCK_1D](
        to_device(Z), to_device(labels), P, loss
    )
    return P, loss


def softmax_cross_entropy_backward(P, labels, *, out=None, check_labels: bool = True):
    """dZ = (P - onehot(labels)) / N, the gradient of the mean loss (``check_labels`` as in
    ``softmax_cross_entropy``)."""
    check_labels = require_bool(check_labels, "check_labels")
    require(P, "P", 2, layout="[N, classes]")
    _check_labels(labels, P.shape, check_labels)
    dZ = output(out, tuple(P.shape))
    grid, block = grid_2d(P.shape[0], P.shape[1])
    kernels.softmax_xent_backward_kernel[grid, block](to_device(P), to_device(labels), dZ)
    return dZ


def sgd_update(theta, grad, lr: float) -> None:
    """θ ← θ - η ∇θ in place on a device parameter array of any shape."""
    require(theta, "theta", None)
    require(grad, "grad", None)
    if tuple(theta.shape) != tuple(grad.shape):
        raise ValueError(f"theta has shape {tuple(theta.shape)} but grad has {tuple(grad.shape)}")
    if not is_device_array(theta):
        raise ValueError("theta must be a device array: the update happens in place on the device")
    lr = require_learning_rate(lr)
    flat_theta, flat_grad = to_device(theta).ravel(), to_device(grad).ravel()
    size = flat_theta.shape[0]
    kernels.sgd_update_kernel[blocks(size, BLOCK_1D), BLOCK_1D](flat_theta, flat_grad, np.float32(lr))
