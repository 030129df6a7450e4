"""16.5: an auto-tuner in the manner of cudnnFindConvolutionForwardAlgorithm.

For one layer it runs every algorithm of the registry (gpulib/conv/algorithms.py) that
supports the layer on the given inputs, checks each output against the float64 reference (an
algorithm that fails is never chosen), times the ones that passed (CUDA events, median; on
the simulator nothing is timed), and returns them ranked with the extra memory each needs.
``choose`` caches the winner per layer shape, as ``torch.backends.cudnn.benchmark = True``
does; ``gpulib.conv.algorithms.conv2d(..., algorithm="auto")`` and the CNN layer use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpulib import reference as ref
from gpulib.arrays import require_finite, require_positive, to_device, to_host
from gpulib.check import ValidationError, poisoned, validate
from gpulib.conv.algorithms import ALGORITHMS, Algorithm, of_precision
from gpulib.env import BACKEND, cuda
from gpulib.shapes import bias_or_zeros, check_conv_inputs, layer_shapes, output_shape
from gpulib.timing import benchmark


@dataclass
class Result:
    """One algorithm's outcome: ``status`` is "ok", "failed check" or "not supported"."""

    name: str  # the registry's name
    cudnn: str
    status: str
    ms: float | None = None
    rel_err: float | None = None
    workspace_bytes: int = 0
    note: str = ""

    @property
    def label(self) -> str:
        """How a table prints it (the registry's label; the name itself if it is not there)."""
        return ALGORITHMS[self.name].label if self.name in ALGORITHMS else self.name


def _default_timer(fn, label):
    t = benchmark(fn, repeat=10, label=label)
    return t.median_ms if t.valid else None


def find_algorithms(X, W, b=None, padding: int = 0, stride: int = 1, algorithms=None, timer=None,
                    reference=None, scale=None) -> list[Result]:
    """Check, time and rank every algorithm for this layer: fastest correct one first.

    ``algorithms`` defaults to the registry's fp32 ones. ``timer(fn, label)`` returns
    milliseconds or None (the default times with CUDA events on a GPU and returns None on the
    simulator); ``reference`` may hold the float64 Y already, and ``scale`` the size of the
    summed terms (``reference.conv2d_magnitude``), for large layers.
    """
    check_conv_inputs(X, W, b, padding, stride)
    algorithms = of_precision("fp32") if algorithms is None else _algorithms(algorithms)
    if timer is not None and not callable(timer):
        raise ValueError(f"timer must be a function timer(fn, label) -> ms or None, not {type(timer).__name__}")
    timer = timer or _default_timer
    for name, a in (("X", X), ("W", W)) + ((("b", b),) if b is not None else ()):
        require_finite(a, name, "would make every algorithm's check meaningless and could rule out FFT and "
                       "Winograd for this layer shape: tune on finite data")
    X, W = to_host(X).astype(np.float32), to_host(W).astype(np.float32)
    b = to_host(bias_or_zeros(b, W.shape[0])).astype(np.float32)
    if reference is None:
        want = ref.conv2d(X, W, b, padding, stride)
    else:
        want = np.asarray(reference, np.float64) if hasattr(reference, "shape") else None
        if want is None or want.shape != output_shape(X.shape, W.shape, padding, stride):
            raise ValueError(f"reference must be the float64 Y of this layer, of shape "
                             f"{output_shape(X.shape, W.shape, padding, stride)}, not {type(reference).__name__} "
                             f"{getattr(reference, 'shape', '')}")
    if scale is not None:
        require_positive(scale, "scale", note=" (the size of the summed terms)")
    if scale is None:  # the size of the summed terms, over the outputs that are finite
        magnitude = ref.conv2d_magnitude(X, W, b, padding, stride)
        scale = float(np.max(magnitude[np.isfinite(magnitude)], initial=0.0)) or 1.0
    X_dev, W_dev, b_dev = (to_device(a) for a in (X, W, b))  # device copies, made once
    results = []
    for alg in algorithms:
        result = Result(alg.name, alg.cudnn, "not supported")
        reason = alg.supports(W.shape, stride)
        if reason:
            result.note = reason
            results.append(result)
            continue
        result.workspace_bytes = int(alg.workspace(X.shape, W.shape, padding, stride))
        out = poisoned(want.shape)
        try:
            alg.run(X_dev, W_dev, b_dev, padding, stride, out=out)
        except ValueError as err:  # the inputs passed the checks above: the algorithm refuses them
            result.note = str(err).splitlines()[0]
            results.append(result)
            continue
        try:
            result.rel_err = validate(out, want, scale=4 * scale, name=alg.name).rel_err
        except ValidationError as err:
            result.status, result.note = "failed check", str(err).splitlines()[0]
            results.append(result)
            continue
        result.status = "ok"
        Y = cuda.device_array(want.shape, np.float32)
        result.ms = timer(lambda alg=alg: alg.run(X_dev, W_dev, b_dev, padding, stride, out=Y), alg.name)
        results.append(result)
    order = {"ok": 0, "failed check": 1, "not supported": 2}
    return sorted(results, key=lambda r: (order[r.status], r.ms is None, r.ms or 0.0))


def _algorithms(algorithms) -> list:
    """Registry entries from a list of them or of their names (gpulib's, not cuDNN's)."""
    if isinstance(algorithms, (str, bytes)) or not isinstance(algorithms, (list, tuple)) or not algorithms:
        raise ValueError(f"algorithms must be a non-empty list of names of gpulib.conv.algorithms.ALGORITHMS "
                         f"(or their entries), not {algorithms!r}")
    out = []
    for a in algorithms:
        if isinstance(a, str) and a in ALGORITHMS:
            out.append(ALGORITHMS[a])
        elif isinstance(a, Algorithm):
            out.append(a)
        else:
            cudnn = [name for name, alg in ALGORITHMS.items() if isinstance(a, str) and alg.cudnn == a]
            hint = f" (cuDNN's name for {cudnn[0]!r})" if cudnn else ""
            raise ValueError(f"algorithms: {a!r}{hint} is not one of {tuple(ALGORITHMS)}")
    return out


_cache: dict = {}  # layer shape -> the whole ranking; its first entry is the pick (tuned on finite data only)


def _key(X_shape, W_shape, padding, stride):
    return (tuple(X_shape), tuple(W_shape), padding, stride, BACKEND)


def choose(X, W, b=None, padding: int = 0, stride: int = 1, timer=None) -> Result:
    """The fastest correct algorithm for this layer shape, found once (on finite X and W: ValueError
    otherwise, before any launch) and then cached."""
    check_conv_inputs(X, W, b, padding, stride)
    key = _key(X.shape, W.shape, padding, stride)
    if key not in _cache:
        ranking = find_algorithms(X, W, b, padding, stride, timer=timer)
        if ranking[0].status != "ok":
            raise RuntimeError("no algorithm passed its check for this layer")
        _cache[key] = ranking
    return _cache[key][0]


@layer_shapes
def cached_ranking(X_shape, W_shape, padding: int = 0, stride: int = 1) -> list[Result] | None:
    """The ranking ``choose`` found for this layer shape, or None if it has not tuned it yet."""
    return _cache.get(_key(X_shape, W_shape, padding, stride))


def table(results: list[Result]) -> str:
    """The ranking as text."""
    if not isinstance(results, (list, tuple)) or not all(isinstance(r, Result) for r in results):
        raise ValueError(f"results must be a list of autotune.Result (what find_algorithms returns), not {results!r:.80}")
    lines = [f"{'rank':>4} {'algorithm':<22} {'cuDNN name':<24} {'status':<14} {'ms':>8} {'extra MB':>9} {'rel err':>8}"]
    for i, r in enumerate(results, 1):
        ms = "-" if r.ms is None else f"{r.ms:.3f}"
        err = "-" if r.rel_err is None else f"{r.rel_err:.1e}"
        lines.append(f"{i:>4} {r.label:<22} {r.cudnn:<24} {r.status:<14} {ms:>8} {r.workspace_bytes / 1e6:9.2f} {err:>8}"
                     + (f"  ({r.note})" if r.note and r.status != "ok" else ""))
    return "\n".join(lines)
