"""16.2: the CNN's building blocks as Numba CUDA kernels, forward and backward.

    kernels.py  convolution backward (dX, dW, db), ReLU, max and average pooling
    layers.py   wrappers that check inputs and launch them (the forward convolution is
                gpulib/conv/direct.py; fully connected layers and softmax are gpulib/mlp)
    anatomy.py  the convolution's rules in NumPy: receptive field, the sum over channels,
                1x1 as a matrix product, dX as a transposed convolution, NCHW and NHWC strides
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
