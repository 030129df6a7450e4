"""16.2: a small CNN built only from gpulib kernels: conv → ReLU → max pool → FC → softmax.

    X [N, 1, 8, 8] ─conv 3x3, pad 1→ [N, K, 8, 8] ─ReLU→ ─max pool 2→ [N, K, 4, 4]
      ─flatten→ [N, 16K] ─FC→ Z [N, 10] ─softmax cross-entropy→ loss

The backward pass runs the same chain in reverse (the chapter's figure 16.1): softmax's
gradient, the FC layer's dX = dZ W and dW, max pooling routes each gradient to its window's
maximum, ReLU masks it, and the convolution gives dW (and would give dX to a layer below).
"""

from __future__ import annotations

import contextlib

import numpy as np

from gpulib import reference as ref
from gpulib.arrays import (
    require,
    require_finite,
    require_int,
    require_int_labels,
    require_learning_rate,
    require_real,
    to_device,
    to_host,
)
from gpulib.cnn import layers
from gpulib.conv import front
from gpulib.mlp import layers as mlp
from gpulib.shapes import require_shape


def images_on_device(X, image_shape):
    """X as a device batch [N, C, H, W] of images of ``image_shape`` (C, H, W): flattened rows (as
    gpulib.data gives them) are reshaped; any other shape, and a NaN or an infinity, is a ValueError
    before a launch."""
    image_shape = require_shape(image_shape, "image_shape", "[C, H, W]")
    if not (hasattr(X, "shape") and hasattr(X, "dtype")):
        raise ValueError(f"X must be a NumPy or device array of images [N, C, H, W], not {type(X).__name__}")
    if len(X.shape) == 2 and X.shape[1] == int(np.prod(image_shape)):
        X = X.reshape(X.shape[0], *image_shape)  # flattened rows, as gpulib.data gives them
    require(X, "X", 4, layout="[N, C, H, W]")
    if tuple(X.shape[1:]) != tuple(image_shape):
        raise ValueError(f"X holds images of shape {tuple(X.shape[1:])}, the CNN expects {tuple(image_shape)}")
    require_finite(X, "X", "would turn every output and gradient into NaN")
    return to_device(X)


def reference_params(params, X, count: int) -> list:
    """A reference network's ``count`` parameters as float64 arrays, checked against X's images: the
    FC layer (params[-2]) must take what the convolutions and the pooling leave of them."""
    if not isinstance(params, (list, tuple)) or len(params) != count:
        raise ValueError(f"params must be the model's {count} parameters (model.host_params()), not {params!r:.60}")
    params = [require_real(p, f"params[{i}]") for i, p in enumerate(params)]
    X = require_real(X, "X", "[N, C, H, W]")
    features = params[-4].shape[0] * (X.shape[2] // 2) * (X.shape[3] // 2)  # the last conv's K filters, pooled
    if params[-2].ndim != 2 or params[-2].shape[1] != features or params[0].shape[1] != X.shape[1]:
        raise ValueError(f"X's images {X.shape[1:]} do not fit params: the first conv takes {params[0].shape[1]} "
                         f"channels and the FC layer {params[-2].shape[-1]} features, these images give {features}")
    return params


def check_grads(grads, params, lr) -> None:
    """One float32 gradient of each parameter's shape, and a learning rate: ValueError otherwise."""
    require_learning_rate(lr)
    if not isinstance(grads, (list, tuple)) or len(grads) != len(params):
        raise ValueError(f"grads must be a list of {len(params)} arrays, one per parameter (as loss_and_grads "
                         f"returns them), not {type(grads).__name__}" + (f" of {len(grads)}" if isinstance(grads, (list, tuple))
                                                                          else ""))
    for i, (p, g) in enumerate(zip(params, grads)):
        require(g, f"grads[{i}]", None)
        if tuple(g.shape) != tuple(p.shape):
            raise ValueError(f"grads[{i}] has shape {tuple(g.shape)} but its parameter (params[{i}]) has {tuple(p.shape)}")


def check_model_shape(image_shape, classes, seed) -> tuple:
    """A CNN's image shape (C, H, W; H and W even for the 2x2 pooling), classes (at least 2) and seed."""
    C, H, W = require_shape(image_shape, "image_shape", "[C, H, W]")
    if H % 2 or W % 2:
        raise ValueError(f"image_shape: image height and width must be even for the 2x2 pooling, not {H}x{W}")
    return (C, H, W), require_int(classes, "classes", 2), require_int(seed, "seed", 0)


class _NoProfiler:
    def op(self, name):
        return contextlib.nullcontext()


NO_PROFILER = _NoProfiler()  # what a model's ``profiler`` is when nothing is measured


class ImageClassifier:
    """What every CNN of the book shares: parameters on the device (``params``), images checked
    and put on the device, an SGD step, predictions and accuracy. A model sets ``params``,
    ``image_shape`` and ``classes`` and defines ``_forward(X)`` on a checked device batch (a dict
    with "logits"); every public method checks X once, then calls it."""

    profiler = NO_PROFILER  # 16.6's Profiler, when one is measuring

    def host_params(self):
        """The parameters copied to NumPy, in the order of ``params``."""
        return [p.copy_to_host() for p in self.params]

    def _images(self, X):
        return images_on_device(X, self.image_shape)

    def forward(self, X):
        """Every intermediate tensor of the forward pass by name (X checked first: its shape, NaN)."""
        return self._forward(self._images(X))

    def step(self, grads, lr: float) -> None:
        """One SGD step: every parameter minus ``lr`` times its gradient, on the device (all of them
        checked before the first is updated)."""
        check_grads(grads, self.params, lr)
        with self.profiler.op("SGD update"):
            for p, g in zip(self.params, grads):
                mlp.sgd_update(p, g, lr)

    def predict(self, X) -> np.ndarray:
        return self._classes(self.forward(X))

    def accuracy(self, X, labels) -> float:
        """The share of rows of X whose predicted class is their label (labels: [N] integers)."""
        X = self._images(X)
        require_int_labels(labels, "labels", X.shape[0], self.classes, dtype=None)
        return float((self._classes(self._forward(X)) == to_host(labels)).mean())

    @staticmethod
    def _classes(tensors) -> np.ndarray:
        return tensors["logits"].copy_to_host().argmax(axis=1).astype(np.int32)


class SmallCNN(ImageClassifier):
    """One convolution layer of ``channels`` 3x3 filters, then a fully connected layer."""

    def __init__(self, image_shape=(1, 8, 8), channels: int = 8, classes: int = 10, seed: int = 0,
                 conv_algorithm: str = "direct"):
        """``conv_algorithm``: how the convolution runs, a name of gpulib.conv.algorithms.ALGORITHMS
        ("direct" of 16.3, 16.4's "gemm", "implicit_gemm", "implicit_precomp_gemm", 16.5's
        "fft", "winograd", ...) or "auto" (the auto-tuner's pick for each batch shape)."""
        if conv_algorithm not in front.CHOICES:
            raise ValueError(f"unknown conv_algorithm {conv_algorithm!r}; choose one of "
                             f"{front.CHOICES}")
        self.conv_algorithm = conv_algorithm
        (C, H, W), classes, seed = check_model_shape(image_shape, classes, seed)
        channels = require_int(channels, "channels", 1)
        rng = np.random.default_rng(seed)
        self.image_shape = (C, H, W)
        self.conv_W = rng.normal(0, np.sqrt(2 / (C * 9)), (channels, C, 3, 3)).astype(np.float32)
        self.conv_b = np.zeros(channels, np.float32)
        features = channels * (H // 2) * (W // 2)
        self.fc_W = rng.normal(0, np.sqrt(1 / features), (classes, features)).astype(np.float32)
        self.fc_b = np.zeros(classes, np.float32)
        self.classes = classes
        self.params = [to_device(p) for p in (self.conv_W, self.conv_b, self.fc_W, self.fc_b)]

    def _forward(self, X):
        """Every intermediate tensor, named as in the chapter's figure."""
        cW, cb, fW, fb = self.params
        conv = layers.conv2d_forward(X, cW, cb, padding=1, algorithm=self.conv_algorithm)
        act = layers.relu(conv)
        pooled, argmax = layers.max_pool2d(act, 2)
        flat = pooled.reshape(pooled.shape[0], pooled.size // pooled.shape[0])
        logits = mlp.dense_forward(flat, fW, fb, "identity")
        return dict(X=X, conv=conv, relu=act, pool=pooled, argmax=argmax, flat=flat, logits=logits)

    def loss_and_grads(self, X, labels):
        """Mean loss and [dW_conv, db_conv, dW_fc, db_fc], by backpropagation through the chain."""
        X = self._images(X)  # inputs and labels are checked before anything is launched
        require_int_labels(labels, "labels", X.shape[0], self.fc_W.shape[0])
        t = self._forward(X)
        labels = to_device(labels)
        P, loss = mlp.softmax_cross_entropy(t["logits"], labels)
        dZ = mlp.softmax_cross_entropy_backward(P, labels)
        fW = self.params[2]
        d_flat, d_fW, d_fb = mlp.dense_backward(t["flat"], fW, t["logits"], dZ, "identity")
        d_pool = d_flat.reshape(*t["pool"].shape)
        d_relu = layers.max_pool2d_backward(d_pool, t["argmax"], t["relu"].shape, 2)
        d_conv = layers.relu_backward(t["relu"], d_relu)
        _, d_cW, d_cb = layers.conv2d_backward(t["X"], self.params[0], d_conv, padding=1, need_dX=False,
                                          algorithm=self.conv_algorithm)
        return float(loss.copy_to_host().mean(dtype=np.float64)), [d_cW, d_cb, d_fW, d_fb]



def reference_loss(params, X, labels) -> float:
    """The same network in float64 NumPy (for finite-difference checks)."""
    cW, cb, fW, fb = reference_params(params, X, 4)
    act = np.maximum(ref.conv2d(X, cW, cb, padding=1), 0.0)
    pooled = ref.max_pool2d(act, 2)
    logits = pooled.reshape(len(X), -1) @ np.asarray(fW, np.float64).T + fb
    return float(ref.softmax_cross_entropy(logits, labels)[0].mean())
