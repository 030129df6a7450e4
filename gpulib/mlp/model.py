"""16.1: an MLP whose forward pass, backpropagation and update all run as gpulib kernels."""

from __future__ import annotations

import numpy as np

from gpulib.arrays import require, require_finite, require_int, require_int_labels, require_learning_rate, to_device, to_host
from gpulib.mlp import layers


class MLP:
    """Dense layers of ``sizes`` (e.g. [64, 32, 10]); hidden layers use ``activation``.

    The last layer has no activation: it returns logits, and softmax cross-entropy turns
    them into a loss. Weights start from N(0, 2/n_in) (He) for ReLU and N(0, 1/n_in)
    otherwise, biases from zero; the parameters live on the device as float32.
    """

    def __init__(self, sizes, activation: str = "relu", seed: int = 0):
        if (not isinstance(sizes, (list, tuple)) or len(sizes) < 2
                or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sizes)):
            raise ValueError(f"sizes must list at least two positive layer widths (integers), not {sizes!r}")
        layers.activation_code(activation)
        seed = require_int(seed, "seed", 0)
        self.sizes = [int(s) for s in sizes]
        self.activation = activation
        rng = np.random.default_rng(seed)
        gain = 2.0 if activation == "relu" else 1.0
        self.params = []
        for n_in, n_out in zip(self.sizes[:-1], self.sizes[1:]):
            W = rng.normal(0.0, np.sqrt(gain / n_in), size=(n_out, n_in)).astype(np.float32)
            b = np.zeros(n_out, dtype=np.float32)
            self.params.append((to_device(W), to_device(b)))

    @classmethod
    def from_params(cls, params, activation: str = "relu") -> "MLP":
        """An MLP holding copies of the given [(W, b), ...] (NumPy float32 arrays)."""
        if not isinstance(params, (list, tuple)) or not params:
            raise ValueError(f"params must be a list of at least one (W, b) pair, not {params!r:.60}")
        for layer, (W, b) in enumerate(params):  # every layer checked before anything is copied
            require(W, f"params[{layer}].W", 2, layout="[n_out, n_in]")
            require(b, f"params[{layer}].b", 1, layout="[n_out]")
            if b.shape[0] != W.shape[0]:
                raise ValueError(f"params[{layer}].b has {b.shape[0]} entries but params[{layer}].W has "
                                 f"{W.shape[0]} rows")
            if layer and W.shape[1] != params[layer - 1][0].shape[0]:
                raise ValueError(f"the layers do not chain: params[{layer}].W takes {W.shape[1]} inputs but "
                                 f"params[{layer - 1}].W gives {params[layer - 1][0].shape[0]} outputs")
        sizes = [params[0][0].shape[1]] + [W.shape[0] for W, _ in params]
        model = cls(sizes, activation)
        for layer, (W, b) in enumerate(params):
            model.params[layer] = (to_device(np.array(W)), to_device(np.array(b)))
        return model

    def host_params(self):
        """The parameters copied to NumPy: [(W, b), ...]."""
        return [(W.copy_to_host(), b.copy_to_host()) for W, b in self.params]

    def _layer_activation(self, layer: int) -> str:
        return "identity" if layer == len(self.params) - 1 else self.activation

    def _check_input(self, X) -> None:
        require(X, "X", 2, layout="[N, n_in]")
        if X.shape[1] != self.sizes[0]:
            raise ValueError(f"X has {X.shape[1]} features but the MLP expects {self.sizes[0]}")
        require_finite(X, "X", "would turn every output and gradient into NaN")

    def forward(self, X):
        """Every layer's output on the device: [X, H1, ..., Z] (Z are the logits)."""
        self._check_input(X)
        return self._forward(X)

    def _forward(self, X):
        outs = [to_device(X)]
        for layer, (W, b) in enumerate(self.params):
            outs.append(layers.dense_forward(outs[-1], W, b, self._layer_activation(layer)))
        return outs

    def loss_and_grads(self, X, labels):
        """Mean loss and [(dW, db), ...] by backpropagation: the forward pass, then layers in reverse."""
        self._check_input(X)  # inputs and labels are checked before anything is launched
        require_int_labels(labels, "labels", X.shape[0], self.sizes[-1])
        outs = self._forward(X)
        labels = to_device(labels)
        P, loss = layers.softmax_cross_entropy(outs[-1], labels)
        dH = layers.softmax_cross_entropy_backward(P, labels)
        grads = [None] * len(self.params)
        for layer in reversed(range(len(self.params))):
            W, _ = self.params[layer]
            dX, dW, db = layers.dense_backward(
                outs[layer], W, outs[layer + 1], dH, self._layer_activation(layer),
                need_dX=layer > 0,
            )
            grads[layer] = (dW, db)
            dH = dX
        return float(loss.copy_to_host().mean(dtype=np.float64)), grads

    def step(self, grads, lr: float) -> None:
        """One gradient-descent update of every parameter: θ ← θ - η ∇θ (all checked first)."""
        require_learning_rate(lr)
        if not isinstance(grads, (list, tuple)) or len(grads) != len(self.params):
            raise ValueError(f"grads must be a list of {len(self.params)} (dW, db) pairs, one per layer (as "
                             f"loss_and_grads returns them), not {grads!r:.60}")
        for layer, ((W, b), pair) in enumerate(zip(self.params, grads)):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"grads[{layer}] must be a (dW, db) pair, not {type(pair).__name__}")
            for name, p, g in (("dW", W, pair[0]), ("db", b, pair[1])):
                require(g, f"grads[{layer}].{name}", None)
                if tuple(g.shape) != tuple(p.shape):
                    raise ValueError(f"grads[{layer}].{name} has shape {tuple(g.shape)}, its parameter {tuple(p.shape)}")
        for (W, b), (dW, db) in zip(self.params, grads):
            layers.sgd_update(W, dW, lr)
            layers.sgd_update(b, db, lr)

    def predict(self, X) -> np.ndarray:
        """The most probable class of every row of X (a NumPy array of labels)."""
        return self._classes(self.forward(X))

    def accuracy(self, X, labels) -> float:
        """The share of rows of X whose predicted class is their label (labels: [N] integers)."""
        self._check_input(X)
        require_int_labels(labels, "labels", X.shape[0], self.sizes[-1], dtype=None)
        return float((self._classes(self._forward(X)) == to_host(labels)).mean())

    @staticmethod
    def _classes(outs) -> np.ndarray:
        return outs[-1].copy_to_host().argmax(axis=1).astype(np.int32)
