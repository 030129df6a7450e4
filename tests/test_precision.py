"""16.5 number formats: rounding bit for bit, GEMM error per format, fp16 underflow and loss scaling."""

import numpy as np
import pytest

from gpulib import precision as P


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_fp16_is_numpys_half():
    x = np.array([1.0, 1 / 3, 65504, 70000, 1e-8, -2.5e-5], np.float32)
    np.testing.assert_array_equal(P.round_to(x, "fp16"), x.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("fmt", ["tf32", "bf16"])
def test_mantissa_rounding_is_to_nearest_even_within_the_unit_roundoff(fmt, rng):
    keep = P.MANTISSA_BITS[fmt]
    x = (rng.standard_normal(10000) * 10.0 ** rng.integers(-30, 30, 10000)).astype(np.float32)
    r = P.round_to(x, fmt)
    assert np.all(np.abs(r.astype(np.float64) - x) <= P.unit_roundoff(fmt) * np.abs(x.astype(np.float64)))
    assert np.all((r.view(np.uint32) & np.uint32((1 << (23 - keep)) - 1)) == 0)  # the dropped bits are 0
    exact = np.float32(1 + 2.0 ** -keep)  # representable: unchanged
    tie_down = np.float32(1 + 2.0 ** -(keep + 1))  # halfway between 1 and 1 + ulp: ties to the even 1
    tie_up = np.float32(1 + 3 * 2.0 ** -(keep + 1))  # halfway between 1 + ulp (odd) and 1 + 2 ulp: up
    np.testing.assert_array_equal(P.round_to(np.array([exact, tie_down, tie_up]), fmt),
                                  np.array([exact, 1.0, 1 + 2 * 2.0 ** -keep], np.float32))
    assert np.isnan(P.round_to(np.array([np.nan], np.float32), fmt)[0])
    assert np.isinf(P.round_to(np.array([np.inf], np.float32), fmt)[0])


def test_bf16_keeps_fp32_range_and_fp16_does_not():
    big = np.array([1e30], np.float32)
    assert np.isfinite(P.round_to(big, "bf16")[0]) and np.isinf(P.round_to(big, "fp16")[0])


def test_gemm_errors_follow_the_mantissa_widths(rng):
    A = rng.standard_normal((64, 256)).astype(np.float32)
    B = rng.standard_normal((256, 64)).astype(np.float32)
    e = P.gemm_errors(A, B)
    assert e["fp32"] < e["tf32"] / 10
    assert e["tf32"] < e["bf16"] / 3 and e["fp16"] < e["bf16"] / 3
    assert 0.2 < e["fp16"] / e["tf32"] < 5  # the same 10-bit mantissa


def test_loss_scaling_rescues_small_fp16_gradients(rng):
    grads = (rng.standard_normal(10000) * 1e-8).astype(np.float32)  # below fp16's subnormal range
    assert P.fp16_underflow(grads) > 0.5
    assert P.fp16_underflow(grads, scale=1024) < 0.01


def test_unknown_format_is_a_value_error():
    with pytest.raises(ValueError, match="fmt must be one of .*, not 'fp8'"):
        P.round_to(np.ones(2, np.float32), "fp8")
