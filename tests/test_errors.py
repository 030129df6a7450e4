"""Bad input must raise a ValueError that names the problem, before any kernel launches."""

import numpy as np
import pytest

from gpulib.mlp import MLP, dense_backward, dense_forward, layer_forward, sgd_update, softmax_cross_entropy


@pytest.fixture
def layer(rng):
    X = rng.standard_normal((4, 6)).astype(np.float32)
    W = rng.standard_normal((3, 6)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    return X, W, b


def test_inner_dimensions_must_match(layer):
    X, W, b = layer
    with pytest.raises(ValueError, match=r"W has shape \(3, 5\) but X has 6 features"):
        dense_forward(X, W[:, :5].copy(), b)


def test_bias_length_must_match(layer):
    X, W, b = layer
    with pytest.raises(ValueError, match="b has 2 entries but W has 3 rows"):
        dense_forward(X, W, b[:2].copy())


def test_wrong_dtype(layer):
    X, W, b = layer
    with pytest.raises(ValueError, match=r"X \[N, n_in\] must have dtype float32, not float64"):
        dense_forward(X.astype(np.float64), W, b)


def test_wrong_rank(layer):
    X, W, b = layer
    with pytest.raises(ValueError, match="must be 2-D"):
        dense_forward(X[0], W, b)


def test_non_contiguous_layout(layer):
    X, W, b = layer
    with pytest.raises(ValueError, match="C-contiguous"):
        dense_forward(np.asfortranarray(X), W, b)


def test_not_an_array(layer):
    _, W, b = layer
    with pytest.raises(ValueError, match="must be a NumPy or device array, not list"):
        dense_forward([[1.0] * 6], W, b)


def test_unknown_activation(layer):
    X, W, b = layer
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        dense_forward(X, W, b, "gelu")


def test_wrong_output_shape(layer):
    X, W, b = layer
    import gpulib
    with pytest.raises(ValueError, match=r"out must have shape \(4, 3\)"):
        dense_forward(X, W, b, out=gpulib.poisoned((3, 4)))


def test_layer_forward_vector_length(layer):
    _, W, b = layer
    with pytest.raises(ValueError, match="W has 6 columns but h_prev has 5 entries"):
        layer_forward(W, b, np.ones(5, np.float32))


def test_backward_shapes(layer):
    X, W, b = layer
    with pytest.raises(ValueError, match=r"dH must have shape \(4, 3\)"):
        dense_backward(X, W, np.ones((4, 3), np.float32), np.ones((4, 2), np.float32))


def test_labels_out_of_range():
    Z = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 4\)"):
        softmax_cross_entropy(Z, np.array([0, 4, 1], np.int32))


def test_labels_wrong_dtype_and_length():
    Z = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="dtype int32"):
        softmax_cross_entropy(Z, np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="labels has 2 entries but there are 3 samples"):
        softmax_cross_entropy(Z, np.array([0, 1], np.int32))


def test_sgd_needs_device_parameters_and_a_positive_rate(rng):
    import gpulib
    theta = rng.standard_normal(4).astype(np.float32)
    with pytest.raises(ValueError, match="theta must be a device array"):
        sgd_update(theta, theta, 0.1)
    for lr in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match=r"lr \(the learning rate\) must be a positive finite number"):
            sgd_update(gpulib.cuda.to_device(theta), theta, lr)
    with pytest.raises(ValueError, match=r"lr \(the learning rate\) must be a positive number, not str '0.1'"):
        sgd_update(gpulib.cuda.to_device(theta), theta, "0.1")


def test_mlp_input_width(rng):
    model = MLP([6, 4, 3])
    with pytest.raises(ValueError, match="X has 5 features but the MLP expects 6"):
        model.forward(np.ones((2, 5), np.float32))
    with pytest.raises(ValueError, match="at least two positive layer widths"):
        MLP([6])


def test_labels_on_the_device_are_range_checked_too(rng):
    import gpulib

    Z = rng.standard_normal((3, 10)).astype(np.float32)
    for bad in ([0, 1, 10], [0, -1, 2]):
        labels = gpulib.cuda.to_device(np.array(bad, np.int32))
        with pytest.raises(ValueError, match=r"labels must lie in \[0, 10\)"):
            softmax_cross_entropy(Z, labels)
    model = MLP([6, 4, 10])
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 10\), found values 0..10"):
        model.loss_and_grads(np.ones((3, 6), np.float32), gpulib.cuda.to_device(np.array([0, 10, 2], np.int32)))


def test_accuracy_wants_one_label_per_row():
    from gpulib.cnn.model import SmallCNN

    model = MLP([6, 4, 10])
    X = np.ones((3, 6), np.float32)
    with pytest.raises(ValueError, match=r"labels \[N\] must be 1-D, but has shape \(3, 1\)"):
        model.accuracy(X, np.zeros((3, 1), np.int32))
    assert 0.0 <= model.accuracy(X, np.zeros(3, np.int64)) <= 1.0  # any integer type
    with pytest.raises(ValueError, match=r"labels \[N\] must be 1-D"):
        SmallCNN(channels=1).accuracy(np.ones((3, 1, 8, 8), np.float32), np.zeros((3, 1), np.int32))


def test_from_params_checks_that_the_layers_chain(rng):
    W1, b1 = np.ones((4, 6), np.float32), np.ones(4, np.float32)
    W2, b2 = np.ones((3, 5), np.float32), np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"the layers do not chain: params\[1\].W takes 5 inputs but params\[0\].W gives 4"):
        MLP.from_params([(W1, b1), (W2, b2)])
    with pytest.raises(ValueError, match=r"params\[0\].b has 3 entries but params\[0\].W has 4 rows"):
        MLP.from_params([(W1, b1[:3].copy())])
