"""16.2: the CNN's building blocks as Numba CUDA kernels, forward and backward, their wrappers, and
the models built from them (SmallCNN; 16.6's BookCNN); the layer functions, re-exported.
"""

from gpulib.cnn.layers import (
    avg_pool2d,
    avg_pool2d_backward,
    conv2d_backward,
    conv2d_forward,
    max_pool2d,
    max_pool2d_backward,
    relu,
    relu_backward,
)

__all__ = [
    "avg_pool2d",
    "avg_pool2d_backward",
    "conv2d_backward",
    "conv2d_forward",
    "max_pool2d",
    "max_pool2d_backward",
    "relu",
    "relu_backward",
]
