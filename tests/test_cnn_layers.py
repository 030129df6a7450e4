"""16.2 layers (convolution backward, ReLU, pooling) against the float64 reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib
from gpulib import cnn
from gpulib import reference as ref
from conftest import MAX_EXAMPLES
from test_conv_direct import conv_cases, make


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
