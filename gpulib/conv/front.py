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


LAYOUTS = ("NCHW", "NHWC")


def conv2d(X, W, b=None, padding: int = 0, stride: int = 1, *, algorithm: str = "direct", out=None,
           layout: str = "NCHW"):
    """Y = conv(X, W) + b by ``algorithm`` (a name of the registry or "auto"); Y on the device.

    ``layout="NCHW"``: X [N, C, H, W], W [K, C, R, S], Y [N, K, H', W'], float32. ``layout="NHWC"``:
    a channels-last fp16 model's operands as they are, X [N, H, W, C] and the filters Wk [K, R, S, C]
    fp16 on the device (gpulib.conv.tensorcore.image_nhwc16 and filters_krsc16 make them), Y
    [N, H', W', K] float32; nothing is converted on the way. Only algorithms with such a form
    (the registry's ``run_nhwc16``) take it, named: "auto" compares NCHW calls."""
    require_choice(algorithm)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if layout == "NHWC":
        forms = tuple(a.name for a in ALGORITHMS.values() if a.run_nhwc16 is not None)
        if algorithm not in forms:
            raise ValueError(f"layout='NHWC' needs an algorithm with an NHWC fp16 form, one of {forms}, not {algorithm!r}")
        return ALGORITHMS[algorithm].run_nhwc16(X, W, b, padding, stride, out=out)
    check_conv_inputs(X, W, b, padding, stride)
    alg = get(algorithm, X, W, b, padding, stride)
    reason = alg.supports(tuple(W.shape), stride)
    if reason:
        raise ValueError(f"algorithm {alg.name!r} cannot run this layer: {reason}")
    return alg.run(X, W, b, padding, stride, out=out)
