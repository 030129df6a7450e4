"""16.5: Winograd F(2x2, 3x3) (fused and non-fused), F(4x4, 3x3) and FFT convolution against the reference."""

import numpy as np
import pytest
from conftest import MAX_EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib
from gpulib import reference as ref
from gpulib.conv import fft, winograd
from gpulib.conv.algorithms import ALGORITHMS, direct_multiplications


@st.composite
def three_by_three(draw):
    padding = draw(st.integers(0, 2))
    return dict(N=draw(st.integers(1, 2)), C=draw(st.integers(1, 3)), K=draw(st.integers(1, 4)),
                H=draw(st.integers(max(1, 3 - 2 * padding), 9)), W=draw(st.integers(max(1, 3 - 2 * padding), 9)),
                padding=padding, seed=draw(st.integers(0, 2**31)))


def _layer(case, R=3, S=3):
    rng = np.random.default_rng(case["seed"])
    X = rng.standard_normal((case["N"], case["C"], case["H"], case["W"])).astype(np.float32)
    W = rng.standard_normal((case["K"], case["C"], R, S)).astype(np.float32)
    b = rng.standard_normal(case["K"]).astype(np.float32)
    return X, W, b


def test_one_tile_needs_16_multiplications_and_matches_the_direct_sum(rng):
    d, g = rng.standard_normal((4, 4)), rng.standard_normal((3, 3))
    direct = np.array([[(d[y:y + 3, x:x + 3] * g).sum() for x in range(2)] for y in range(2)])
    np.testing.assert_allclose(winograd.reference_tile(d, g), direct, rtol=1e-12, atol=1e-12)
    layer = (1, 1, 6, 6), (1, 1, 3, 3), 1, 1
    assert direct_multiplications(*layer) / winograd.multiplications(*layer) == 36 / 16


def test_an_f4_tile_needs_36_multiplications_and_matches_the_direct_sum(rng):
    d, g = rng.standard_normal((6, 6)), rng.standard_normal((3, 3))
    direct = np.array([[(d[y:y + 3, x:x + 3] * g).sum() for x in range(4)] for y in range(4)])
    np.testing.assert_allclose(winograd.reference_tile_f4(d, g), direct, rtol=1e-12, atol=1e-12)
    layer = (1, 1, 8, 8), (1, 1, 3, 3), 1, 1  # an 8x8 output: four 4x4 tiles
    assert direct_multiplications(*layer) / winograd.f4_multiplications(*layer) == 144 / 36


@pytest.mark.parametrize("conv", [winograd.conv2d_winograd, winograd.conv2d_winograd_nonfused,
                                  winograd.conv2d_winograd_f4],
                         ids=["WINOGRAD", "WINOGRAD_NONFUSED", "WINOGRAD_F4"])
@settings(max_examples=max(3, MAX_EXAMPLES // 2), deadline=None)
@given(case=three_by_three())
def test_winograd_matches_the_reference(conv, case):
    X, W, b = _layer(case)
    p = case["padding"]
    want = ref.conv2d(X, W, b, p)
    Y = conv(X, W, b, p, out=gpulib.poisoned(want.shape))
    # the transforms add and subtract up to 4x4 inputs and filters: scale by their magnitudes
    scale = ref.conv2d_magnitude(X, W, b, p).max() * 4
    gpulib.validate(Y, want, scale=scale, name="winograd")


def test_winograd_rejects_what_it_cannot_compute():
    X = np.ones((1, 2, 8, 8), np.float32)
    with pytest.raises(ValueError, match="needs a 3x3 filter and stride 1, not a 5x5 filter"):
        winograd.conv2d_winograd(X, np.ones((2, 2, 5, 5), np.float32))
    with pytest.raises(ValueError, match="stride 2"):
        winograd.conv2d_winograd_nonfused(X, np.ones((2, 2, 3, 3), np.float32), stride=2)
    with pytest.raises(ValueError, match=r"F\(4x4, 3x3\) needs a 3x3 filter and stride 1, not a 3x3 filter with stride 2"):
        winograd.conv2d_winograd_f4(X, np.ones((2, 2, 3, 3), np.float32), stride=2)


def test_winograd_f4_keeps_one_plan_per_layer_shape(rng):
    """A second call of the same shape reuses the workspace and bound launches and still gives
    the new inputs' answer; another shape gets a plan of its own."""
    case = dict(N=1, C=2, K=3, H=7, W=6, padding=1, seed=int(rng.integers(1 << 30)))
    for seed in (case["seed"], case["seed"] + 1):
        X, W, b = _layer(dict(case, seed=seed))
        want = ref.conv2d(X, W, b, 1)
        Y = winograd.conv2d_winograd_f4(X, W, b, 1, out=gpulib.poisoned(want.shape))
        gpulib.validate(Y, want, scale=ref.conv2d_magnitude(X, W, b, 1).max() * 4, name="f4")
    assert ((1, 2, 7, 6), (3, 2, 3, 3), 1) in winograd.F4_PLANS


@settings(max_examples=max(3, MAX_EXAMPLES // 2), deadline=None)
@given(R=st.integers(1, 5), stride=st.integers(1, 2), case=three_by_three())
def test_fft_convolution_matches_the_reference(R, stride, case):
    if case["H"] + 2 * case["padding"] < R or case["W"] + 2 * case["padding"] < R:
        return
    X, W, b = _layer(case, R, R)
    p = case["padding"]
    want = ref.conv2d(X, W, b, p, stride)
    Y = fft.conv2d_fft(X, W, b, p, stride, out=gpulib.poisoned(want.shape))
    gpulib.validate(Y, want, scale=ref.conv2d_magnitude(X, W, b, p, stride).max() * 4, name="fft")


def test_workspaces_grow_as_expected():
    X_shape, W_shape = (1, 4, 8, 8), (2, 4, 3, 3)
    assert winograd.workspace_bytes(X_shape, W_shape, 1) == 4 * 16 * 2 * 4  # U [16, K, C]
    tiles = 4 * 4  # an 8x8 output in 2x2 tiles
    assert winograd.nonfused_workspace_bytes(X_shape, W_shape, 1) == 4 * 16 * (2 * 4 + tiles * (4 + 2))
    assert fft.workspace_bytes((1, 1, 6, 6), (1, 1, 3, 3)) == 8 * 6 * 4 * 3
    assert winograd.f4_workspace_bytes(X_shape, W_shape, 1) == 4 * 36 * (2 * 4 + 4 * (4 + 2))  # 2x2 tiles of 4x4


def test_algorithm_costs_follow_the_formulas_and_the_figure_draws():
    import matplotlib.pyplot as plt

    from gpulib.conv.algorithms import of_precision
    from gpulib.figures import conv_algorithms as algorithm_figure

    L = algorithm_figure.LAYER
    rows = {r["cudnn"]: r for r in algorithm_figure.costs(L)}
    direct = L["N"] * L["K"] * L["H"] * L["W"] * L["C"] * 9  # 'same' padding: H' = H
    for name in ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM"):
        assert rows[name]["multiplications"] == direct
    assert rows["WINOGRAD"]["multiplications"] * 2.25 == direct  # 16 instead of 36 per 2x2 tile
    assert rows["GEMM"]["extra_bytes"] > 9 * 4 * L["N"] * L["C"] * L["H"] * L["W"]  # X_col alone is 9x X
    assert rows["IMPLICIT_GEMM"]["extra_bytes"] == 0
    # FFT's count hardly depends on the filter size; the direct count grows as R·S
    five = {r["cudnn"]: r for r in algorithm_figure.costs(dict(L, R=5, S=5, padding=2))}
    assert five["GEMM"]["multiplications"] / direct == 25 / 9
    assert five["FFT"]["multiplications"] / rows["FFT"]["multiplications"] < 1.2
    assert five["WINOGRAD"]["multiplications"] is None and five["WINOGRAD"]["extra_bytes"] is None
    assert [r["name"] for r in algorithm_figure.costs(L)] == [a.name for a in of_precision("fp32")]
    for alg in ALGORITHMS.values():  # every entry of the registry counts its own costs
        assert alg.multiplications((2, 3, 8, 8), (4, 3, 3, 3), 1, 1) > 0
        assert alg.workspace((2, 3, 8, 8), (4, 3, 3, 3), 1, 1) >= 0
    fig = algorithm_figure.draw()
    assert len(fig.axes) == 8
    plt.close(fig)
