"""16.2 layers (convolution backward, ReLU, pooling) against the float64 reference."""

import numpy as np
import pytest
from conftest import MAX_EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from test_conv_direct import conv_cases, make

import gpulib
from gpulib import cnn
from gpulib import reference as ref


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(case=conv_cases())
def test_conv_backward_matches_reference(case):
    X, W, _ = make(case)
    p, s = case["padding"], case["stride"]
    Y_shape = ref.conv2d(X, W, None, p, s).shape
    dY = np.random.default_rng(case["seed"] + 7).standard_normal(Y_shape).astype(np.float32)
    outs = gpulib.poisoned(X.shape), gpulib.poisoned(W.shape), gpulib.poisoned((W.shape[0],))
    dX, dW, db = cnn.conv2d_backward(X, W, dY, p, s, out=outs)
    want = ref.conv2d_backward(X, W, dY, p, s)
    sizes = ref.conv2d_backward(np.abs(X), np.abs(W), np.abs(dY), p, s)  # sizes of summed terms
    for name, got, expected, size in zip(("dX", "dW", "db"), (dX, dW, db), want, sizes):
        gpulib.validate(got, expected, name=name, scale=size.max())


@st.composite
def flippable_cases(draw):
    """Layers the faster backward takes whole: square filters, stride 1, padding below the filter's size."""
    R = draw(st.integers(1, 5))
    padding = draw(st.integers(0, R - 1))
    return dict(N=draw(st.integers(1, 3)), C=draw(st.integers(1, 3)), H=draw(st.integers(max(1, R - 2 * padding), 11)),
                W=draw(st.integers(max(1, R - 2 * padding), 11)), K=draw(st.integers(1, 6)), R=R, S=R,
                padding=padding, stride=1, seed=draw(st.integers(0, 2**31)))


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(case=flippable_cases())
def test_conv_backward_staged_and_flipped_match_reference(case):
    # 16.6's faster backward: dW and db summed image by image from shared memory, dX as the forward
    # convolution of dY with the filters turned
    X, W, _ = make(case)
    p, s = case["padding"], case["stride"]
    dY = np.random.default_rng(case["seed"] + 7).standard_normal(ref.conv2d(X, W, None, p, s).shape).astype(np.float32)
    outs = gpulib.poisoned(X.shape), gpulib.poisoned(W.shape), gpulib.poisoned((W.shape[0],))
    got = cnn.conv2d_backward(X, W, dY, p, s, out=outs, reduction="staged", input_grad="flipped")
    want = ref.conv2d_backward(X, W, dY, p, s)
    sizes = ref.conv2d_backward(np.abs(X), np.abs(W), np.abs(dY), p, s)
    for name, g, expected, size in zip(("dX", "dW", "db"), got, want, sizes):
        gpulib.validate(g, expected, name=name, scale=size.max())


@pytest.mark.parametrize("algorithm", ["direct", "implicit_precomp_gemm"])
def test_conv_backward_staged_groups_images_and_flips_through_the_forward_algorithm(rng, monkeypatch, algorithm):
    # GROUPS lowered to 3, so that each block sums more than one image into its row of partial sums
    from gpulib.reductions import staged

    monkeypatch.setattr(staged, "GROUPS", 3)  # blocks 0 to 2 take images 0, 3, 6 / 1, 4 / 2, 5
    X = rng.standard_normal((7, 3, 6, 5)).astype(np.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    dY = rng.standard_normal((7, 4, 6, 5)).astype(np.float32)
    want = ref.conv2d_backward(X, W, dY, 1, 1)
    sizes = ref.conv2d_backward(np.abs(X), np.abs(W), np.abs(dY), 1, 1)
    outs = gpulib.poisoned(X.shape), gpulib.poisoned(W.shape), gpulib.poisoned((4,))
    got = cnn.conv2d_backward(X, W, dY, 1, 1, out=outs, reduction="staged", input_grad="flipped", algorithm=algorithm)
    for name, g, expected, size in zip(("dX", "dW", "db"), got, want, sizes):
        gpulib.validate(g, expected, name=name, scale=size.max())


@pytest.mark.parametrize("stride, padding, fits, algorithm", [(1, 1, False, "direct"), (2, 1, True, "direct"),
                                                             (1, 3, True, "direct"), (1, 1, True, "gemm")],
                         ids=["image-too-big", "stride-2", "padding-3", "gemm-has-its-own"])
def test_conv_backward_staged_and_flipped_fall_back_where_they_cannot_run(rng, monkeypatch, stride, padding, fits,
                                                                          algorithm):
    from gpulib.reductions import staged

    if not fits:
        monkeypatch.setattr(staged, "STAGED_BYTES", 64)  # smaller than any image here
    X = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    W = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    dY = rng.standard_normal(ref.conv2d(X, W, None, padding, stride).shape).astype(np.float32)
    outs = gpulib.poisoned(X.shape), gpulib.poisoned(W.shape), gpulib.poisoned((3,))
    got = cnn.conv2d_backward(X, W, dY, padding, stride, out=outs, reduction="staged", input_grad="flipped",
                              algorithm=algorithm)
    for name, g, expected in zip(("dX", "dW", "db"), got, ref.conv2d_backward(X, W, dY, padding, stride)):
        gpulib.validate(g, expected, name=name)


@pytest.mark.parametrize("reduction, need_dX", [("staged", False), ("staged", True), ("tree", False)],
                         ids=["folded-into-staged", "with-dX", "tree"])
def test_conv_backward_takes_relus_backward_with_relu_output(rng, reduction, need_dX):
    # dY is the gradient of H = ReLU(the layer's output): the pass must use dY where H > 0 and 0 elsewhere
    X = rng.standard_normal((3, 2, 6, 5)).astype(np.float32)
    W = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    H = np.maximum(rng.standard_normal((3, 4, 6, 5)), 0.0).astype(np.float32)  # about half of it 0
    dY = rng.standard_normal(H.shape).astype(np.float32)
    masked = dY * (H > 0)
    outs = gpulib.poisoned(X.shape) if need_dX else None, gpulib.poisoned(W.shape), gpulib.poisoned((4,))
    got = cnn.conv2d_backward(X, W, dY, 1, 1, out=outs, need_dX=need_dX, reduction=reduction, relu_output=H)
    want = ref.conv2d_backward(X, W, masked, 1, 1)
    sizes = ref.conv2d_backward(np.abs(X), np.abs(W), np.abs(masked), 1, 1)
    for name, g, expected, size in zip(("dX", "dW", "db"), got, want, sizes):
        if g is not None:
            gpulib.validate(g, expected, name=name, scale=size.max())
    assert (got[0] is None) == (not need_dX)
    with pytest.raises(ValueError, match="relu_output must have dY's shape"):
        cnn.conv2d_backward(X, W, dY, 1, 1, relu_output=np.ascontiguousarray(H[:, :2]))


def test_conv_backward_refuses_an_unknown_input_grad():
    with pytest.raises(ValueError, match="unknown input_grad 'scatter'; choose one of"):
        cnn.conv2d_backward(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 3, 3), np.float32),
                            np.ones((1, 1, 1, 1), np.float32), input_grad="scatter")


@st.composite
def pool_cases(draw):
    size = draw(st.integers(1, 3))
    return dict(N=draw(st.integers(1, 2)), C=draw(st.integers(1, 3)), H=draw(st.integers(size, 17)),
                W=draw(st.integers(size, 17)), size=size, seed=draw(st.integers(0, 2**31)))


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(case=pool_cases())
def test_pooling_forward_and_backward(case):
    rng = np.random.default_rng(case["seed"])
    shape, size = (case["N"], case["C"], case["H"], case["W"]), case["size"]
    X = rng.standard_normal(shape).astype(np.float32)
    out_shape = (shape[0], shape[1], shape[2] // size, shape[3] // size)
    dY = rng.standard_normal(out_shape).astype(np.float32)
    Y, argmax = cnn.max_pool2d(X, size, out=(gpulib.poisoned(out_shape), gpulib.poisoned(out_shape, np.int32)))
    gpulib.validate(Y, ref.max_pool2d(X, size), name="max pool")
    dX = cnn.max_pool2d_backward(dY, argmax, shape, size, out=gpulib.poisoned(shape))
    gpulib.validate(dX, ref.max_pool2d_backward(X, dY, size), name="max pool dX")
    gpulib.validate(cnn.avg_pool2d(X, size, out=gpulib.poisoned(out_shape)), ref.avg_pool2d(X, size),
                    name="avg pool")
    dX = cnn.avg_pool2d_backward(dY, shape, size, out=gpulib.poisoned(shape))
    gpulib.validate(dX, ref.avg_pool2d_backward(X, dY, size), name="avg pool dX")


def test_max_pool_routes_to_the_first_maximum_on_ties():
    X = np.zeros((1, 1, 2, 2), np.float32)  # all four tie
    Y, argmax = cnn.max_pool2d(X)
    dX = cnn.max_pool2d_backward(np.ones((1, 1, 1, 1), np.float32), argmax, X.shape)
    np.testing.assert_array_equal(dX.copy_to_host()[0, 0], [[1, 0], [0, 0]])


def test_relu_forward_and_backward(rng):
    Z = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    H = cnn.relu(Z, out=gpulib.poisoned(Z.shape))
    gpulib.validate(H, np.maximum(Z, 0), name="relu")
    dH = rng.standard_normal(Z.shape).astype(np.float32)
    dZ = cnn.relu_backward(H, dH, out=gpulib.poisoned(Z.shape))
    gpulib.validate(dZ, dH * (Z > 0), name="relu dZ")


@pytest.mark.parametrize("call, message", [
    (lambda X: cnn.max_pool2d(X, 9), "pooling window is larger than the 8x6 image"),
    (lambda X: cnn.max_pool2d(X, 0), "size must be an integer of at least 1, not 0"),
    (lambda X: cnn.max_pool2d(X, 2.0), "size must be an integer of at least 1, not float 2.0"),
    (lambda X: cnn.avg_pool2d(X[0]), "must be 4-D"),
    (lambda X: cnn.avg_pool2d_backward(np.ones((2, 3, 3, 3), np.float32), X.shape), r"dY must have shape \(2, 3, 4, 3\)"),
    (lambda X: cnn.relu_backward(X, X[:, :2].copy()), "H has shape"),
    (lambda X: cnn.conv2d_backward(X, np.ones((4, 3, 3, 3), np.float32), np.ones((2, 4, 5, 4), np.float32)),
     r"dY must have the output's shape \(2, 4, 6, 4\)"),
    (lambda X: cnn.conv2d_backward(X, np.ones((4, 3, 3, 3), np.float32), np.ones((2, 4, 6, 4), np.float32),
                                   out=(None, None)), r"out must be a tuple of 3 arrays or Nones \(dX, dW, db\)"),
    (lambda X: cnn.max_pool2d(X, 2, out=np.ones((2, 3, 4, 3), np.float32)), "out must be a tuple of 2"),
])
def test_bad_input(call, message):
    X = np.ones((2, 3, 8, 6), np.float32)
    with pytest.raises(ValueError, match=message):
        call(X)


def test_max_pool_propagates_nan_as_the_reference_does(rng):
    X = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    X[0, 0, 1, 1] = np.nan          # one NaN among numbers
    X[0, 1, 2:, 2:] = np.nan        # a window of NaNs only
    X[0, 1, 0, 0:2] = -np.inf       # -inf is a number to compare, not a NaN
    Y, argmax = cnn.max_pool2d(X, 2, out=(gpulib.poisoned((1, 2, 2, 2)), gpulib.poisoned((1, 2, 2, 2), np.int32)))
    gpulib.validate(Y, ref.max_pool2d(X, 2), name="max pool with NaN")
    assert argmax.copy_to_host()[0, 0, 0, 0] == 3  # the NaN's place in its window
    dY = rng.standard_normal((1, 2, 2, 2)).astype(np.float32)
    dX = cnn.max_pool2d_backward(dY, argmax, X.shape, 2, out=gpulib.poisoned(X.shape))
    gpulib.validate(dX, ref.max_pool2d_backward(X, dY, 2), name="max pool dX with NaN")


# ---- 16.2's rules of the convolution (gpulib.cnn.anatomy), held against the kernels
from gpulib.cnn import anatomy  # noqa: E402


@pytest.mark.parametrize("padding, stride, H", [(0, 1, 7), (1, 1, 7), (1, 2, 8), (1, 2, 9), (0, 3, 10), (2, 2, 7)])
def test_transposed_conv_is_the_kernels_dX(padding, stride, H, rng):
    X = rng.standard_normal((2, 3, H, H + 1)).astype(np.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    dY = rng.standard_normal(ref.conv2d(X, W, None, padding, stride).shape).astype(np.float32)
    want = anatomy.transposed_conv(dY, W, X.shape, padding, stride)
    np.testing.assert_allclose(want, ref.conv2d_backward(X, W, dY, padding, stride)[0], atol=1e-9)
    dX = cnn.conv2d_backward(X, W, dY, padding, stride)[0]
    scale = ref.conv2d_backward(np.abs(X), np.abs(W), np.abs(dY), padding, stride)[0].max()
    gpulib.validate(dX, want, scale=scale, name="dX as a transposed convolution")


def test_channel_terms_and_1x1_and_receptive_field(rng):
    X = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    Y = cnn.conv2d_forward(X, W, b, padding=1)
    terms = anatomy.per_channel_terms(X, W, padding=1, n=1, k=2)
    gpulib.validate(Y.copy_to_host()[1, 2], terms.sum(axis=0) + b[2], scale=ref.conv2d_magnitude(X, W, b, 1).max(),
                    name="sum over channels")
    W1 = rng.standard_normal((5, 3, 1, 1)).astype(np.float32)
    gpulib.validate(cnn.conv2d_forward(X, W1, b[:1].repeat(5)), anatomy.conv1x1_as_matmul(X, W1, b[:1].repeat(5)),
                    scale=ref.conv2d_magnitude(X, W1, b[:1].repeat(5)).max(), name="1x1 as a matrix product")
    with pytest.raises(ValueError, match=r"\[K, C, 1, 1\]"):
        anatomy.conv1x1_as_matmul(X, W)
    layers = [("conv", 3, 1), ("conv", 3, 1), ("pool", 2, 2), ("conv", 3, 1)]
    sizes = [r["size"] for r in anatomy.receptive_field(layers)]
    assert sizes == [3, 5, 6, 10]
    # brute force along one axis: which inputs reach the middle output of the whole stack
    n_in = 40
    reach = np.eye(n_in)  # row i: an impulse at input i
    for _, R, stride in layers:
        reach = np.stack([[row[j:j + R].max() for j in range(0, len(row) - R + 1, stride)] for row in reach])
    middle = reach.shape[1] // 2
    assert np.count_nonzero(reach[:, middle]) == sizes[-1]


def test_strides_of_the_two_layouts():
    assert anatomy.strides_in("NCHW", (2, 64, 56, 56)) == dict(n=64 * 56 * 56 * 4, c=56 * 56 * 4, h=56 * 4, w=4)
    assert anatomy.strides_in("NHWC", (2, 64, 56, 56)) == dict(n=64 * 56 * 56 * 4, c=4, h=56 * 64 * 4, w=64 * 4)


def test_the_16_2_figures_draw(rng):
    import matplotlib.pyplot as plt

    from gpulib.figures import cnn_components as F
    from gpulib.style import use_korean_font

    use_korean_font()
    X, W = rng.standard_normal((1, 3, 6, 6)), rng.standard_normal((2, 3, 3, 3))
    figs = [F.padding_stride(), F.receptive_field([("conv", 3, 1), ("pool", 2, 2)]), F.channel_sum(X, W),
            F.transposed_conv(rng.standard_normal((1, 1, 3, 3)), rng.standard_normal((1, 1, 3, 3)), (1, 1, 6, 6), 1, 2)]
    assert all(fig.axes for fig in figs)
    for fig in figs:
        plt.close(fig)
