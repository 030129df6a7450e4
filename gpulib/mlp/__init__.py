"""16.1 (perceptron, MLP, gradient descent, backpropagation) as Numba CUDA kernels.

    kernels.py  the @cuda.jit kernels, one thread per output element
    layers.py   wrappers that check inputs and launch them
    model.py    MLP: forward, backpropagation, SGD step
    train.py    mini-batch training with a progress bar and a history
    widget.py   the learning-rate explorer of the notebook
"""

from gpulib.mlp.layers import (
    dense_backward,
    dense_forward,
    layer_forward,
    sgd_update,
    softmax_cross_entropy,
    softmax_cross_entropy_backward,
)
from gpulib.mlp.model import MLP
from gpulib.mlp.train import History, train

__all__ = [
    "MLP",
    "History",
    "dense_backward",
    "dense_forward",
    "layer_forward",
    "sgd_update",
    "softmax_cross_entropy",
    "softmax_cross_entropy_backward",
    "train",
]
