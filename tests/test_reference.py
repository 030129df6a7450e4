"""The float64 references themselves, against naive loops and finite differences."""

import numpy as np
import pytest

from gpulib import reference as ref


def naive_conv(X, W, b, padding, stride):
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    N, _, _, _ = X.shape
    K, _, R, S = W.shape
    Ho = ref.conv_output_size(X.shape[2], R, padding, stride)
    Wo = ref.conv_output_size(X.shape[3], S, padding, stride)
    Y = np.zeros((N, K, Ho, Wo))
    for n in range(N):
        for k in range(K):
            for y in range(Ho):
                for x in range(Wo):
                    window = Xp[n, :, y * stride:y * stride + R, x * stride:x * stride + S]
                    Y[n, k, y, x] = (W[k] * window).sum() + b[k]
    return Y


@pytest.mark.parametrize("padding, stride", [(0, 1), (1, 1), (1, 2), (2, 3)])
def test_conv2d_against_loops_and_its_backward_against_finite_differences(rng, padding, stride):
    X = rng.standard_normal((2, 3, 7, 6))
    W = rng.standard_normal((4, 3, 3, 2))
    b = rng.standard_normal(4)
    Y = ref.conv2d(X, W, b, padding, stride)
    np.testing.assert_allclose(Y, naive_conv(X, W, b, padding, stride), atol=1e-12)
    dY = rng.standard_normal(Y.shape)
    dX, dW, db = ref.conv2d_backward(X, W, dY, padding, stride)
    loss = lambda: float((ref.conv2d(X, W, b, padding, stride) * dY).sum())  # noqa: E731
    for theta, grad in ((X, dX), (W, dW), (b, db)):
        numeric = ref.numerical_grad(loss, theta)
        np.testing.assert_allclose([numeric[i] for i in range(theta.size)], grad.reshape(-1), atol=1e-6)


@pytest.mark.parametrize("forward, backward", [(ref.max_pool2d, ref.max_pool2d_backward),
                                               (ref.avg_pool2d, ref.avg_pool2d_backward)])
def test_pooling_backward_against_finite_differences(rng, forward, backward):
    X = rng.standard_normal((2, 2, 5, 4))  # odd height: the last row is dropped
    dY = rng.standard_normal((2, 2, 2, 2))
    numeric = ref.numerical_grad(lambda: float((forward(X) * dY).sum()), X)
    np.testing.assert_allclose([numeric[i] for i in range(X.size)], backward(X, dY).reshape(-1), atol=1e-6)


def test_max_pool_values():
    X = np.arange(16.0).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(ref.max_pool2d(X)[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(ref.avg_pool2d(X)[0, 0], [[2.5, 4.5], [10.5, 12.5]])


def test_softmax_rows_are_distributions(rng):
    P = ref.softmax(rng.standard_normal((5, 7)) * 30)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert (P >= 0).all()


def test_cross_entropy_against_the_definition(rng):
    Z = rng.standard_normal((6, 4))
    y = rng.integers(0, 4, 6)
    loss, P = ref.softmax_cross_entropy(Z, y)
    naive = -np.log(np.exp(Z[np.arange(6), y]) / np.exp(Z).sum(axis=1))
    np.testing.assert_allclose(loss, naive)
    g = ref.softmax_cross_entropy_grad(Z, y)
    numeric = ref.numerical_grad(lambda: float(ref.softmax_cross_entropy(Z, y)[0].mean()), Z)
    np.testing.assert_allclose([numeric[i] for i in range(Z.size)], g.reshape(-1), atol=1e-8)


@pytest.mark.parametrize("activation", ["identity", "relu", "sigmoid", "tanh"])
def test_activation_grad_from_output(rng, activation):
    z = rng.standard_normal(50) + 0.05  # keep away from ReLU's kink
    eps = 1e-6
    numeric = (ref.activate(z + eps, activation) - ref.activate(z - eps, activation)) / (2 * eps)
    np.testing.assert_allclose(ref.activation_grad(ref.activate(z, activation), activation), numeric, atol=1e-6)


def test_mlp_gradients_against_finite_differences(rng):
    params = [(rng.standard_normal((5, 4)), rng.standard_normal(5)),
              (rng.standard_normal((3, 5)), rng.standard_normal(3))]
    X = rng.standard_normal((7, 4))
    y = rng.integers(0, 3, 7)
    _, grads = ref.mlp_loss_and_grads(params, X, y, "tanh")
    for (W, b), (dW, db) in zip(params, grads):
        for theta, grad in ((W, dW), (b, db)):
            numeric = ref.numerical_grad(lambda: ref.mlp_loss(params, X, y, "tanh"), theta)
            np.testing.assert_allclose([numeric[i] for i in range(theta.size)], grad.reshape(-1), atol=1e-7)


def test_unknown_activation():
    with pytest.raises(ValueError, match="unknown activation"):
        ref.activate(np.zeros(2), "swish")
