"""16.5 tensor cores: the WMMA API (emulated on the simulator) against NumPy with fp16-rounded
operands; shapes that are not multiples of 16 are padded; on a GPU the SASS holds HMMA."""

import numpy as np
import pytest
from conftest import MAX_EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from test_conv_direct import conv_cases, make

import gpulib
from gpulib.gemm import tensorcore as tc_gemm


@pytest.mark.parametrize("version", tc_gemm.VERSIONS)
@settings(max_examples=max(3, MAX_EXAMPLES // 3), deadline=None)
@given(M=st.integers(1, 70), K=st.integers(1, 40), N=st.integers(1, 70), seed=st.integers(0, 2**31))
def test_tensor_core_gemm_is_the_fp16_product_summed_in_fp32(version, M, K, N, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = tc_gemm.matmul_tc(A, B, version=version, out=gpulib.poisoned((M, N)))  # any unwritten element fails
    scale = (np.abs(A.astype(np.float16)).astype(np.float64) @ np.abs(B.astype(np.float16))).max()
    gpulib.validate(C, tc_gemm.reference(A, B), scale=scale, name="tensor cores")  # fp32 rounding only


def test_fp16_rounding_of_the_operands_is_what_differs_from_fp32(rng):
    A = rng.standard_normal((32, 64)).astype(np.float32)
    B = rng.standard_normal((64, 16)).astype(np.float32)
    exact = A.astype(np.float64) @ B
    err = np.abs(tc_gemm.matmul_tc(A, B).copy_to_host() - exact).max() / np.abs(exact).max()
    assert 1e-5 < err < 1e-2  # fp16 has an 11-bit significand: about 3 decimal digits


def test_mismatched_shapes_are_a_value_error():
    with pytest.raises(ValueError, match="inner dimensions do not match"):
        tc_gemm.matmul_tc(np.ones((16, 8), np.float32), np.ones((16, 8), np.float32))
    with pytest.raises(ValueError, match="unknown version .v10.; choose one of"):
        tc_gemm.matmul_tc(np.ones((16, 16), np.float32), np.ones((16, 16), np.float32), version="v10")


@pytest.mark.parametrize("version", ["v1", "v2"])
@settings(max_examples=max(3, MAX_EXAMPLES // 4), deadline=None)
@given(case=conv_cases())
def test_tensor_core_conv_is_the_fp16_convolution(version, case):
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X, W, b = make(case)
    p, s = case["padding"], case["stride"]
    want = tc_conv.reference(X, W, b, p, s)
    Y = tc_conv.conv2d_tc(X, W, b, p, s, out=gpulib.poisoned(want.shape), version=version)
    gpulib.validate(Y, want, scale=ref.conv2d_magnitude(X, W, b, p, s).max(), name=f"tensor-core conv {version}")


def test_nhwc_conv_kernel_writes_every_output_over_several_blocks_and_steps(rng):
    """Version 2's own NHWC output (poisoned), 2 blocks of pixels x 2 of filters, R·S·C = 5·5·8 =
    200 = 6.25 steps of 32, C = 5 padded to 8, K = 70 padded to 80, stride 2."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((2, 5, 21, 17)).astype(np.float32)
    W = rng.standard_normal((70, 5, 5, 5)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    want = tc_conv.reference(X, W, b, 2, 2)
    N, K, Ho, Wo = want.shape
    operands = tc_conv.prepare(X, W, b, 2, 2, version="v2")
    X2, Wt, bias_rows = operands.X, operands.W, operands.bias
    assert X2.shape == (2 * 21 * 17, 8) and Wt.shape == (5 * 5 * 8, 80) and bias_rows.shape == (16, 128)
    assert N * Ho * Wo == 198 and operands.out_shape == (208, 80)  # 198 pixels rounded up to 16
    with pytest.raises(ValueError, match=r"Y must be a float32 device array of shape \[208, 80\] for v2"):
        tc_conv.launch(operands, gpulib.poisoned((N * Ho * Wo, 80)))
    Yn = gpulib.poisoned((208, 80))
    tc_conv.launch(operands, Yn)
    Yn = Yn.copy_to_host()[:N * Ho * Wo]
    assert np.all(Yn[:, K:] == 0)  # the padded filters: zero weights, zero bias
    got = Yn[:, :K].reshape(N, Ho, Wo, K).transpose(0, 3, 1, 2)
    gpulib.validate(got, want, scale=ref.conv2d_magnitude(X, W, b, 2, 2).max(), name="NHWC tensor-core conv")


def test_the_layout_conversions_are_kernels_that_match_numpy(rng):
    """Version 2's operands and output conversion, made on the device, against the same
    layouts built with NumPy: fp16 values, channels and filters padded with zeros."""
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((2, 5, 4, 3)).astype(np.float32)  # C = 5 -> 8
    W = rng.standard_normal((6, 5, 3, 2)).astype(np.float32)  # K = 6 -> 16
    b = rng.standard_normal(6).astype(np.float32)
    operands = tc_conv.prepare(X, W, b, version="v2")
    X2, Wt, bias_rows = operands.X, operands.W, operands.bias
    want_X = np.zeros((2, 4, 3, 8), np.float16)
    want_X[..., :5] = X.transpose(0, 2, 3, 1)
    want_W = np.zeros((3, 2, 8, 16), np.float16)
    want_W[:, :, :5, :6] = W.transpose(2, 3, 1, 0)
    want_b = np.zeros((16, 64), np.float32)
    want_b[:, :6] = b
    np.testing.assert_array_equal(X2.copy_to_host(), want_X.reshape(24, 8))
    np.testing.assert_array_equal(Wt.copy_to_host(), want_W.reshape(48, 16))
    np.testing.assert_array_equal(bias_rows.copy_to_host(), want_b)
    Yn = rng.standard_normal((32, 16)).astype(np.float32)  # 2·4·3 = 24 pixel rows, padded to 32
    Y = gpulib.poisoned((2, 6, 4, 3))
    tc_conv._to_nchw_rows(gpulib.env.cuda.to_device(Yn), Y)
    np.testing.assert_array_equal(Y.copy_to_host(), tc_conv.to_nchw(Yn, (2, 6, 4, 3)))
    np.testing.assert_array_equal(tc_conv.fp16_copy(X).copy_to_host(), X.astype(np.float16))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_tensor_core_conv_never_goes_through_the_host(version, rng, monkeypatch):
    from gpulib import arrays
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    def no_host(*args, **kwargs):
        raise AssertionError("a copy to the host inside conv2d_tc")

    X = rng.standard_normal((2, 5, 6, 7)).astype(np.float32)
    W = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    X_dev, W_dev, b_dev = (gpulib.env.cuda.to_device(a) for a in (X, W, b))
    monkeypatch.setattr(tc_conv, "to_host", no_host)
    monkeypatch.setattr(arrays, "to_host", no_host)
    Y = tc_conv.conv2d_tc(X_dev, W_dev, b_dev, 1, 1, out=gpulib.poisoned((2, 6, 6, 7)), version=version)
    monkeypatch.undo()
    gpulib.validate(Y, tc_conv.reference(X, W, b, 1, 1), scale=ref.conv2d_magnitude(X, W, b, 1, 1).max(),
                    name=f"tensor-core conv {version}")


def test_unknown_conv_version_is_a_value_error():
    from gpulib.conv import tensorcore as tc_conv

    with pytest.raises(ValueError, match=r"version must be one of \(.v1., .v2., .v3., .v4., .v5., .v6., .v7.\), not .v8."):
        tc_conv.conv2d_tc(np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32), version="v8")


def test_the_kernel_uses_tensor_core_instructions():
    if not gpulib.on_gpu():
        pytest.skip("needs the GPU: the simulator has no SASS (the emulation is tested above)")
    for version in tc_gemm.VERSIONS:
        tc_gemm.matmul_tc(np.ones((16, 16), np.float32), np.ones((16, 16), np.float32), version=version)
        sass = "\n".join(getattr(tc_gemm, f"tc_gemm_{version}_kernel").inspect_sass().values())
        assert "HMMA" in sass, version
        if version in ("v2", "v3", "v4"):  # fragments from shared memory: ldmatrix
            assert "LDSM" in sass, version
        if version == "v4":  # asynchronous global -> shared copies
            assert "LDGSTS" in sass


def test_benchmark_layers_are_valid_and_measuring_needs_a_gpu():
    from gpulib.bench import cudnn_tensorcore as bench
    from gpulib.book_layers import LAYERS
    from gpulib.shapes import check_conv_inputs

    for L in LAYERS.values():
        X = np.empty((1, L["C"], L["H"], L["W"]), np.float32)
        check_conv_inputs(X, np.empty((L["K"], L["C"], L["R"], L["S"]), np.float32), None, L["padding"], L["stride"])
    if gpulib.on_simulator():
        with pytest.raises(RuntimeError, match="timing needs a GPU"):
            bench.measure()


@pytest.mark.parametrize("version", ["v3", "v4"])
def test_tensor_core_gemm_over_several_blocks_and_steps(version, rng):
    # 2 blocks of 128 rows (the second ragged) by 1 of columns; K = 40: one full step of 32 and a
    # ragged one. A swapped block axis or a lost step leaves poisoned or wrong elements.
    A = rng.standard_normal((200, 40)).astype(np.float32)
    B = rng.standard_normal((40, 100)).astype(np.float32)
    scale = (np.abs(A.astype(np.float16)).astype(np.float64) @ np.abs(B.astype(np.float16))).max()
    C = tc_gemm.matmul_tc(A, B, version=version, out=gpulib.poisoned((200, 100)))
    gpulib.validate(C, tc_gemm.reference(A, B), scale=scale, name=f"tensor-core GEMM {version}")


# ---- the fragment layout of mma.m16n8k16 (16.5's diagram)
from gpulib.tensorcore import layout  # noqa: E402


@pytest.mark.parametrize("matrix", "abc")
def test_every_element_has_exactly_one_lane_and_register(matrix):
    lane_of, index_of = layout.owners(matrix)
    assert (lane_of >= 0).all()  # every element owned
    pairs = {(int(ln), int(i)) for ln, i in zip(lane_of.ravel(), index_of.ravel())}
    assert len(pairs) == lane_of.size == 32 * layout.PER_LANE[matrix]  # nobody owns two, none shared
    assert all(np.count_nonzero(lane_of == lane) == layout.PER_LANE[matrix] for lane in range(32))


def test_fragment_layout_matches_the_ptx_isa_figures():
    # PTX ISA, "Matrix fragments for mma.m16n8k16 with floating point type": lane 5 is
    # group 1, thread_in_group 1
    assert [layout.element("a", 5, i) for i in range(8)] == [(1, 2), (1, 3), (9, 2), (9, 3),
                                                             (1, 10), (1, 11), (9, 10), (9, 11)]
    assert [layout.element("b", 5, i) for i in range(4)] == [(2, 1), (3, 1), (10, 1), (11, 1)]
    assert [layout.element("c", 5, i) for i in range(4)] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    assert layout.owner("a", 15, 15) == (31, 7)
    with pytest.raises(ValueError, match="index must be in 0..3"):
        layout.element("c", 0, 4)


def test_warp_mma_from_fragments_is_the_tile_product(rng):
    A, B, C = rng.standard_normal((16, 16)), rng.standard_normal((16, 8)), rng.standard_normal((16, 8))
    d = layout.warp_mma(layout.gather("a", A), layout.gather("b", B), layout.gather("c", C))
    want = A.astype(np.float16).astype(np.float64) @ B.astype(np.float16) + C.astype(np.float32)
    np.testing.assert_allclose(layout.scatter("c", d), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(layout.scatter("a", layout.gather("a", A)), A)


def test_tensor_core_figures_draw():
    import matplotlib.pyplot as plt

    from gpulib.figures import tensor_cores
    from gpulib.style import use_korean_font

    use_korean_font()
    for fig in (tensor_cores.fragment_layout(), tensor_cores.pipeline(), tensor_cores.tap_boxes()):
        assert fig.axes
        plt.close(fig)


def test_the_tap_box_figure_names_the_box_the_kernel_asks_for(rng):
    """The patch moved by (r - padding, s - padding), as conv v4 asks TMA for it (the kernel's
    boxes themselves are checked through the convolution in test_wgmma)."""
    from gpulib.figures.tensor_cores import tap_box

    assert tap_box((0, 0), (0, 0), 1) == (-1, -1)
    assert tap_box((2, 64), (2, 1), 1) == (3, 64)
    assert tap_box((4, 8), (0, 4), 2) == (2, 10)


@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4"])
def test_every_conv_version_takes_prepared_operands_the_same_way(rng, version):
    """One convention: operands = prepare(X, W, b, padding, stride, version=...), then
    launch(operands, Y) with Y of operands.out_shape (poisoned: every element must be written)."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((2, 5, 9, 8)).astype(np.float32)
    W = rng.standard_normal((20, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    operands = tc_conv.prepare(X, W, b, 1, 1, version=version)
    Y = gpulib.poisoned(operands.out_shape)
    tc_conv.launch(operands, Y)
    want = tc_conv.reference(X, W, b, 1, 1)
    got = Y if version == "v1" else tc_conv.to_nchw(Y, want.shape)
    gpulib.validate(got, want, scale=ref.conv2d_magnitude(X, W, b, 1, 1).max(), name=f"conv {version}")


@pytest.mark.parametrize("algorithm", ["tc_implicit_gemm_wgmma", "tc_implicit_gemm_tma"])
def test_a_channels_last_fp16_model_calls_the_wgmma_conv_with_nothing_converted(rng, monkeypatch, algorithm):
    """X NHWC fp16 and KRSC fp16 filters, converted once up front, then conv2d(layout="NHWC"): Y
    NHWC float32 = the fp16 convolution, every element written, and no conversion kernel, host
    copy or allocation inside the call (each replaced by one that fails)."""
    from gpulib import arrays
    from gpulib import reference as ref
    from gpulib.conv import front
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((1, 12, 9, 8)).astype(np.float32)  # C = 12 -> 16 padded channels
    W = rng.standard_normal((20, 12, 3, 3)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    Xn, Wk, b_dev = tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W), gpulib.env.cuda.to_device(b)
    assert Xn.shape == (1, 9, 8, 16) and Wk.shape == (20, 3, 3, 16)
    Y = gpulib.poisoned((1, 9, 8, 20))

    def forbidden(*args, **kwargs):
        raise AssertionError("a conversion, copy or allocation inside the NHWC call")

    for module, name in ((tc_conv, "_to_nhwc16"), (tc_conv, "_to_nchw_rows"), (tc_conv, "to_host"),
                         (arrays, "to_host"), (tc_conv, "fp16_copy"), (tc_conv, "_workspace")):
        monkeypatch.setattr(module, name, forbidden)
    monkeypatch.setattr(tc_conv.cuda, "device_array", forbidden)
    front.conv2d(Xn, Wk, b_dev, 1, 1, algorithm=algorithm, out=Y, layout="NHWC")
    monkeypatch.undo()
    want = tc_conv.reference(X, W, b, 1, 1).transpose(0, 2, 3, 1)
    gpulib.validate(Y, want, scale=ref.conv2d_magnitude(X, W, b, 1, 1).max(), name=f"{algorithm} NHWC")


def test_the_nhwc_call_refuses_what_it_cannot_take():
    from gpulib.conv import front
    from gpulib.conv import tensorcore as tc_conv

    dev = gpulib.env.cuda.to_device
    X, Wk = dev(np.ones((1, 6, 6, 8), np.float16)), dev(np.ones((4, 3, 3, 8), np.float16))
    cases = [
        (dict(X=X, W=Wk, algorithm="direct"), r"layout='NHWC' needs an algorithm with an NHWC fp16 form, one of "
                                             r"\('tc_implicit_gemm_wgmma', 'tc_implicit_gemm_tma', "
                                             r"'tc_implicit_gemm_persistent', 'tc_implicit_gemm_halo', "
                                             r"'tc_implicit_gemm_pingpong'\), not 'direct'"),
        (dict(X=X, W=Wk, algorithm="auto"), "not 'auto'"),
        (dict(X=X, W=Wk, layout="NWHC"), r"layout must be one of \('NCHW', 'NHWC'\), not 'NWHC'"),
        (dict(X=np.ones((1, 6, 6, 8), np.float16), W=Wk), r"X \[N, H, W, C\] must be a device array of fp16"),
        (dict(X=dev(np.ones((1, 6, 6, 8), np.float32)), W=Wk), r"X \[N, H, W, C\] must have dtype float16"),
        (dict(X=dev(np.ones((1, 6, 6, 12), np.float16)), W=dev(np.ones((4, 3, 3, 12), np.float16))),
         "the same C, a multiple of 8"),
        (dict(X=X, W=dev(np.ones((4, 3, 3, 16), np.float16))), "the same C, a multiple of 8"),
        (dict(X=X, W=Wk, b=dev(np.ones(5, np.float32))), "b must have K = 4 values"),
        (dict(X=X, W=Wk, padding=-1), "padding"),
        (dict(X=X, W=dev(np.ones((4, 9, 9, 8), np.float16))), "filter_size 9 is larger than the padded size 8"),
        (dict(X=X, W=Wk, out=dev(np.ones((1, 4, 4, 4), np.float32))), r"out must have shape \(1, 6, 6, 4\)"),
    ]
    for kwargs, message in cases:
        args = dict(dict(b=None, padding=1, algorithm="tc_implicit_gemm_wgmma", layout="NHWC", out=None), **kwargs)
        with pytest.raises(ValueError, match=message):
            front.conv2d(args["X"], args["W"], args["b"], args["padding"], 1, algorithm=args["algorithm"],
                         out=args["out"], layout=args["layout"])
    with pytest.raises(ValueError, match=r"version must be one of \('v3', 'v4', 'v5', 'v6', 'v7'\), not 'v2'"):
        tc_conv.conv2d_tc_nhwc16(X, Wk, version="v2")


def test_the_persistent_conv_streams_boxes_across_its_patches(rng):
    """conv v5 on the simulator's two resident blocks: K = 70 makes two columns of filters (one
    block each, its 2 boxes of filters kept), each block runs through two 128-pixel patches
    with one ring of X boxes (its parities run on across patches); ragged C, K and patches."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((2, 5, 4, 10)).astype(np.float32)
    W = rng.standard_normal((70, 5, 2, 1)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    Y = tc_conv.conv2d_tc(X, W, b, 0, 1, out=gpulib.poisoned((2, 70, 3, 10)), version="v5")
    gpulib.validate(Y, tc_conv.reference(X, W, b, 0, 1), scale=ref.conv2d_magnitude(X, W, b, 0, 1).max(), name="conv v5")
    assert tc_conv.supports((64, 128, 3, 3), 1, version="v5").startswith("conv v5 keeps a block's filters")
    assert "stride 1" in tc_conv.supports((64, 16, 3, 3), 2, version="v5")


def test_the_persistent_conv_writes_fp16_nhwc_through_tma_stores(rng):
    """conv v5 with an fp16 Y, as cuDNN writes it: each patch's [128 pixels, 64 filters] box staged
    in shared memory and written by the copy engine, which leaves out the patch's pixels past the
    image (a 5x7 output in patches of 16x8); poisoned, so a pixel left unwritten fails."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((1, 5, 5, 7)).astype(np.float32)
    W = rng.standard_normal((16, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    Y = gpulib.poisoned((1, 5, 7, 16), np.float16)
    tc_conv.conv2d_tc_nhwc16(tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W), gpulib.env.cuda.to_device(b), 1, 1,
                             out=Y, version="v5")
    gpulib.validate(Y, tc_conv.reference(X, W, b, 1, 1).transpose(0, 2, 3, 1),
                    scale=ref.conv2d_magnitude(X, W, b, 1, 1).max(), name="conv v5, fp16 Y")
    Xn, Wk = tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W)
    with pytest.raises(ValueError, match="out in fp16 needs version 'v5', 'v6' or 'v7'"):
        tc_conv.conv2d_tc_nhwc16(Xn, Wk, out=Y, version="v3")
    with pytest.raises(ValueError, match="out in fp16 needs K a multiple of 8"):
        tc_conv.conv2d_tc_nhwc16(Xn, tc_conv.filters_krsc16(W[:12]), out=gpulib.poisoned((1, 5, 7, 12), np.float16),
                                 version="v5")


def test_the_halo_conv_reads_every_tap_of_a_filter_column_from_one_box(rng):
    """conv v6 on the simulator's two resident blocks: a 5x1 filter with padding 2 on 2 x 60
    images (2 x 64 out), one 2 x 64 patch each; each box is the patch's two rows and the four
    around them (zeros past the image), read by the five taps at five row offsets. Boxes of
    48 KiB leave room for a ring of three, which block 0's four patches run round. (The fp16
    test below has a 3x3 filter: three boxes a patch, one per column of it.)"""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((7, 5, 2, 60)).astype(np.float32)
    W = rng.standard_normal((12, 5, 5, 1)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    assert tc_conv.halo_tile(2, 64, 5) == (2, 64) and tc_conv.v6_stages((12, 8, 5, 1), 6 * 64) == 3
    assert tc_conv.halo_tile(56, 56, 3) == (16, 8)  # the 16.3 layer: 3 boxes of 18 x 8 pixels a patch
    Y = tc_conv.conv2d_tc(X, W, b, 2, 1, out=gpulib.poisoned((7, 12, 2, 64)), version="v6")
    gpulib.validate(Y, tc_conv.reference(X, W, b, 2, 1), scale=ref.conv2d_magnitude(X, W, b, 2, 1).max(), name="conv v6")
    assert tc_conv.supports((64, 128, 3, 3), 1, version="v6").startswith("conv v6 keeps a block's filters")
    assert "stride 1" in tc_conv.supports((64, 16, 3, 3), 2, version="v6")


def test_the_halo_conv_writes_fp16_nhwc_through_tma_stores(rng):
    """conv v6 with an fp16 Y: the same staged box and TMA store as v5 (a 5x7 output)."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((1, 5, 5, 7)).astype(np.float32)
    W = rng.standard_normal((16, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    Y = gpulib.poisoned((1, 5, 7, 16), np.float16)
    tc_conv.conv2d_tc_nhwc16(tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W), gpulib.env.cuda.to_device(b), 1, 1,
                             out=Y, version="v6")
    gpulib.validate(Y, tc_conv.reference(X, W, b, 1, 1).transpose(0, 2, 3, 1),
                    scale=ref.conv2d_magnitude(X, W, b, 1, 1).max(), name="conv v6, fp16 Y")


def test_the_pingpong_conv_multiplies_filters_by_pixels_round_its_ring(rng):
    """conv v7 on the simulator's two resident blocks: K = 70 makes two columns of filters (one
    block each), C = 72 two channel chunks (a 3x2 filter keeps 12 boxes of filters), two images
    of 8 x 12 outputs in 8 x 8 patches (the first inside the image, written without bounds
    tests by the threads whose filters all exist; four columns of the second outside): two
    patches for each multiplying warpgroup, 16 boxes through a ring of 13, so the
    parities wrap and each warpgroup skips the other's boxes. The filters are
    wgmma's A here and the pixels its B: a transposed accumulator written straight to Y,
    poisoned, so a pixel or filter left unwritten fails."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((2, 72, 8, 11)).astype(np.float32)
    W = rng.standard_normal((70, 72, 3, 2)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    assert tc_conv.v7_tile(8, 12, 3) == (8, 8) and tc_conv.v7_stages((70, 72, 3, 2), 10 * 8) == 12  # 13: too full
    assert tc_conv.v7_tile(56, 56, 3) == (8, 8)  # the 16.3 layer: 49 patches an image, none outside it
    Y = tc_conv.conv2d_tc(X, W, b, 1, 1, out=gpulib.poisoned((2, 70, 8, 12)), version="v7")
    gpulib.validate(Y, tc_conv.reference(X, W, b, 1, 1), scale=ref.conv2d_magnitude(X, W, b, 1, 1).max(), name="conv v7")
    assert tc_conv.supports((64, 128, 3, 3), 1, version="v7").startswith("conv v7 keeps a block's filters")
    assert "stride 1" in tc_conv.supports((64, 16, 3, 3), 2, version="v7")


def test_the_pingpong_conv_writes_fp16_nhwc_from_its_registers(rng):
    """conv v7 with an fp16 Y in its 14 x 8 patches (N = 112), K = 12 (not a multiple of 8: the
    results leave from registers, not through a TMA box) on a 14 x 8 output, and a 3x3 filter."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X = rng.standard_normal((1, 8, 14, 8)).astype(np.float32)
    W = rng.standard_normal((12, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    assert tc_conv.v7_tile(14, 8, 3) == (14, 8)
    Y = gpulib.poisoned((1, 14, 8, 12), np.float16)
    tc_conv.conv2d_tc_nhwc16(tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W), gpulib.env.cuda.to_device(b), 1, 1,
                             out=Y, version="v7")
    gpulib.validate(Y, tc_conv.reference(X, W, b, 1, 1).transpose(0, 2, 3, 1),
                    scale=ref.conv2d_magnitude(X, W, b, 1, 1).max(), name="conv v7, fp16 Y")


def test_a_call_on_the_same_arrays_repeats_its_checked_launch_and_reads_their_new_values(rng, monkeypatch):
    """conv2d_tc_nhwc16 keeps a checked launch per set of arrays: called again on the very same
    objects it launches without planning again, and the kernel reads what the arrays hold now
    (new values give the new result); another out array is planned afresh, and an array that
    is gone takes its launches with it."""
    import gc

    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    X, W = rng.standard_normal((1, 8, 4, 8)).astype(np.float32), rng.standard_normal((12, 8, 2, 1)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    Xn, Wk, bd = tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W), gpulib.env.cuda.to_device(b)
    Y = gpulib.poisoned((1, 5, 10, 12))
    tc_conv.conv2d_tc_nhwc16(Xn, Wk, bd, 1, 1, out=Y, version="v7")
    planned, original = [], tc_conv.launch_plan
    monkeypatch.setattr(tc_conv, "launch_plan", lambda *a: planned.append(a[0]) or original(*a))
    X2 = rng.standard_normal(X.shape).astype(np.float32)
    tc_conv.image_nhwc16(X2, out=Xn)  # new values in the same array
    Y2 = tc_conv.conv2d_tc_nhwc16(Xn, Wk, bd, 1, 1, out=Y, version="v7")
    assert Y2 is Y and planned == []
    gpulib.validate(Y, tc_conv.reference(X2, W, b, 1, 1).transpose(0, 2, 3, 1),
                    scale=ref.conv2d_magnitude(X2, W, b, 1, 1).max(), name="conv v7, repeated launch")
    other = gpulib.poisoned((1, 5, 10, 12))
    tc_conv.conv2d_tc_nhwc16(Xn, Wk, bd, 1, 1, out=other, version="v7")
    assert len(planned) == 1
    remembered = len(tc_conv._CALLS)
    del other
    gc.collect()
    assert len(tc_conv._CALLS) == remembered - 1
    monkeypatch.setattr(tc_conv, "MAX_CALLS", 1)  # one kept: Y's launch gives way, its callbacks detached
    callbacks = [f for entry in tc_conv._CALLS.values() if entry[0][3]() is Y for f in entry[2]]
    third = gpulib.poisoned((1, 5, 10, 12))
    tc_conv.conv2d_tc_nhwc16(Xn, Wk, bd, 1, 1, out=third, version="v7")
    assert len(tc_conv._CALLS) == 1 and callbacks and not any(f.alive for f in callbacks)
