"""16.6: one model that holds the book: two convolutions, ReLU, max pooling, FC and softmax.

    X [N, 1, 8, 8] ─conv 3x3 (C1)→ ─ReLU→ ─conv 3x3 (C2)→ ─ReLU→ ─max pool 2→ [N, C2, 4, 4]
      ─flatten→ ─FC→ Z [N, 10] ─softmax cross-entropy→ loss

Every operation, forward and backward, is a gpulib kernel: the convolutions run on the
algorithm of gpulib/conv/algorithms.py that the auto-tuner picks for each layer ("auto"), or
on one named per layer; the second convolution's backward pass also gives dX, the gradient
the first layer needs. Each operation runs inside ``self.profiler.op(name)`` so that a
``gpulib.playbook.profile.Profiler`` can say what it cost.
"""

from __future__ import annotations

import numpy as np

from gpulib import reference as ref
from gpulib.arrays import blocks, is_device_array, output, require, require_bool, require_int_labels, to_device
from gpulib.cnn import fused as fused_kernels
from gpulib.cnn import layers
from gpulib.cnn.layers import BLOCK_1D
from gpulib.cnn.model import NO_PROFILER, ImageClassifier, check_grads, check_model_shape, reference_params
from gpulib.conv import front
from gpulib.mlp import layers as mlp
from gpulib.shapes import require_shape


class BookCNN(ImageClassifier):
    """Two 3x3 convolutions (padding 1) of ``channels`` = (C1, C2) filters, then FC to ``classes``."""

    def __init__(self, image_shape=(1, 8, 8), channels=(8, 16), classes: int = 10, seed: int = 0,
                 algorithms_per_layer=("auto", "auto"), inplace_relu: bool = False, reduction: str | None = None,
                 input_grad: str = "gather", fused: bool = False):
        """``algorithms_per_layer``: for each conv layer a name of gpulib.conv.algorithms.ALGORITHMS
        or "auto". ``inplace_relu``: ReLU overwrites the convolution's output (its backward pass
        needs only ReLU's output), which saves one activation per layer. ``reduction``: how the
        direct backward kernels sum dW and db ("thread", "tree" or "staged") and ``input_grad`` how
        they find the first layer's dX ("gather" or "flipped"), see gpulib.cnn.conv2d_backward.
        ``fused``: the step's small kernels fused (gpulib/cnn/fused.py): ReLU with the pooling,
        the FC layer with softmax, the loss and its gradient, FC's backward with the pooling's and
        ReLU's, conv1's backward with ReLU's (gpulib.cnn.conv2d_backward's ``relu_output``), one SGD
        launch for all six parameters (at most 32 classes)."""
        names = front.CHOICES
        channels = require_shape(channels, "channels", "[C1, C2]")
        if (not isinstance(algorithms_per_layer, (tuple, list)) or len(algorithms_per_layer) != 2
                or any(a not in names for a in algorithms_per_layer)):
            raise ValueError(f"algorithms_per_layer must be two of {names}, not {algorithms_per_layer!r}")
        inplace_relu = require_bool(inplace_relu, "inplace_relu")
        fused = require_bool(fused, "fused")
        if reduction is not None and reduction not in layers.REDUCTIONS:
            raise ValueError(f"reduction must be None or one of {layers.REDUCTIONS}, not {reduction!r}")
        if input_grad not in layers.INPUT_GRADS:
            raise ValueError(f"input_grad must be one of {layers.INPUT_GRADS}, not {input_grad!r}")
        (C, H, W), classes, seed = check_model_shape(image_shape, classes, seed)
        if fused and classes > fused_kernels.MAX_CLASSES:
            raise ValueError(f"classes {classes}: fused=True takes at most {fused_kernels.MAX_CLASSES} (a row of "
                             f"{fused_kernels.LANES} threads per class in one block of dense_softmax_xent_kernel)")
        self.image_shape, self.channels, self.classes = (C, H, W), tuple(channels), classes
        self.algorithms = tuple(algorithms_per_layer)
        self.inplace_relu = inplace_relu
        self.reduction = reduction
        self.input_grad = input_grad
        self.fused = fused
        self.profiler = NO_PROFILER
        rng = np.random.default_rng(seed)
        C1, C2 = channels
        features = C2 * (H // 2) * (W // 2)
        host = [rng.normal(0, np.sqrt(2 / (C * 9)), (C1, C, 3, 3)), np.zeros(C1),
                rng.normal(0, np.sqrt(2 / (C1 * 9)), (C2, C1, 3, 3)), np.zeros(C2),
                rng.normal(0, np.sqrt(1 / features), (classes, features)), np.zeros(classes)]
        self.params = [to_device(np.asarray(p, np.float32)) for p in host]


    def _relu(self, Z):
        return layers.relu(Z, out=Z if self.inplace_relu else None)

    def _forward(self, X, logits: bool = True):
        """Every intermediate tensor the backward pass needs, by name (the FC layer's logits too,
        unless ``logits`` is False: the fused step finds them inside its loss kernel)."""
        W1, b1, W2, b2, Wf, bf = self.params
        op = self.profiler.op
        t = dict(X=X)
        with op("conv1 forward"):
            t["conv1"] = layers.conv2d_forward(X, W1, b1, padding=1, algorithm=self.algorithms[0])
        with op("relu1"):
            t["relu1"] = self._relu(t["conv1"])
        with op("conv2 forward"):
            t["conv2"] = layers.conv2d_forward(t["relu1"], W2, b2, padding=1, algorithm=self.algorithms[1])
        if self.fused:
            with op("relu2 + max pool"):
                t["pool"], t["argmax"] = _relu_max_pool(t["conv2"])
        else:
            with op("relu2"):
                t["relu2"] = self._relu(t["conv2"])
            with op("max pool"):
                t["pool"], t["argmax"] = layers.max_pool2d(t["relu2"], 2)
        t["flat"] = t["pool"].reshape(t["pool"].shape[0], t["pool"].size // t["pool"].shape[0])
        if logits:
            with op("fc forward"):
                t["logits"] = mlp.dense_forward(t["flat"], Wf, bf, "identity")
        return t

    def loss_and_grads(self, X, labels):
        """Mean loss and the gradients of the six parameters, by backpropagation."""
        X = self._images(X)  # inputs and labels are checked before anything is launched
        require_int_labels(labels, "labels", X.shape[0], self.classes)
        losses, grads = self.device_loss_and_grads(X, to_device(labels))
        with self.profiler.op("loss to host"):
            mean_loss = float(losses.copy_to_host().mean(dtype=np.float64))
        return mean_loss, grads

    def device_loss_and_grads(self, X, labels):
        """Each sample's loss and the six gradients, all left on the device: X is a device batch
        [N, C, H, W] and labels device int32 [N], both checked already (``loss_and_grads`` checks
        them). Nothing here copies between host and device, so a recording of it
        (gpulib/playbook/replay.py) repeats the whole step."""
        for name, a, ndim, dtype in (("X", X, 4, np.float32), ("labels", labels, 1, np.int32)):
            if not is_device_array(a):  # shapes and types only: their values were checked by the caller
                raise ValueError(f"{name} must be a device array here (loss_and_grads takes NumPy arrays)")
            require(a, name, ndim, dtype)
        if tuple(X.shape[1:]) != self.image_shape or labels.shape[0] != X.shape[0]:
            raise ValueError(f"X must be [N, *{self.image_shape}] and labels [N]: got X {tuple(X.shape)}, labels "
                             f"{tuple(labels.shape)} (one label per image of X)")
        if self.fused:
            return self._fused_loss_and_grads(X, labels)
        op = self.profiler.op
        t = self._forward(X)
        Wf = self.params[4]
        with op("softmax + loss"):
            P, losses = mlp.softmax_cross_entropy(t["logits"], labels, check_labels=False)  # checked
        with op("softmax backward"):
            dZ = mlp.softmax_cross_entropy_backward(P, labels, check_labels=False)
        with op("fc backward"):
            d_flat, dWf, dbf = mlp.dense_backward(t["flat"], Wf, t["logits"], dZ, "identity")
        with op("max pool backward"):
            d_relu2 = layers.max_pool2d_backward(d_flat.reshape(*t["pool"].shape), t["argmax"], t["relu2"].shape, 2,
                                            check_argmax=False)  # argmax is max_pool2d's own
        with op("relu2 backward"):
            d_conv2 = layers.relu_backward(t["relu2"], d_relu2)
        return losses, [*self._conv_grads(t["X"], t["relu1"], d_conv2), dWf, dbf]

    def _fused_loss_and_grads(self, X, labels):
        """device_loss_and_grads with gpulib/cnn/fused.py's kernels (X and labels checked)."""
        op = self.profiler.op
        t = self._forward(X, logits=False)
        Wf, bf = self.params[4:]
        with op("fc + softmax + loss"):
            losses, dZ = _dense_softmax_xent(t["flat"], Wf, bf, labels)
        with op("fc backward"):
            dWf, dbf = _dense_weight_bias_grad(dZ, t["flat"], Wf.shape)
        with op("fc + max pool + relu2 backward"):
            d_conv2 = _dense_pool_input_grad(dZ, Wf, t["pool"], t["argmax"], t["conv2"].shape)
        return losses, [*self._conv_grads(t["X"], t["relu1"], d_conv2), dWf, dbf]

    def _conv_grads(self, X, relu1, d_conv2):
        """[dW1, db1, dW2, db2] from dL/d(conv2's output), back through conv2, ReLU and conv1."""
        W1, W2 = self.params[0], self.params[2]
        d_relu1, dW2, db2 = self._conv_backward(1, relu1, W2, d_conv2, need_dX=True)
        if self.fused:  # ReLU's backward inside conv1's (folded into the staged kernel where it runs)
            _, dW1, db1 = self._conv_backward(0, X, W1, d_relu1, need_dX=False, relu_output=relu1)
        else:
            with self.profiler.op("relu1 backward"):
                d_conv1 = layers.relu_backward(relu1, d_relu1)
            _, dW1, db1 = self._conv_backward(0, X, W1, d_conv1, need_dX=False)
        return [dW1, db1, dW2, db2]

    def _conv_backward(self, layer: int, X, W, dY, need_dX: bool, relu_output=None):
        name = f"conv{layer + 1} backward" + (" + relu1 backward" if relu_output is not None else "")
        with self.profiler.op(name):
            return layers.conv2d_backward(X, W, dY, padding=1, need_dX=need_dX, algorithm=self.algorithms[layer],
                                          reduction=self.reduction, input_grad=self.input_grad, relu_output=relu_output)

    def step(self, grads, lr: float) -> None:
        """One SGD step (ImageClassifier.step); with ``fused``, one launch for all six parameters."""
        if not self.fused:
            return super().step(grads, lr)
        check_grads(grads, self.params, lr)
        with self.profiler.op("SGD update"):
            _sgd_update_six(self.params, grads, lr)
        return None


def _relu_max_pool(Z):
    N, C, H, W = Z.shape
    Y = output(None, (N, C, H // 2, W // 2))
    argmax = output(None, Y.shape, dtype=np.int32)
    grid, block = layers.grid_nchw(*Y.shape)
    fused_kernels.relu_max_pool_kernel[grid, block](Z, 2, Y, argmax)
    return Y, argmax


def _dense_softmax_xent(X, W, b, labels):
    N, classes = X.shape[0], W.shape[0]
    losses, dZ = output(None, (N,)), output(None, (N, classes))
    fused_kernels.dense_softmax_xent_kernel[N, (fused_kernels.LANES, classes)](X, W, b, labels, losses, dZ)
    return losses, dZ


def _dense_weight_bias_grad(dZ, X, W_shape):
    classes, n_in = W_shape
    dW, db = output(None, W_shape), output(None, (classes,))
    grid = (blocks(n_in + 1, fused_kernels.LANES), classes)  # column n_in is the bias
    fused_kernels.dense_weight_bias_grad_kernel[grid, (fused_kernels.LANES, fused_kernels.SLICES)](dZ, X, dW, db)
    return dW, db


def _dense_pool_input_grad(dZ, W, Y, argmax, input_shape):
    dX = output(None, input_shape)
    grid, block = layers.grid_nchw(*input_shape)
    fused_kernels.dense_pool_input_grad_kernel[grid, block](dZ, W, Y, argmax, 2, dX)
    return dX


def _sgd_update_six(params, grads, lr: float) -> None:
    flat = [a for p, g in zip(params, grads) for a in (p.ravel(), to_device(g).ravel())]
    total = sum(p.size for p in params)
    fused_kernels.sgd_update_six_kernel[blocks(total, BLOCK_1D), BLOCK_1D](*flat, np.float32(lr))



def reference_loss(params, X, labels) -> float:
    """The same network in float64 NumPy (for finite-difference checks of the gradients)."""
    W1, b1, W2, b2, Wf, bf = reference_params(params, X, 6)
    a1 = np.maximum(ref.conv2d(X, W1, b1, padding=1), 0.0)
    a2 = np.maximum(ref.conv2d(a1, W2, b2, padding=1), 0.0)
    logits = ref.max_pool2d(a2, 2).reshape(len(X), -1) @ Wf.T + bf
    return float(ref.softmax_cross_entropy(logits, labels)[0].mean())


def reference_grads(params, X, labels):
    """The six gradients in float64, by the chain rule on the reference operations."""
    W1, b1, W2, b2, Wf, bf = reference_params(params, X, 6)
    X = np.asarray(X, np.float64)
    z1 = ref.conv2d(X, W1, b1, padding=1)
    a1 = np.maximum(z1, 0.0)
    z2 = ref.conv2d(a1, W2, b2, padding=1)
    a2 = np.maximum(z2, 0.0)
    pooled = ref.max_pool2d(a2, 2)
    flat = pooled.reshape(len(X), -1)
    logits = flat @ Wf.T + bf
    dZ = ref.softmax_cross_entropy_grad(logits, labels)
    dWf, dbf = dZ.T @ flat, dZ.sum(axis=0)
    d_a2 = ref.max_pool2d_backward(a2, (dZ @ Wf).reshape(pooled.shape), 2)
    d_z2 = d_a2 * (a2 > 0)
    d_a1, dW2, db2 = ref.conv2d_backward(a1, W2, d_z2, padding=1)
    d_z1 = d_a1 * (a1 > 0)
    _, dW1, db1 = ref.conv2d_backward(X, W1, d_z1, padding=1)
    return [dW1, db1, dW2, db2, dWf, dbf]
