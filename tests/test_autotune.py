"""16.5 auto-tuner: checked first, ranked by its own timings, never a failed algorithm, cached."""

import numpy as np
import pytest

import gpulib
import gpulib.reference
from gpulib.conv import algorithms, autotune, front
from gpulib.conv.algorithms import ALGORITHMS, Algorithm


def _layer(rng, R=3):
    X = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    W = rng.standard_normal((3, 2, R, R)).astype(np.float32)
    return X, W, rng.standard_normal(3).astype(np.float32)


def _broken(X, W, b, p, s, *, out):
    out.copy_to_device(np.zeros(out.shape, np.float32))  # fast and wrong
    return out


FAKE_MS = {"implicit_precomp_gemm": 0.5, "gemm": 0.2, "winograd": 0.3, "broken": 0.01, "fft": 0.9}


def _fake_timer(calls):
    def timer(fn, label):
        calls.append(label)
        return FAKE_MS[label]
    return timer


def _subset():
    keep = ALGORITHMS
    broken = Algorithm("broken", "broken", "none", _broken, lambda *a: "", lambda *a: 0, lambda *a: 0)
    return [keep["implicit_precomp_gemm"], keep["gemm"], keep["winograd"], keep["fft"], broken]


def test_ranking_follows_the_timings_and_skips_what_failed(rng):
    X, W, b = _layer(rng)
    calls = []
    ranking = autotune.find_algorithms(X, W, b, 1, 1, algorithms=_subset(), timer=_fake_timer(calls))
    assert [r.name for r in ranking] == ["gemm", "winograd", "implicit_precomp_gemm", "fft", "broken"]
    assert ranking[-1].status == "failed check" and ranking[-1].ms is None
    assert "broken" not in calls  # a failed algorithm is never timed
    ok = [r for r in ranking if r.status == "ok"]
    assert [r.ms for r in ok] == sorted(r.ms for r in ok) and all(r.rel_err < 1e-5 for r in ok)
    assert "im2col + GEMM" in autotune.table(ranking)  # tables print the registry's labels


def test_unsupported_algorithms_are_reported_not_run(rng):
    X, W, b = _layer(rng, R=5)
    ranking = autotune.find_algorithms(X, W, b, 2, 1, algorithms=_subset(), timer=_fake_timer([]))
    winograd = next(r for r in ranking if r.name == "winograd")
    assert winograd.status == "not supported" and "3x3" in winograd.note
    assert ranking[0].name == "gemm"


def test_choose_caches_per_layer_shape(rng, monkeypatch):
    X, W, b = _layer(rng)
    calls = []
    monkeypatch.setattr(autotune, "of_precision", lambda precision: _subset())
    monkeypatch.setattr(autotune, "_cache", {})
    first = autotune.choose(X, W, b, 1, 1, timer=_fake_timer(calls))
    n = len(calls)
    again = autotune.choose(X + 1, W, b, 1, 1, timer=_fake_timer(calls))  # same shapes: no new timing
    assert first is again and first.name == "gemm" and len(calls) == n


def test_every_algorithm_is_correct_on_a_3x3_layer(rng):
    X, W, b = _layer(rng)
    ranking = autotune.find_algorithms(X, W, b, 1, 1)
    assert {r.status for r in ranking} == {"ok"}, autotune.table(ranking)
    if gpulib.on_simulator():
        assert all(r.ms is None for r in ranking)  # nothing is timed on the simulator


def test_the_default_set_is_every_fp32_algorithm_of_the_registry(rng):
    X, W, b = _layer(rng)
    ranking = autotune.find_algorithms(X, W, b, 1, 1, timer=lambda fn, label: None)
    assert sorted(r.name for r in ranking) == sorted(a.name for a in algorithms.of_precision("fp32"))
    assert "tc_implicit_gemm" not in {r.name for r in ranking}  # fp16 algorithms are compared with fp16 ones


def test_auto_runs_the_cached_pick(rng, monkeypatch):
    X, W, b = _layer(rng)
    monkeypatch.setattr(autotune, "of_precision", lambda precision: _subset())
    monkeypatch.setattr(autotune, "_cache", {})
    autotune.choose(X, W, b, 1, 1, timer=_fake_timer([]))  # "gemm" wins on the fake timings
    out = gpulib.poisoned((1, 3, 6, 6))
    front.conv2d(X, W, b, 1, 1, algorithm="auto", out=out)
    gpulib.validate(out, gpulib.reference.conv2d(X, W, b, 1, 1), scale=gpulib.reference.conv2d_magnitude(X, W, b, 1, 1).max())
    assert autotune.choose(X, W, b, 1, 1).name == "gemm"


def test_non_finite_input_is_refused_and_no_pick_is_cached(rng):
    """One NaN pixel would rule FFT and Winograd out of the ranking (they refuse non-finite input):
    a pick made so, cached for the layer's shape, would serve later finite inputs. So tuning
    refuses it, before any launch, and caches nothing."""
    X, W, b = _layer(rng)
    X[0, 1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="X holds NaN or infinite values"):
        autotune.find_algorithms(X, W, b, 1, 1, timer=lambda fn, label: None)
    with pytest.raises(ValueError, match="X holds NaN or infinite values"):
        autotune.choose(X, W, b, 1, 1, timer=lambda fn, label: None)
    assert autotune.cached_ranking(X.shape, W.shape, 1, 1) is None
    X[0, 1, 2, 3] = 0.0
    ranking = autotune.find_algorithms(X, W, b, 1, 1, timer=lambda fn, label: None)
    assert {r.name for r in ranking if r.status == "ok"} >= {"direct", "fft", "winograd"}


@pytest.mark.parametrize("call, message", [
    (lambda X, W: autotune.find_algorithms(X, W, None, -1, 1), "padding must be an integer of at least 0, not -1"),
    (lambda X, W: autotune.find_algorithms(X, W, None, 0, 0), "stride must be an integer of at least 1, not 0"),
    (lambda X, W: autotune.find_algorithms(X[0], W), "X \\[N, C, H, W\\] must be 4-D"),
    (lambda X, W: autotune.find_algorithms(X, np.ones((3, 2, 9, 9), np.float32)), "larger than the padded 6x6"),
])
def test_the_auto_tuner_checks_its_inputs(call, message, rng):
    X, W, _ = _layer(rng)
    with pytest.raises(ValueError, match=message):
        call(X, W)
