"""16.3-16.5: the shape rules every convolution shares, in one place.

    conv_output_size   H' = ⌊(H + 2·padding - R) / stride⌋ + 1
    output_shape       Y's shape [N, K, H', W'] from the shapes of X and W
    check_conv_inputs  X [N, C, H, W], W [K, C, R, S], b [K] (or None), padding, stride checked
                       before any launch; returns Y's shape [N, K, H', W']
    bias_or_zeros      the bias on the device, or K zeros when there is none

Every convolution of gpulib (direct, im2col, implicit GEMM, Winograd, FFT, tensor cores) takes
``(X, W, b=None, padding=0, stride=1, *, out=None, ...)`` and calls ``check_conv_inputs`` first.
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import require, require_int, to_device


def conv_output_size(size: int, filter_size: int, padding: int, stride: int) -> int:
    """H' = (H + 2·padding - R) // stride + 1 (the chapter's H - R + 1 for padding 0, stride 1)."""
    return (size + 2 * padding - filter_size) // stride + 1


def output_shape(X_shape, W_shape, padding: int, stride: int) -> tuple[int, int, int, int]:
    """Y's shape (N, K, H', W') for X of shape [N, C, H, W] and W of shape [K, C, R, S]."""
    N, _, H, Wd = X_shape
    K, _, R, S = W_shape
    return (N, K, conv_output_size(H, R, padding, stride), conv_output_size(Wd, S, padding, stride))


def check_conv_inputs(X, W, b, padding: int, stride: int) -> tuple[int, int, int, int]:
    """Validate a convolution's arguments; return the output shape (N, K, H', W').

    Raises ValueError naming the argument, what it got and what it needs."""
    require(X, "X", 4, layout="[N, C, H, W]")
    require(W, "W", 4, layout="[K, C, R, S]")
    if b is not None:
        require(b, "b", 1, layout="[K]")
    require_int(padding, "padding", 0)
    require_int(stride, "stride", 1)
    N, C, H, Wd = X.shape
    K, C_w, R, S = W.shape
    if C_w != C:
        raise ValueError(f"channel mismatch: X has C={C} channels but W expects {C_w} (W is [K, C, R, S])")
    if b is not None and b.shape[0] != K:
        raise ValueError(f"b has {b.shape[0]} entries but W has K={K} filters")
    if R > H + 2 * padding or S > Wd + 2 * padding:
        raise ValueError(
            f"the {R}x{S} filter is larger than the padded {H + 2 * padding}x{Wd + 2 * padding} image "
            f"({H}x{Wd} with padding {padding})"
        )
    return output_shape(X.shape, W.shape, padding, stride)


def bias_or_zeros(b, K: int):
    """``b`` on the device, or K zeros: every kernel adds a bias, so "no bias" is a zero one."""
    return to_device(np.zeros(K, np.float32) if b is None else b)
