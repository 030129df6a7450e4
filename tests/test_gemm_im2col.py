"""16.4: the GEMM versions against NumPy, im2col/col2im against the reference, and convolution
through im2col + GEMM and through implicit GEMM against the float64 reference."""

import numpy as np
import pytest
from conftest import MAX_EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from test_conv_direct import conv_cases, make

import gpulib
from gpulib import gemm
from gpulib import reference as ref
from gpulib.arrays import to_device
from gpulib.conv import im2col as im2col_conv
from gpulib.conv.algorithms import ALGORITHMS


@pytest.mark.parametrize("version", gemm.VERSIONS)
@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(M=st.integers(1, 40), K=st.integers(1, 24), N=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_gemm_matches_numpy_on_sizes_that_are_not_tile_multiples(version, M, K, N, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = gemm.matmul(A, B, version=version, out=gpulib.poisoned((M, N)))
    scale = (np.abs(A).astype(np.float64) @ np.abs(B)).max()
    gpulib.validate(C, A.astype(np.float64) @ B, scale=scale, name=version)


@pytest.mark.parametrize("shape", [gemm.kernels.V3, gemm.kernels.V3_SMALL, gemm.kernels.V3_SIM,
                                   dict(BM=64, BN=32, BK=8, TM=4, TN=2)],
                         ids=["gpu-default", "gpu-few-rows", "sim-default", "rectangular"])
def test_gemm_v3_tile_shapes_on_a_ragged_product(shape, rng):
    # 130 x 70 x 21: one full 128-row tile plus 2 rows, and K not a multiple of BK
    A = rng.standard_normal((130, 21)).astype(np.float32)
    B = rng.standard_normal((21, 70)).astype(np.float32)
    C = gemm.matmul(A, B, version="v3", out=gpulib.poisoned((130, 70)), shape=shape)
    gpulib.validate(C, A.astype(np.float64) @ B, scale=(np.abs(A).astype(np.float64) @ np.abs(B)).max())


@pytest.mark.parametrize("version, shape", [
    ("v4", gemm.kernels.V4), ("v4", gemm.kernels.V4_SIM), ("v4", dict(BM=64, BN=32, BK=16, TM=4, TN=2)),
    ("v5", gemm.kernels.V5), ("v5", gemm.kernels.V5_SIM), ("v5", dict(BM=32, BN=64, BK=16, TM=4, TN=8)),
    ("v6", gemm.kernels.V6), ("v6", gemm.kernels.V6_SIM), ("v6", dict(BM=32, BN=64, BK=16, TM=4, TN=8))],
    ids=["v4-gpu-default", "v4-sim-default", "v4-rectangular-deep", "v5-gpu-default", "v5-sim-default",
         "v5-rectangular-deep", "v6-gpu-default", "v6-sim-default", "v6-two-warps-deep"])
def test_gemm_v4_v5_v6_tile_shapes_on_a_ragged_product(version, shape, rng):
    # (BM + 2) x (BN + 14) x (5·BK - 3): 2 x 2 blocks, the second of each partly outside C, and
    # five BK steps (the last one short), so each shared buffer holds a tile more than once
    M, N, K = shape["BM"] + 2, shape["BN"] + 14, 5 * shape["BK"] - 3
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = gemm.matmul(A, B, version=version, out=gpulib.poisoned((M, N)), shape=shape)
    gpulib.validate(C, A.astype(np.float64) @ B, scale=(np.abs(A).astype(np.float64) @ np.abs(B)).max())


@pytest.mark.parametrize("shape", [gemm.kernels.V5_SIM, dict(BM=32, BN=16, BK=8, TM=8, TN=4)], ids=["sim", "tall"])
def test_gemm_v5_blocks_inside_and_at_the_edge(shape, rng):
    # K a multiple of BK and two block rows that fit: the first column of blocks takes the path
    # without bounds tests, the second (3 columns past BN) the checked one
    M, N, K = 2 * shape["BM"], shape["BN"] + 3, 3 * shape["BK"]
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = gemm.matmul(A, B, version="v5", out=gpulib.poisoned((M, N)), shape=shape)
    gpulib.validate(C, A.astype(np.float64) @ B, scale=(np.abs(A).astype(np.float64) @ np.abs(B)).max())


def test_gemm_v5_multiplies_a_batch_in_one_launch(rng):
    # three different products, ragged, one launch (blockIdx.z picks the product)
    A = rng.standard_normal((3, 21, 13)).astype(np.float32)
    B = rng.standard_normal((3, 13, 19)).astype(np.float32)
    C = gpulib.poisoned((3, 21, 19))
    gemm.api.launch_v5(to_device(A), to_device(B), C)
    want = np.einsum("zmk,zkn->zmn", A.astype(np.float64), B.astype(np.float64))
    scale = np.einsum("zmk,zkn->zmn", np.abs(A).astype(np.float64), np.abs(B)).max()
    gpulib.validate(C, want, scale=float(scale))


@pytest.mark.parametrize("shape", [gemm.kernels.V6_SIM, dict(BM=16, BN=64, BK=8, TM=4, TN=4)], ids=["sim", "4x4"])
def test_gemm_v6_blocks_inside_and_at_the_edge(shape, rng):
    # as for version 5: the first column of blocks takes the path without bounds tests
    M, N, K = 2 * shape["BM"], shape["BN"] + 3, 3 * shape["BK"]
    A = rng.standard_normal((2, M, K)).astype(np.float32)
    B = rng.standard_normal((2, K, N)).astype(np.float32)
    C = gpulib.poisoned((2, M, N))
    gemm.api.launch_v6(to_device(A), to_device(B), C, shape)
    want = np.einsum("zmk,zkn->zmn", A.astype(np.float64), B.astype(np.float64))
    gpulib.validate(C, want, scale=float(np.einsum("zmk,zkn->zmn", np.abs(A).astype(np.float64), np.abs(B)).max()))


@pytest.mark.parametrize("shape, message", [
    (dict(BM=32, BN=64, BK=4, TM=8, TN=8), "BK must be a multiple of 8, not 4"),
    (dict(BM=32, BN=64, BK=8, TM=8, TN=2), "TM and TN must be multiples of 4, not TM=8, TN=2"),
    (dict(BM=16, BN=64, BK=8, TM=8, TN=8), "warp tile is 32x64 for 8x8 per thread: it must divide the block tile, not "
                                             "BM=16, BN=64")], ids=["bk", "runs", "warp-tile"])
def test_gemm_v6_refuses_tiles_it_cannot_run(shape, message):
    with pytest.raises(ValueError, match=message):
        gemm.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), version="v6", shape=shape)


def test_gemm_v5_needs_runs_of_four():
    with pytest.raises(ValueError, match="TM and TN must be multiples of 4, not TM=2, TN=4"):
        gemm.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), version="v5",
                    shape=dict(BM=16, BN=16, BK=4, TM=2, TN=4))


@pytest.mark.parametrize("version", gemm.VERSIONS)
@pytest.mark.parametrize("trans_a, trans_b", [(True, False), (False, True), (True, True)])
def test_gemm_transposed_operands_are_views(version, trans_a, trans_b, rng):
    A = rng.standard_normal((13, 9)).astype(np.float32)  # op(A) [13, 9]
    B = rng.standard_normal((9, 11)).astype(np.float32)  # op(B) [9, 11]
    A_stored = np.ascontiguousarray(A.T) if trans_a else A
    B_stored = np.ascontiguousarray(B.T) if trans_b else B
    C = gemm.matmul(A_stored, B_stored, version=version, out=gpulib.poisoned((13, 11)), trans_a=trans_a,
                    trans_b=trans_b)
    gpulib.validate(C, A.astype(np.float64) @ B, scale=(np.abs(A).astype(np.float64) @ np.abs(B)).max(), name=version)


def test_gemm_rejects_mismatched_inner_dimensions():
    with pytest.raises(ValueError, match=r"inner dimensions do not match: A is \(3, 4\) and B is \(5, 2\)"):
        gemm.matmul(np.ones((3, 4), np.float32), np.ones((5, 2), np.float32))
    with pytest.raises(ValueError, match="unknown version 'v7'"):
        gemm.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), version="v7")


def test_library_is_numpy_without_a_gpu():
    assert gemm.library_name() in ("cublas", "numpy", "numpy (CuPy is not installed)")
    if gpulib.on_simulator():
        assert gemm.library_name() == "numpy"


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(case=conv_cases())
def test_im2col_and_col2im_match_the_reference(case):
    X, W, _ = make(case)
    R, S, p, s = case["R"], case["S"], case["padding"], case["stride"]
    want = ref.im2col(X, R, S, p, s)
    for version in im2col_conv.IM2COL_VERSIONS:  # sizes at run time (v1), compiled in (v2), unsigned 32-bit (v3)
        got = im2col_conv.im2col(X, R, S, p, s, out=gpulib.poisoned(want.shape), version=version)
        gpulib.validate(got, want, name=f"X_col ({version})")
    dX_col = np.random.default_rng(case["seed"]).standard_normal(want.shape).astype(np.float32)
    dX = im2col_conv.col2im(dX_col, X.shape, R, S, p, s, out=gpulib.poisoned(X.shape))
    gpulib.validate(dX, ref.col2im(dX_col, X.shape, R, S, p, s), name="dX",
                    scale=ref.col2im(np.abs(dX_col), X.shape, R, S, p, s).max())


def test_im2col_v3_refuses_offsets_beyond_32_bits(monkeypatch):
    monkeypatch.setattr(im2col_conv, "U32_LIMIT", 100)
    X = np.ones((1, 2, 5, 5), np.float32)
    with pytest.raises(ValueError, match="32-bit offsets.*X_col 450"):
        im2col_conv.im2col(X, 3, 3, 1, 1, version="v3")
    im2col_conv.im2col(X, 3, 3, 1, 1, version="v2")  # the others have no such limit
    gpulib.validate(im2col_conv.im2col(X, 3, 3, 1, 1, out=gpulib.poisoned((18, 25))), ref.im2col(X, 3, 3, 1, 1),
                    name="the default falls back to version 2")


def test_col2im_is_the_adjoint_of_im2col(rng):
    X = rng.standard_normal((2, 3, 7, 6))
    dX_col = rng.standard_normal((3 * 9, 2 * 7 * 6))
    lhs = (ref.im2col(X, 3, 3, 1, 1) * dX_col).sum()
    rhs = (X * ref.col2im(dX_col, X.shape, 3, 3, 1, 1)).sum()
    assert abs(lhs - rhs) < 1e-9 * abs(lhs)


def test_reference_conv_is_w_mat_times_x_col(rng):
    X = rng.standard_normal((2, 3, 6, 5))
    W = rng.standard_normal((4, 3, 3, 3))
    Y_mat = W.reshape(4, -1) @ ref.im2col(X, 3, 3, 1, 1)
    np.testing.assert_allclose(Y_mat.reshape(4, 2, 6, 5).transpose(1, 0, 2, 3), ref.conv2d(X, W, None, 1))


VARIANTS = [  # every GEMM form of the registry, and im2col with the book's own GEMM
    ("im2col + gemm v3", lambda X, W, b, p, s, out: im2col_conv.conv2d_im2col(X, W, b, p, s, out=out, gemm="v3")),
    ("im2col + library", ALGORITHMS["gemm"].run),
    ("implicit gemm", ALGORITHMS["implicit_gemm"].run),
    ("implicit precomp gemm", ALGORITHMS["implicit_precomp_gemm"].run),
]


@pytest.mark.parametrize("name, conv", VARIANTS, ids=[v[0] for v in VARIANTS])
@settings(max_examples=max(3, MAX_EXAMPLES // 2), deadline=None)
@given(case=conv_cases())
def test_gemm_convolutions_match_the_float64_reference(name, conv, case):
    X, W, b = make(case)
    p, s = case["padding"], case["stride"]
    want = ref.conv2d(X, W, b, p, s)  # the direct kernels are held to the same reference
    Y = conv(X, W, b, p, s, out=gpulib.poisoned(want.shape))
    scale = ref.conv2d_magnitude(X, W, b, p, s).max()
    gpulib.validate(Y, want, scale=scale, name=name)


@pytest.mark.parametrize("gemm_version", ["v3", "library"])
@settings(max_examples=max(3, MAX_EXAMPLES // 3), deadline=None)
@given(case=conv_cases())
def test_conv_backward_through_col2im_matches_the_reference(gemm_version, case):
    X, W, _ = make(case)
    p, s = case["padding"], case["stride"]
    dY = np.random.default_rng(case["seed"] + 1).standard_normal(ref.conv2d(X, W, None, p, s).shape)
    dY = dY.astype(np.float32)
    want_dX, want_dW, _ = ref.conv2d_backward(X, W, dY, p, s)
    out = gpulib.poisoned(X.shape), gpulib.poisoned(W.shape)  # both outputs must be written
    dX, dW = im2col_conv.conv2d_im2col_backward(X, W, dY, p, s, gemm=gemm_version, out=out)
    assert dX is out[0] and dW is out[1]
    mags = ref.conv2d_backward(np.abs(X), np.abs(W), np.abs(dY), p, s)
    gpulib.validate(dW, want_dW, scale=mags[1].max(), name="dW")
    gpulib.validate(dX, want_dX, scale=mags[0].max(), name="dX")


@pytest.mark.parametrize("gemm_version", ["v3", "library"])
def test_conv_backward_without_dX_gives_none_and_the_same_dW(gemm_version, rng):
    X = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    W = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    dY = rng.standard_normal(ref.conv2d(X, W, None, 1, 2).shape).astype(np.float32)
    none_dX, dW = im2col_conv.conv2d_im2col_backward(X, W, dY, 1, 2, need_dX=False, gemm=gemm_version)
    assert none_dX is None
    mags = ref.conv2d_backward(np.abs(X), np.abs(W), np.abs(dY), 1, 2)
    gpulib.validate(dW, ref.conv2d_backward(X, W, dY, 1, 2)[1], scale=mags[1].max(), name="dW")


def test_gemm_convolutions_reject_a_filter_larger_than_the_image():
    X = np.ones((1, 2, 4, 4), np.float32)
    W = np.ones((3, 2, 5, 5), np.float32)
    for _, conv in VARIANTS:
        with pytest.raises(ValueError, match="larger than the padded 4x4 image"):
            conv(X, W, None, 0, 1, out=None)


def test_the_chapters_cublas_argument_order_gives_the_row_major_product(rng):
    from gpulib.gemm.colmajor import conv_gemm_the_chapters_way

    X = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    X_col = ref.im2col(X, 3, 3, 1, 1).astype(np.float32)
    W_mat = W.reshape(4, -1)
    Y_mat = conv_gemm_the_chapters_way(X_col, W_mat)
    np.testing.assert_allclose(Y_mat, W_mat.astype(np.float64) @ X_col, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Y_mat.reshape(4, 2, 6, 5).transpose(1, 0, 2, 3), ref.conv2d(X, W, None, 1),
                               rtol=1e-4, atol=1e-4)


def test_sgemm_stand_in_follows_column_major_semantics(rng):
    from gpulib.gemm.colmajor import sgemm

    A = rng.standard_normal((3, 4)).astype(np.float32)  # the math matrices
    B = rng.standard_normal((4, 2)).astype(np.float32)
    C = np.ones((3, 2), np.float32)
    a, b, c = A.T.copy().ravel(), B.T.copy().ravel(), C.T.copy().ravel()  # column-major buffers
    sgemm("N", "N", 3, 2, 4, 2.0, a, 3, b, 4, 0.5, c, 3)
    np.testing.assert_allclose(c.reshape(2, 3).T, 2 * A @ B + 0.5 * C, rtol=1e-5)
    at = A.copy().ravel()  # row-major A is column-major Aᵀ: ask for op = T
    c2 = np.zeros(6, np.float32)
    sgemm("T", "N", 3, 2, 4, 1.0, at, 4, b, 4, 0.0, c2, 3)
    np.testing.assert_allclose(c2.reshape(2, 3).T, A @ B, rtol=1e-5)
    with pytest.raises(ValueError, match="leading dimension 2 is smaller than the 3 rows"):
        sgemm("N", "N", 3, 2, 4, 1.0, a, 2, b, 4, 0.0, c, 3)


def test_v3_picks_a_64_row_tile_for_a_product_of_at_most_64_rows():
    from gpulib.gemm import api

    if gpulib.on_simulator():
        assert api.v3_shape(10) == api.v3_shape(1000) == gemm.kernels.V3_SIM
    else:
        assert api.v3_shape(64) == gemm.kernels.V3_SMALL and api.v3_shape(65) == api.v3_shape() == gemm.kernels.V3
