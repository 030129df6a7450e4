"""16.5: an auto-tuner in the manner of cudnnFindConvolutionForwardAlgorithm.

For one layer it runs every gpulib algorithm that supports the layer on the given inputs,
checks each output against the float64 reference (an algorithm that fails is never chosen),
times the ones that passed (CUDA events, median; on the simulator nothing is timed), and
returns them ranked with the extra memory each needs. ``choose`` caches the winner per layer
shape, as ``torch.backends.cudnn.benchmark = True`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import gpulib
from gpulib import reference as ref
from gpulib.check import ValidationError
from gpulib.conv import fft, im2col, implicit_gemm, winograd
from gpulib.conv.direct import conv2d


@dataclass(frozen=True)
class Algorithm:
    """A way to compute Y = conv(X, W) + b, with the cuDNN algorithm it corresponds to."""

    name: str
    cudnn: str
    run: Callable  # run(X, W, b, padding, stride, out) -> Y
    supports: Callable  # supports(W_shape, stride) -> "" or the reason it cannot
    workspace: Callable  # workspace(X_shape, W_shape, padding, stride) -> extra bytes


def _always(W_shape, stride):
    return ""


def _winograd_only(W_shape, stride):
    return "" if tuple(W_shape[2:]) == (3, 3) and stride == 1 else "Winograd F(2x2,3x3) needs 3x3, stride 1"


def _x_col_bytes(X_shape, W_shape, padding, stride):
    N, C, H, W = X_shape
    K, _, R, S = W_shape
    Ho, Wo = ref.conv_output_size(H, R, padding, stride), ref.conv_output_size(W, S, padding, stride)
    return 4 * (C * R * S * N * Ho * Wo + K * N * Ho * Wo)  # X_col and Y_mat


ALGORITHMS = [
    Algorithm("direct v2", "(none: a direct kernel)",
              lambda X, W, b, p, s, out: conv2d(X, W, b, p, s, "v2", out=out), _always, lambda *a: 0),
    Algorithm("implicit GEMM", "IMPLICIT_GEMM",
              lambda X, W, b, p, s, out: implicit_gemm.conv2d_implicit_gemm(X, W, b, p, s, False, out=out),
              _always, lambda *a: 0),
    Algorithm("implicit precomp GEMM", "IMPLICIT_PRECOMP_GEMM",
              lambda X, W, b, p, s, out: implicit_gemm.conv2d_implicit_gemm(X, W, b, p, s, True, out=out),
              _always, lambda X, W, p, s: 12 * W[1] * W[2] * W[3]),
    Algorithm("im2col + GEMM", "GEMM",
              lambda X, W, b, p, s, out: im2col.conv2d_im2col(X, W, b, p, s, out=out), _always, _x_col_bytes),
    Algorithm("FFT", "FFT", lambda X, W, b, p, s, out: fft.conv2d_fft(X, W, b, p, s, out=out), _always,
              lambda X, W, p, s: fft.workspace_bytes(X[0], X[1], X[2], X[3], W[0], p)),
    Algorithm("Winograd (fused)", "WINOGRAD",
              lambda X, W, b, p, s, out: winograd.conv2d_winograd(X, W, b, p, s, True, out=out), _winograd_only,
              lambda X, W, p, s: winograd.workspace_bytes(X[0], X[1], X[2], X[3], W[0], p, True)),
    Algorithm("Winograd (non-fused)", "WINOGRAD_NONFUSED",
              lambda X, W, b, p, s, out: winograd.conv2d_winograd(X, W, b, p, s, False, out=out), _winograd_only,
              lambda X, W, p, s: winograd.workspace_bytes(X[0], X[1], X[2], X[3], W[0], p, False)),
]


@dataclass
class Result:
    """One algorithm's outcome: ``status`` is "ok", "failed check" or "not supported"."""

    name: str
    cudnn: str
    status: str
    ms: float | None = None
    rel_err: float | None = None
    workspace_bytes: int = 0
    note: str = ""


def _default_timer(fn, label):
    t = gpulib.benchmark(fn, repeat=10, label=label)
    return t.median_ms if t.valid else None


def find_algorithms(X, W, b=None, padding: int = 0, stride: int = 1, algorithms=None, timer=None,
                    reference=None, scale=None) -> list[Result]:
    """Check, time and rank every algorithm for this layer: fastest correct one first.

    ``timer(fn, label)`` returns milliseconds or None (the default times with CUDA events on a
    GPU and returns None on the simulator); ``reference`` may hold the float64 Y already, and
    ``scale`` the size of the summed terms (``reference.conv2d_magnitude``), for large layers.
    """
    algorithms = ALGORITHMS if algorithms is None else algorithms
    timer = timer or _default_timer
    X, W = np.asarray(X, np.float32), np.asarray(W, np.float32)
    b = np.zeros(W.shape[0], np.float32) if b is None else np.asarray(b, np.float32)
    want = ref.conv2d(X, W, b, padding, stride) if reference is None else reference
    scale = ref.conv2d_magnitude(X, W, b, padding, stride).max() if scale is None else scale
    dX, dW, db = (gpulib.cuda.to_device(a) for a in (X, W, b))
    results = []
    for alg in algorithms:
        result = Result(alg.name, alg.cudnn, "not supported")
        reason = alg.supports(W.shape, stride)
        if reason:
            result.note = reason
            results.append(result)
            continue
        result.workspace_bytes = int(alg.workspace(X.shape, W.shape, padding, stride))
        out = gpulib.poisoned(want.shape)
        try:
            alg.run(dX, dW, db, padding, stride, out)
            result.rel_err = gpulib.validate(out, want, scale=4 * scale, name=alg.name).rel_err
        except ValidationError as err:
            result.status, result.note = "failed check", str(err).splitlines()[0]
            results.append(result)
            continue
        result.status = "ok"
        Y = gpulib.cuda.device_array(want.shape, np.float32)
        result.ms = timer(lambda alg=alg: alg.run(dX, dW, db, padding, stride, Y), alg.name)
        results.append(result)
    order = {"ok": 0, "failed check": 1, "not supported": 2}
    return sorted(results, key=lambda r: (order[r.status], r.ms is None, r.ms or 0.0))


_cache: dict = {}


def choose(X, W, b=None, padding: int = 0, stride: int = 1, timer=None) -> Result:
    """The fastest correct algorithm for this layer shape, found once and then cached."""
    key = (tuple(X.shape), tuple(W.shape), padding, stride, gpulib.BACKEND)
    if key not in _cache:
        ranking = find_algorithms(X, W, b, padding, stride, timer=timer)
        if ranking[0].status != "ok":
            raise RuntimeError("no algorithm passed its check for this layer")
        _cache[key] = ranking[0]
    return _cache[key]


def table(results: list[Result]) -> str:
    """The ranking as text."""
    lines = [f"{'rank':>4} {'algorithm':<22} {'cuDNN name':<24} {'status':<14} {'ms':>8} {'extra MB':>9} {'rel err':>8}"]
    for i, r in enumerate(results, 1):
        ms = "-" if r.ms is None else f"{r.ms:.3f}"
        err = "-" if r.rel_err is None else f"{r.rel_err:.1e}"
        lines.append(f"{i:>4} {r.name:<22} {r.cudnn:<24} {r.status:<14} {ms:>8} {r.workspace_bytes / 1e6:9.2f} {err:>8}"
                     + (f"  ({r.note})" if r.note and r.status != "ok" else ""))
    return "\n".join(lines)
