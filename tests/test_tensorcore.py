"""16.5 tensor cores: the WMMA API (emulated on the simulator) against NumPy with fp16-rounded
operands; shapes that are not multiples of 16 are padded; on a GPU the SASS holds HMMA."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib
from gpulib.tensorcore import gemm as T
from conftest import MAX_EXAMPLES
from test_conv_direct import conv_cases, make


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
@settings(max_examples=max(4, MAX_EXAMPLES // 3), deadline=None)
@given(M=st.integers(1, 70), K=st.integers(1, 40), N=st.integers(1, 70), seed=st.integers(0, 2**31))
def test_tensor_core_gemm_is_the_fp16_product_summed_in_fp32(version, M, K, N, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = T.matmul_tc(A, B, version)
    scale = (np.abs(A.astype(np.float16)).astype(np.float64) @ np.abs(B.astype(np.float16))).max()
    gpulib.validate(C, T.reference(A, B), scale=scale, name="tensor cores")  # fp32 rounding only


def test_fp16_rounding_of_the_operands_is_what_differs_from_fp32(rng):
    A = rng.standard_normal((32, 64)).astype(np.float32)
    B = rng.standard_normal((64, 16)).astype(np.float32)
    exact = A.astype(np.float64) @ B
    err = np.abs(T.matmul_tc(A, B) - exact).max() / np.abs(exact).max()
    assert 1e-5 < err < 1e-2  # fp16 has an 11-bit significand: about 3 decimal digits


def test_mismatched_shapes_are_a_value_error():
    with pytest.raises(ValueError, match="inner dimensions do not match"):
        T.matmul_tc(np.ones((16, 8), np.float32), np.ones((16, 8), np.float32))
    with pytest.raises(ValueError, match="unknown version .v9.; choose one of"):
        T.matmul_tc(np.ones((16, 16), np.float32), np.ones((16, 16), np.float32), "v9")


@settings(max_examples=max(3, MAX_EXAMPLES // 4), deadline=None)
@given(case=conv_cases())
def test_tensor_core_conv_is_the_fp16_convolution(case):
    from gpulib import reference as ref
    from gpulib.tensorcore import conv as TC

    X, W, b = make(case)
    p, s = case["padding"], case["stride"]
    want = TC.reference(X, W, b, p, s)
    Y = TC.conv2d_tc(X, W, b, p, s, out=gpulib.poisoned(want.shape))
    gpulib.validate(Y, want, scale=ref.conv2d_magnitude(X, W, b, p, s).max(), name="tensor-core conv")


def test_the_kernel_uses_tensor_core_instructions():
    if not gpulib.on_gpu():
        pytest.skip("needs the GPU: the simulator has no SASS (the emulation is tested above)")
    for version, kernel in (("v1", T.tc_gemm_v1_kernel), ("v2", T.tc_gemm_v2_kernel), ("v3", T.tc_gemm_v3_kernel)):
        T.matmul_tc(np.ones((16, 16), np.float32), np.ones((16, 16), np.float32), version)
        assert "HMMA" in "\n".join(kernel.inspect_sass().values()), version


def test_benchmark_layers_are_valid_and_measuring_needs_a_gpu():
    from gpulib.conv.direct import check_conv_inputs
    from gpulib.tensorcore import bench

    for L in bench.LAYERS.values():
        X = np.empty((1, L["C"], L["H"], L["W"]), np.float32)
        check_conv_inputs(X, np.empty((L["K"], L["C"], L["R"], L["S"]), np.float32), None, L["padding"], L["stride"])
    if gpulib.on_simulator():
        with pytest.raises(RuntimeError, match="timing needs a GPU"):
            bench.measure()


def test_tensor_core_gemm_v3_over_several_blocks(rng):
    A = rng.standard_normal((200, 72)).astype(np.float32)  # 2 x 2 blocks of 128, K = 72 (2.25 tiles of 32)
    B = rng.standard_normal((72, 150)).astype(np.float32)
    scale = (np.abs(A.astype(np.float16)).astype(np.float64) @ np.abs(B.astype(np.float16))).max()
    gpulib.validate(T.matmul_tc(A, B, "v3"), T.reference(A, B), scale=scale, name="tensor-core GEMM v3")
