"""16.3-16.5: the shape rules every convolution shares, in one place.

    conv_output_size   H' = ⌊(H + 2·padding - R) / stride⌋ + 1
    output_shape       Y's shape [N, K, H', W'] from the shapes of X and W
    check_conv_inputs  X [N, C, H, W], W [K, C, R, S], b [K] (or None), padding, stride checked
                       before any launch; returns Y's shape [N, K, H', W']
    bias_or_zeros      the bias on the device, or K zeros when there is none
    layer_shapes       decorator: a function of (X_shape, W_shape, padding, stride, ...) gets them
                       checked first (workspace sizes, multiplication counts, cached rankings)
    filter_shape       decorator: the same for (W_shape, stride, ...) (what an algorithm supports)

Every convolution of gpulib (direct, im2col, implicit GEMM, Winograd, FFT, tensor cores) takes
``(X, W, b=None, padding=0, stride=1, *, out=None, ...)`` and calls ``check_conv_inputs`` first.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from gpulib.arrays import require, require_bool, require_int, to_device


def conv_output_size(size: int, filter_size: int, padding: int, stride: int) -> int:
    """H' = (H + 2·padding - R) // stride + 1 (the chapter's H - R + 1 for padding 0, stride 1)."""
    size, filter_size = require_int(size, "size", 1), require_int(filter_size, "filter_size", 1)
    padding, stride = require_int(padding, "padding", 0), require_int(stride, "stride", 1)
    if filter_size > size + 2 * padding:
        raise ValueError(f"filter_size {filter_size} is larger than the padded size {size + 2 * padding}")
    return (size + 2 * padding - filter_size) // stride + 1


def require_shape(shape, name: str, layout: str = "[N, C, H, W]") -> tuple[int, ...]:
    """A shape: as many positive integers as ``layout`` names; returned as a tuple of ints."""
    sizes = layout.strip("[]").split(", ")
    if not isinstance(shape, (tuple, list)) or len(shape) != len(sizes):
        raise ValueError(f"{name} must be {len(sizes)} positive integers {layout}, not {shape!r}")
    for size, value in zip(sizes, shape):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be {len(sizes)} positive integers {layout}, but {size} is {value!r}")
    return tuple(int(v) for v in shape)


def output_shape(X_shape, W_shape, padding: int, stride: int) -> tuple[int, int, int, int]:
    """Y's shape (N, K, H', W') for X of shape [N, C, H, W] and W of shape [K, C, R, S] (checked:
    ValueError naming what does not fit)."""
    N, C, H, Wd = require_shape(X_shape, "X_shape", "[N, C, H, W]")
    K, C_w, R, S = require_shape(W_shape, "W_shape", "[K, C, R, S]")
    padding, stride = require_int(padding, "padding", 0), require_int(stride, "stride", 1)
    if C_w != C:
        raise ValueError(f"channel mismatch: X_shape has C={C} channels but W_shape expects {C_w}")
    if R > H + 2 * padding or S > Wd + 2 * padding:
        raise ValueError(f"the {R}x{S} filter of W_shape is larger than the padded {H + 2 * padding}x"
                         f"{Wd + 2 * padding} image of X_shape")
    return (N, K, (H + 2 * padding - R) // stride + 1, (Wd + 2 * padding - S) // stride + 1)


def layer_shapes(fn):
    """``fn(X_shape, W_shape, padding=0, stride=1, ...)`` with its four arguments checked first
    (``output_shape``'s ValueErrors), then passed on as tuples of ints."""
    flags = list(inspect.signature(fn).parameters)[4:]  # what follows stride: True/False switches

    @functools.wraps(fn)
    def checked(X_shape, W_shape, padding=0, stride=1, *args, **kwargs):
        output_shape(X_shape, W_shape, padding, stride)
        for name, extra in zip(flags, args):
            require_bool(extra, name)
        return fn(tuple(int(v) for v in X_shape), tuple(int(v) for v in W_shape), int(padding), int(stride), *args, **kwargs)
    return checked


def filter_shape(fn):
    """``fn(W_shape, stride=1, ...)`` with W_shape [K, C, R, S] and stride checked first."""
    @functools.wraps(fn)
    def checked(W_shape, stride=1, *args, **kwargs):
        W_shape = require_shape(W_shape, "W_shape", "[K, C, R, S]")
        return fn(W_shape, require_int(stride, "stride", 1), *args, **kwargs)
    return checked


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
