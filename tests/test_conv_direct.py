"""16.3 direct convolution, every version, against the float64 reference on random shapes."""

import numpy as np
import pytest
from conftest import MAX_EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib
from gpulib import reference as ref
from gpulib.conv.direct import VERSIONS
from gpulib.conv.direct import conv2d_direct as conv2d


@st.composite
def conv_cases(draw):
    """Small random layers: odd sizes (not multiples of the 16×16 tile; up to 17, so that some
    span two tiles), padding and stride."""
    R, S = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    padding, stride = draw(st.integers(0, 2)), draw(st.integers(1, 3))
    H = draw(st.integers(max(1, R - 2 * padding), 17))
    W = draw(st.integers(max(1, S - 2 * padding), 17))
    return dict(N=draw(st.integers(1, 2)), C=draw(st.integers(1, 3)), H=H, W=W,
                K=draw(st.integers(1, 10)), R=R, S=S, padding=padding, stride=stride,
                seed=draw(st.integers(0, 2**31)))


def make(case):
    rng = np.random.default_rng(case["seed"])
    X = rng.standard_normal((case["N"], case["C"], case["H"], case["W"])).astype(np.float32)
    W = rng.standard_normal((case["K"], case["C"], case["R"], case["S"])).astype(np.float32)
    b = rng.standard_normal(case["K"]).astype(np.float32)
    return X, W, b


LADDER = [("v1", 1), ("v2", 1), ("v2", 8), ("v3", 4)]  # (version, channels_per_block)


@pytest.mark.parametrize("version, group", LADDER)
@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(case=conv_cases())
def test_direct_conv_matches_reference(version, group, case):
    X, W, b = make(case)
    p, s = case["padding"], case["stride"]
    want = ref.conv2d(X, W, b, p, s)
    out = gpulib.poisoned(want.shape)
    conv2d(X, W, b, p, s, version=version, out=out, channels_per_block=group)
    gpulib.validate(out, want, scale=ref.conv2d_magnitude(X, W, b, p, s).max(), name=version)


def test_the_chapter_case_without_bias(rng):
    X = rng.standard_normal((1, 3, 20, 18)).astype(np.float32)
    W = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    for version in VERSIONS:
        out = gpulib.poisoned((1, 5, 18, 16))
        conv2d(X, W, version=version, out=out)
        gpulib.validate(out, ref.conv2d(X, W), scale=ref.conv2d_magnitude(X, W).max(), name=version)


def test_output_channels_not_a_multiple_of_the_group(rng):
    X = rng.standard_normal((2, 2, 9, 9)).astype(np.float32)
    W = rng.standard_normal((19, 2, 3, 3)).astype(np.float32)  # 19 = 2 groups of 8 + 3
    b = rng.standard_normal(19).astype(np.float32)
    out = gpulib.poisoned((2, 19, 9, 9))
    conv2d(X, W, b, padding=1, version="v2", out=out, channels_per_block=8)
    gpulib.validate(out, ref.conv2d(X, W, b, 1), scale=ref.conv2d_magnitude(X, W, b, 1).max())


@pytest.fixture
def layer(rng):
    X = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    return X, W


@pytest.mark.parametrize("bad, message", [
    (lambda X, W: conv2d(X, W[:, :2].copy()), "channel mismatch: X has C=3 channels but W expects 2"),
    (lambda X, W: conv2d(X, np.ones((4, 3, 9, 3), np.float32)), "filter is larger than the padded 8x8 image"),
    (lambda X, W: conv2d(X, np.ones((4, 3, 11, 3), np.float32), padding=1), "larger than the padded 10x10 image"),
    (lambda X, W: conv2d(X.astype(np.float64), W), "X \\[N, C, H, W\\] must have dtype float32"),
    (lambda X, W: conv2d(X[0], W), "must be 4-D"),
    (lambda X, W: conv2d(X.transpose(0, 2, 3, 1), W), "C-contiguous"),
    (lambda X, W: conv2d(X, W, np.ones(3, np.float32)), "b has 3 entries but W has K=4 filters"),
    (lambda X, W: conv2d(X, W, padding=-1), "padding must be an integer of at least 0, not -1"),
    (lambda X, W: conv2d(X, W, stride=0), "stride must be an integer of at least 1, not 0"),
    (lambda X, W: conv2d(X, W, version="v9"), "unknown version 'v9'"),
    (lambda X, W: conv2d(X, W, version="v2", channels_per_block=0), "channels_per_block must be"),
])
def test_bad_input_is_rejected_before_launch(layer, bad, message):
    X, W = layer
    with pytest.raises(ValueError, match=message):
        bad(X, W)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_registry_s_direct_entry_runs_either_version(rng, monkeypatch, version):
    """The registry's "direct" runs version 2 on a GPU and version 1 on the simulator (its label
    says so); here each of them through the entry, on any machine."""
    from gpulib.conv import algorithms, direct

    monkeypatch.setattr(direct, "default_version", lambda: version)
    X = rng.standard_normal((2, 3, 9, 7)).astype(np.float32)
    W = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    Y = algorithms.ALGORITHMS["direct"].run(X, W, b, 1, 2, out=gpulib.poisoned((2, 5, 5, 4)))
    gpulib.validate(Y, ref.conv2d(X, W, b, 1, 2), scale=ref.conv2d_magnitude(X, W, b, 1, 2).max(), name=version)
    assert algorithms.ALGORITHMS["direct"].label == "direct (v2; sim: v1)"  # the version it runs, here and there


def test_version_3_splits_filters_that_do_not_fit_constant_memory(rng, monkeypatch):
    """With room for 250 bytes of filters, two 3·3·3 float32 filters (108 bytes each) fit a kernel,
    so K = 5 runs as three kernels (2 + 2 + 1 filters, the last padded with a zero filter that is
    never stored), the same arithmetic as 60 KB and real layers."""
    from gpulib.conv import direct

    with pytest.raises(ValueError, match="more than its 61440"):
        direct.constant_group(2048, 3, 3, 1)  # 73,728 bytes: not even one filter fits
    assert direct.constant_group(64, 3, 3, 16) == 16  # the 16.3 layer: 26 filters fit, kept a multiple of 16
    monkeypatch.setattr(direct, "CONSTANT_BYTES", 250)
    X = rng.standard_normal((1, 3, 6, 7)).astype(np.float32)
    W = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    assert direct.constant_group(3, 3, 3, 1) == 2
    out = gpulib.poisoned((1, 5, 6, 7))
    conv2d(X, W, b, 1, version="v3", channels_per_block=1, tile=4, out=out)
    gpulib.validate(out, ref.conv2d(X, W, b, 1), scale=ref.conv2d_magnitude(X, W, b, 1).max(), name="v3")
