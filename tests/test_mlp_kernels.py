"""16.1 kernels against the float64 reference, on random shapes and random (never zero) data."""

import numpy as np
import pytest
from conftest import MAX_EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib
from gpulib import reference as ref
from gpulib.mlp import (
    MLP,
    dense_backward,
    dense_forward,
    layer_forward,
    sgd_update,
    softmax_cross_entropy,
    softmax_cross_entropy_backward,
)

ACTIVATIONS = st.sampled_from(["identity", "relu", "sigmoid", "tanh"])
dims = st.integers(min_value=1, max_value=37)  # odd sizes: not multiples of the 16x16 block


def normal(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(n_in=dims, n_out=dims, act=ACTIVATIONS, seed=st.integers(0, 2**31))
def test_layer_forward_one_sample(n_in, n_out, act, seed):
    W, b, h_prev = normal(seed, n_out, n_in), normal(seed + 1, n_out), normal(seed + 2, n_in)
    out = gpulib.poisoned((n_out,))
    layer_forward(W, b, h_prev, act, out=out)
    scale = ref.dense_magnitude(h_prev[None, :], W, b).max()  # terms can cancel: see validate
    gpulib.validate(out, ref.layer_forward(W, b, h_prev, act), name=f"h ({act})", scale=scale)


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(n=dims, n_in=dims, n_out=dims, act=ACTIVATIONS, seed=st.integers(0, 2**31))
def test_dense_forward_batch(n, n_in, n_out, act, seed):
    X, W, b = normal(seed, n, n_in), normal(seed + 1, n_out, n_in), normal(seed + 2, n_out)
    out = gpulib.poisoned((n, n_out))
    dense_forward(X, W, b, act, out=out)
    scale = ref.dense_magnitude(X, W, b).max()
    gpulib.validate(out, ref.dense_forward(X, W, b, act), name=f"H ({act})", scale=scale)


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(n=dims, n_in=dims, n_out=dims, act=ACTIVATIONS, seed=st.integers(0, 2**31))
def test_dense_backward_batch(n, n_in, n_out, act, seed):
    X, W, b = normal(seed, n, n_in), normal(seed + 1, n_out, n_in), normal(seed + 2, n_out)
    H = ref.dense_forward(X, W, b, act).astype(np.float32)
    dH = normal(seed + 3, n, n_out)
    outs = gpulib.poisoned((n, n_in)), gpulib.poisoned((n_out, n_in)), gpulib.poisoned((n_out,))
    dX, dW, db = dense_backward(X, W, H, dH, act, out=outs)
    want_dX, want_dW, want_db = ref.dense_backward(X, W, H, dH, act)
    abs_dZ = np.abs(dH * ref.activation_grad(H, act))  # sizes of the summed terms
    gpulib.validate(dX, want_dX, name="dX", scale=(abs_dZ @ np.abs(W)).max())
    gpulib.validate(dW, want_dW, name="dW", scale=(abs_dZ.T @ np.abs(X)).max())
    gpulib.validate(db, want_db, name="db", scale=abs_dZ.sum(axis=0).max())


def test_first_layer_backward_skips_dX(rng):
    X, W = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    H = ref.dense_forward(X, W, np.zeros(4), "relu").astype(np.float32)
    dX, dW, db = dense_backward(X, W, H, np.ones((5, 4), np.float32), "relu", need_dX=False)
    assert dX is None and dW.shape == (4, 3) and db.shape == (4,)


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(n=dims, classes=st.integers(2, 12), seed=st.integers(0, 2**31))
def test_softmax_cross_entropy_and_its_gradient(n, classes, seed):
    Z = normal(seed, n, classes) * 5
    labels = np.random.default_rng(seed).integers(0, classes, n).astype(np.int32)
    P, loss = softmax_cross_entropy(Z, labels, out=(gpulib.poisoned((n, classes)), gpulib.poisoned((n,))))
    want_loss, want_P = ref.softmax_cross_entropy(Z, labels)
    gpulib.validate(P, want_P, name="P")
    gpulib.validate(loss, want_loss, name="loss")
    dZ = softmax_cross_entropy_backward(P, labels, out=gpulib.poisoned((n, classes)))
    gpulib.validate(dZ, ref.softmax_cross_entropy_grad(Z, labels), name="dZ")


def test_confident_predictions_keep_their_small_loss():
    # log(1 + 1e-6) in float32 would round to 0 or 1.2e-7; log1p keeps ~1e-6
    Z = np.array([[20.0, 6.2, 0.0], [0.0, -14.0, 0.0]], np.float32)
    labels = np.array([0, 0], np.int32)
    _, loss = softmax_cross_entropy(Z, labels, out=(None, gpulib.poisoned((2,))))
    want = ref.softmax_cross_entropy(Z, labels)[0]
    assert want[0] < 1e-5
    np.testing.assert_allclose(loss.copy_to_host(), want, rtol=1e-5)


def test_confident_predictions_keep_their_small_gradient():
    # P rounds to 1.0 in float32, so P - 1 would be 0; the kernel sums the others instead
    Z = np.array([[25.0, 0.0]], np.float32)
    labels = np.array([0], np.int32)
    P, _ = softmax_cross_entropy(Z, labels)
    dZ = softmax_cross_entropy_backward(P, labels, out=gpulib.poisoned((1, 2)))
    want = ref.softmax_cross_entropy_grad(Z, labels)
    assert abs(want[0, 0]) < 1e-10
    np.testing.assert_allclose(dZ.copy_to_host(), want, rtol=1e-5)


def test_relu_lets_nan_through():
    X = np.array([[np.nan, 1.0]], np.float32)
    H = dense_forward(X, np.ones((1, 2), np.float32), np.zeros(1, np.float32), "relu")
    assert np.isnan(H.copy_to_host()[0, 0])


def test_softmax_is_stable_for_huge_logits():
    Z = np.array([[1000.0, 0.0, -1000.0], [88.0, 89.0, 90.0]], np.float32)
    labels = np.array([0, 1], np.int32)
    P, loss = softmax_cross_entropy(Z, labels)
    gpulib.validate(loss, ref.softmax_cross_entropy(Z, labels)[0], name="loss")
    assert np.isfinite(P.copy_to_host()).all()


def test_sgd_update(rng):
    theta = rng.standard_normal((7, 5)).astype(np.float32)
    grad = rng.standard_normal((7, 5)).astype(np.float32)
    d_theta = gpulib.cuda.to_device(theta)
    sgd_update(d_theta, grad, 0.25)
    gpulib.validate(d_theta, theta.astype(np.float64) - 0.25 * grad, name="theta")


def random_mlp(rng, sizes, activation):
    params = [(rng.standard_normal((o, i)).astype(np.float32) * 0.5,
               rng.standard_normal(o).astype(np.float32) * 0.1)
              for i, o in zip(sizes[:-1], sizes[1:])]
    return params, MLP.from_params(params, activation)


@pytest.mark.parametrize("activation", ["relu", "sigmoid", "tanh"])
def test_mlp_gradients_match_the_reference(rng, activation):
    sizes = [6, 9, 7, 4]
    params, model = random_mlp(rng, sizes, activation)
    X = rng.standard_normal((11, 6)).astype(np.float32)
    y = rng.integers(0, 4, 11).astype(np.int32)
    loss, grads = model.loss_and_grads(X, y)
    want_loss, want_grads = ref.mlp_loss_and_grads(params, X, y, activation)
    assert abs(loss - want_loss) <= 1e-5 * abs(want_loss)
    for layer, ((dW, db), (rW, rb)) in enumerate(zip(grads, want_grads)):
        gpulib.validate(dW, rW, name=f"dW{layer + 1}")
        gpulib.validate(db, rb, name=f"db{layer + 1}")


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_mlp_gradients_match_finite_differences(rng, activation):
    """The kernels' backpropagation against (L(θ+ε) - L(θ-ε)) / 2ε of the float64 loss."""
    sizes = [5, 8, 3]
    params, model = random_mlp(rng, sizes, activation)
    X = rng.standard_normal((9, 5)).astype(np.float32)
    y = rng.integers(0, 3, 9).astype(np.int32)
    _, grads = model.loss_and_grads(X, y)
    params64 = [(W.astype(np.float64), b.astype(np.float64)) for W, b in params]
    for layer, (W, b) in enumerate(params64):
        for theta, grad in ((W, grads[layer][0]), (b, grads[layer][1])):
            numeric = ref.numerical_grad(lambda: ref.mlp_loss(params64, X, y, activation), theta)
            numeric = np.array([numeric[i] for i in range(theta.size)]).reshape(theta.shape)
            gpulib.validate(grad, numeric, rtol=1e-4, name=f"layer {layer + 1} gradient")


def test_one_sgd_step_lowers_the_loss(rng):
    params, model = random_mlp(rng, [8, 16, 5], "relu")
    X = rng.standard_normal((20, 8)).astype(np.float32)
    y = rng.integers(0, 5, 20).astype(np.int32)
    before, grads = model.loss_and_grads(X, y)
    model.step(grads, 0.05)
    after, _ = model.loss_and_grads(X, y)
    assert after < before
    # and the step is exactly θ - η∇θ
    (W1, _), (dW1, _) = params[0], grads[0]
    gpulib.validate(model.params[0][0], W1.astype(np.float64) - 0.05 * dW1.copy_to_host(), name="W1")
