"""16.5 auto-tuner: checked first, ranked by its own timings, never a failed algorithm, cached."""

import numpy as np

import gpulib
from gpulib.conv import autotune
from gpulib.conv.autotune import Algorithm


def _layer(rng, R=3):
    X = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    W = rng.standard_normal((3, 2, R, R)).astype(np.float32)
    return X, W, rng.standard_normal(3).astype(np.float32)


def _broken(X, W, b, p, s, out):
    out.copy_to_device(np.zeros(out.shape, np.float32))  # fast and wrong
    return out


FAKE_MS = {"implicit precomp GEMM": 0.5, "im2col + GEMM": 0.2, "Winograd (fused)": 0.3, "broken": 0.01,
           "FFT": 0.9}


def _fake_timer(calls):
    def timer(fn, label):
        calls.append(label)
        return FAKE_MS[label]
    return timer


def _subset():
    keep = {a.name: a for a in autotune.ALGORITHMS}
    broken = Algorithm("broken", "none", _broken, autotune._always, lambda *a: 0)
    return [keep["implicit precomp GEMM"], keep["im2col + GEMM"], keep["Winograd (fused)"], keep["FFT"], broken]


def test_ranking_follows_the_timings_and_skips_what_failed(rng):
    X, W, b = _layer(rng)
    calls = []
    ranking = autotune.find_algorithms(X, W, b, 1, 1, algorithms=_subset(), timer=_fake_timer(calls))
    assert [r.name for r in ranking] == ["im2col + GEMM", "Winograd (fused)", "implicit precomp GEMM", "FFT", "broken"]
    assert ranking[-1].status == "failed check" and ranking[-1].ms is None
    assert "broken" not in calls  # a failed algorithm is never timed
    ok = [r for r in ranking if r.status == "ok"]
    assert [r.ms for r in ok] == sorted(r.ms for r in ok) and all(r.rel_err < 1e-5 for r in ok)
    assert "im2col + GEMM" in autotune.table(ranking)


def test_unsupported_algorithms_are_reported_not_run(rng):
    X, W, b = _layer(rng, R=5)
    ranking = autotune.find_algorithms(X, W, b, 2, 1, algorithms=_subset(), timer=_fake_timer([]))
    winograd = next(r for r in ranking if r.name == "Winograd (fused)")
    assert winograd.status == "not supported" and "3x3" in winograd.note
    assert ranking[0].name == "im2col + GEMM"


def test_choose_caches_per_layer_shape(rng, monkeypatch):
    X, W, b = _layer(rng)
    calls = []
    monkeypatch.setattr(autotune, "ALGORITHMS", _subset())
    monkeypatch.setattr(autotune, "_cache", {})
    first = autotune.choose(X, W, b, 1, 1, timer=_fake_timer(calls))
    n = len(calls)
    again = autotune.choose(X + 1, W, b, 1, 1, timer=_fake_timer(calls))  # same shapes: no new timing
    assert first is again and first.name == "im2col + GEMM" and len(calls) == n


def test_every_algorithm_is_correct_on_a_3x3_layer(rng):
    X, W, b = _layer(rng)
    ranking = autotune.find_algorithms(X, W, b, 1, 1)
    assert {r.status for r in ranking} == {"ok"}, autotune.table(ranking)
    if gpulib.on_simulator():
        assert all(r.ms is None for r in ranking)  # nothing is timed on the simulator
