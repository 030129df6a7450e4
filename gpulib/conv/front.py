"""16.4-16.5: the front door to the convolution algorithms: a name of the registry, or "auto", to a run.

    Y = conv2d(X, W, b, padding, stride, algorithm="auto")   # the auto-tuner's pick
    entry = get("gemm")                                     # the registry's entry

What must stay true: layers and models reach the algorithms through this module only; the
registry (algorithms.py) imports every algorithm and nothing above them, the auto-tuner
(autotune.py) reads the registry, and this module reads both.
"""

from __future__ import annotations

from gpulib.conv import autotune
from gpulib.conv.algorithms import ALGORITHMS, NAMES, Algorithm
from gpulib.shapes import check_conv_inputs

CHOICES = NAMES + ("auto",)


def require_choice(algorithm, name: str = "algorithm") -> str:
    """``algorithm`` if it names an entry of the registry or "auto"; else ValueError."""
    if not isinstance(algorithm, str) or algorithm not in CHOICES:
        raise ValueError(f"{name} must be one of {CHOICES}, not {algorithm!r}")
    return algorithm


def get(algorithm: str, X=None, W=None, b=None, padding: int = 0, stride: int = 1) -> Algorithm:
    """The registry's entry for ``algorithm``; "auto" asks the auto-tuner (which needs the layer)."""
    require_choice(algorithm)
    if algorithm == "auto":
        return ALGORITHMS[autotune.choose(X, W, b, padding, stride).name]
    return ALGORITHMS[algorithm]


def conv2d(X, W, b=None, padding: int = 0, stride: int = 1, *, algorithm: str = "direct", out=None):
    """Y = conv(X, W) + b by ``algorithm`` (a name of the registry or "auto"); Y on the device."""
    require_choice(algorithm)
    check_conv_inputs(X, W, b, padding, stride)
    alg = get(algorithm, X, W, b, padding, stride)
    reason = alg.supports(tuple(W.shape), stride)
    if reason:
        raise ValueError(f"algorithm {alg.name!r} cannot run this layer: {reason}")
    return alg.run(X, W, b, padding, stride, out=out)
