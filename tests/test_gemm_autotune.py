"""16.4's GEMM auto-tuner: every candidate checked against float64 before it may be chosen, the
fastest correct one chosen and cached per shape, matmul(version="auto") right on ragged shapes."""

import numpy as np
import pytest

import gpulib
from gpulib import gemm
from gpulib.arrays import to_device, transposed
from gpulib.gemm import autotune

SMALL = (("v5", gemm.kernels.V5_SIM), ("v6", gemm.kernels.V6_SIM), ("v6", dict(BM=16, BN=64, BK=8, TM=4, TN=4)))


def _timer_by_label(ms: dict, calls: list):
    def timer(fn, label):
        calls.append(label)
        return ms[label]
    return timer


@pytest.fixture(autouse=True)
def _empty_cache():
    autotune._cache.clear()
    yield
    autotune._cache.clear()


def test_the_fastest_correct_candidate_is_chosen_and_cached():
    labels = [autotune.Result(v, t, "ok").label for v, t in SMALL]
    ms = dict(zip(labels, (3.0, 1.0, 2.0)))
    calls = []
    ranking = autotune.find_tiles(17, 20, 9, candidates=SMALL, timer=_timer_by_label(ms, calls))
    assert [r.label for r in ranking] == [labels[1], labels[2], labels[0]]
    assert all(r.status == "ok" and r.rel_err < 1e-5 for r in ranking)
    assert sorted(calls) == sorted(labels)  # each correct candidate timed once
    calls.clear()
    pick = autotune.choose(17, 20, 9, timer=lambda fn, label: calls.append(label) or (2.0 if label[:2] == "v5" else 1.0))
    again = autotune.choose(17, 20, 9, timer=lambda fn, label: pytest.fail("a cached shape must not be tuned again"))
    assert pick is again and pick.version == "v6" and len(calls) == len(autotune.default_candidates())
    assert autotune.cached_ranking(17, 20, 9)[0] is pick
    assert autotune.cached_ranking(17, 20, 9, trans_a=True) is None  # another layout is another shape


def test_a_wrong_candidate_fails_its_check_and_is_never_chosen(monkeypatch):
    def off_by_one_element(A, B, C, shape=None):  # a fast kernel that is wrong in one place
        gemm.api.launch_v5(A, B, C, shape)
        host = C.copy_to_host()
        host.flat[host.size // 2] += 1.0
        C.copy_to_device(host)

    monkeypatch.setitem(autotune.LAUNCHERS, "v5", off_by_one_element)
    ranking = autotune.find_tiles(17, 18, 9, candidates=SMALL[:2],
                                  timer=lambda fn, label: 0.1 if label.startswith("v5") else 5.0)
    assert [(r.version, r.status) for r in ranking] == [("v6", "ok"), ("v5", "failed check")]
    assert ranking[1].ms is None and "exceeds tolerance" in ranking[1].note


def test_a_tile_the_version_cannot_run_is_refused_not_chosen():
    ranking = autotune.find_tiles(9, 9, 9, candidates=[("v6", dict(BM=16, BN=64, BK=8, TM=8, TN=8)), SMALL[0]])
    assert [r.status for r in ranking] == ["ok", "refused"]
    assert "warp tile is 32x64" in ranking[1].note
    assert "refused" in autotune.table(ranking)


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True)])
def test_matmul_auto_is_right_on_a_ragged_product(trans_a, trans_b, rng):
    M, N, K = 18, 20, 9  # ragged for every candidate's tile
    A = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
    B = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    out = gpulib.poisoned((M, N))
    gemm.matmul(A, B, version="auto", out=out, trans_a=trans_a, trans_b=trans_b)
    a, b = (A.T if trans_a else A).astype(np.float64), (B.T if trans_b else B).astype(np.float64)
    gpulib.validate(out, a @ b, scale=float((np.abs(a) @ np.abs(b)).max()))
    assert autotune.cached_ranking(M, N, K, trans_a=trans_a, trans_b=trans_b) is not None


def test_a_batch_is_tuned_as_a_batch(rng):
    A = rng.standard_normal((2, 17, 9)).astype(np.float32)
    B = rng.standard_normal((2, 9, 20)).astype(np.float32)
    C = gpulib.poisoned((2, 17, 20))
    autotune.launch_chosen(to_device(A), to_device(B), C)
    want = np.einsum("zmk,zkn->zmn", A.astype(np.float64), B.astype(np.float64))
    gpulib.validate(C, want, scale=float(np.einsum("zmk,zkn->zmn", np.abs(A).astype(np.float64), np.abs(B)).max()))
    assert autotune.cached_ranking(17, 20, 9, batch=2)[0].version in autotune.BATCHED
    assert autotune.cached_ranking(17, 20, 9) is None


def test_launch_chosen_tunes_a_transposed_view_as_one(rng):
    A = rng.standard_normal((9, 20)).astype(np.float32)  # stored [K, M]: A is its transpose
    B = rng.standard_normal((9, 30)).astype(np.float32)
    C = gpulib.poisoned((20, 30))
    autotune.launch_chosen(transposed(to_device(A)), to_device(B), C)
    gpulib.validate(C, A.T.astype(np.float64) @ B, scale=float((np.abs(A.T).astype(np.float64) @ np.abs(B)).max()))
    assert autotune.cached_ranking(20, 30, 9, trans_a=True) is not None


@pytest.mark.parametrize("call, message", [
    (lambda: gemm.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), version="auto",
                         shape=gemm.kernels.V5_SIM), "version='auto' chooses the tile itself"),
    (lambda: autotune.find_tiles(4, 4, 4, batch=2, trans_a=True), "a batch of products takes C-order"),
    (lambda: autotune.find_tiles(4, 4, 4, batch=2, candidates=[("v3", gemm.kernels.V3_SIM)]),
     "v3 multiplies one product a launch"),
    (lambda: autotune.find_tiles(4, 4, 4, candidates=[("v7", gemm.kernels.V5_SIM)]), "version one of"),
    (lambda: autotune.find_tiles(4, 4, 4, candidates=[]), "non-empty list"),
    (lambda: autotune.find_tiles(4, 4, 4, timer="fast"), "timer must be a function"),
    (lambda: autotune.choose(0, 4, 4), "M must be"),
    (lambda: autotune.table([1]), "list of gemm.autotune.Result"),
], ids=["auto-with-shape", "batch-transposed", "batch-v3", "unknown-version", "no-candidates", "timer", "M", "table"])
def test_the_tuner_refuses_what_it_cannot_tune(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("cap", [True, 300, 8, 2.5], ids=["bool", "too-many", "too-few", "fraction"])
def test_a_register_cap_must_be_a_register_count(cap):
    with pytest.raises(ValueError, match=r"REGISTERS'\] must be 0 \(no cap\) or a cap from 16 to 255"):
        gemm.kernels.check_tile(dict(gemm.kernels.V6_SIM, REGISTERS=cap))


def test_a_register_cap_is_for_versions_5_and_6_only():
    with pytest.raises(ValueError, match="version 3 takes no cap"):
        gemm.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), version="v3",
                    shape=dict(gemm.kernels.V3_SIM, REGISTERS=0))
