"""16.1 (perceptron, MLP, gradient descent, backpropagation) as Numba CUDA kernels, their
wrappers, the MLP and its training loop; the names a notebook needs, re-exported.
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
