"""validate must fail on wrong, unwritten and NaN outputs, and pass correct ones."""

import numpy as np
import pytest
from numba import cuda

import gpulib
from gpulib.check import poison_value, unwritten_mask


@cuda.jit
def copy_kernel(src, dst, skip_last):
    i = cuda.grid(1)
    if i < dst.shape[0] and not (skip_last and i == dst.shape[0] - 1):
        dst[i] = src[i]


def launch_copy(src, skip_last):
    out = gpulib.poisoned(src.shape)
    copy_kernel[1, 32](cuda.to_device(src), out, skip_last)
    return out


def test_correct_output_passes(rng):
    src = rng.standard_normal(20).astype(np.float32)
    result = gpulib.validate(launch_copy(src, False), src)
    assert result.rel_err == 0.0
    assert "OK" in str(result)


def test_unwritten_element_fails_even_if_memory_held_the_answer(rng):
    src = rng.standard_normal(20).astype(np.float32)
    with pytest.raises(gpulib.ValidationError, match="1 of 20 elements were never written.*index \\(19,\\)"):
        gpulib.validate(launch_copy(src, True), src)


def test_one_wrong_element_fails(rng):
    ref = rng.standard_normal((4, 5))
    out = ref.astype(np.float32)
    out[2, 3] += 1e-3 * np.abs(ref).max()
    with pytest.raises(gpulib.ValidationError, match=r"worst at index \(2, 3\)"):
        gpulib.validate(out, ref)


def test_rounding_error_within_tolerance_passes(rng):
    ref = rng.standard_normal(1000)
    gpulib.validate(ref.astype(np.float32), ref)


def test_computed_nan_fails_and_is_told_apart_from_unwritten(rng):
    ref = rng.standard_normal(6)
    out = ref.astype(np.float32)
    with np.errstate(invalid="ignore"):
        out[1] = np.float32(np.inf) - np.float32(np.inf)  # a NaN that arithmetic made
    assert not unwritten_mask(out).any()
    with pytest.raises(gpulib.ValidationError, match="NaN or infinite"):
        gpulib.validate(out, ref)


def test_shape_mismatch_fails():
    with pytest.raises(gpulib.ValidationError, match="shape"):
        gpulib.validate(np.zeros((2, 3), np.float32), np.ones((3, 2)))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_poison_is_detected_for_each_dtype(dtype):
    arr = gpulib.poisoned((3, 4), dtype, device=False)
    assert unwritten_mask(arr).all()
    arr[0, 0] = 1
    assert unwritten_mask(arr).sum() == 11


def test_poison_is_a_nan_for_floats():
    assert np.isnan(poison_value(np.float32))
    assert np.isnan(poison_value(np.float64))


def test_tolerance_can_be_tightened(rng):
    ref = rng.standard_normal(100)
    with pytest.raises(gpulib.ValidationError, match="exceeds tolerance"):
        gpulib.validate(ref.astype(np.float32), ref, rtol=1e-12)


@pytest.mark.parametrize("got, want, message", [
    ([1.0, 2.0], [1.0, np.nan], "a number where the reference is NaN"),
    ([1.0, np.nan], [1.0, np.inf], "not inf where the reference is inf"),
    ([1.0, -np.inf], [1.0, np.inf], "not inf where the reference is inf"),
    ([1.0, np.inf], [1.0, -np.inf], "not -inf where the reference is -inf"),
    ([1.0, np.inf], [1.0, 2.0], "NaN or infinite where the reference is finite"),
    ([np.nan, np.nan], [np.nan, 3.0], "NaN or infinite where the reference is finite"),
])
def test_non_finite_values_must_match_by_position(got, want, message):
    with pytest.raises(gpulib.ValidationError, match=message):
        gpulib.validate(np.array(got, np.float32), np.array(want))


def test_matching_nan_and_inf_pass_and_the_rest_is_still_compared():
    want = np.array([np.nan, np.inf, -np.inf, 1.0, 2.0])
    gpulib.validate(np.array(want, np.float32), want)
    wrong = np.array([np.nan, np.inf, -np.inf, 1.0, 2.5], np.float32)
    with pytest.raises(gpulib.ValidationError, match=r"worst at index \(4,\)"):
        gpulib.validate(wrong, want)


def test_an_all_nan_reference_is_met_only_by_nans():
    want = np.full(4, np.nan)
    assert gpulib.validate(np.full(4, np.nan, np.float32), want).rel_err == 0.0
    with pytest.raises(gpulib.ValidationError, match="a number where the reference is NaN"):
        gpulib.validate(np.zeros(4, np.float32), want)


@pytest.mark.parametrize("scale", [-1.0, np.nan, np.inf])
def test_a_scale_that_is_negative_or_not_finite_is_refused(scale):
    with pytest.raises(ValueError, match="scale must be a finite number of at least 0"):
        gpulib.validate(np.zeros(3, np.float32), np.ones(3), scale=scale)


def test_a_zero_scale_asks_for_the_exact_answer():
    gpulib.validate(np.zeros(3, np.float32), np.zeros(3), scale=0.0)  # every summed term was zero
    with pytest.raises(gpulib.ValidationError, match="relative error inf exceeds"):
        gpulib.validate(np.array([0, 1e-30, 0], np.float32), np.zeros(3), scale=0.0)


@pytest.mark.parametrize("rtol", [-1e-5, 0.0, np.nan])
def test_a_tolerance_that_is_not_a_positive_number_is_refused(rtol):
    with pytest.raises(ValueError, match="rtol must be a positive finite number"):
        gpulib.validate(np.zeros(3, np.float32), np.zeros(3), rtol=rtol)
