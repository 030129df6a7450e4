"""The small CNN: the whole network's gradient against finite differences, and training."""

import numpy as np

import gpulib
from gpulib import reference as ref
from gpulib.cnn.model import SmallCNN, reference_loss
from gpulib.data import load_digits


def test_whole_network_gradient_matches_finite_differences(rng):
    model = SmallCNN(channels=3, seed=2)
    X = rng.random((5, 1, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, 5).astype(np.int32)
    loss, grads = model.loss_and_grads(X, y)
    params = [p.astype(np.float64) for p in model.host_params()]
    assert abs(loss - reference_loss(params, X, y)) < 1e-5
    for name, theta, grad in zip(("conv W", "conv b", "fc W", "fc b"), params, grads):
        picks = rng.choice(theta.size, size=min(theta.size, 12), replace=False)
        numeric = ref.numerical_grad(lambda: reference_loss(params, X, y), theta, indices=picks)
        got = grad.copy_to_host().reshape(-1)[picks]
        want = np.array([numeric[int(i)] for i in picks])
        scale = np.abs(grad.copy_to_host()).max()
        assert np.abs(got - want).max() <= 1e-4 * scale, name


def test_training_on_digits_improves_accuracy():
    d = load_digits()
    X = d.X_train[:16].reshape(-1, 1, 8, 8)
    y = d.y_train[:16]
    model = SmallCNN(channels=2, seed=0)
    before = model.accuracy(X, y)
    losses = []
    for _ in range(3):
        loss, grads = model.loss_and_grads(X, y)
        losses.append(loss)
        model.step(grads, 0.5)
    assert losses[-1] < losses[0]
    assert model.accuracy(X, y) >= before


def test_the_mlp_training_loop_trains_the_cnn_on_flattened_digits():
    from gpulib.data import Split
    from gpulib.mlp import train

    d = load_digits()
    small = Split(d.X_train[:32], d.y_train[:32], d.X_test[:16], d.y_test[:16])
    history = train(SmallCNN(channels=2), small, lr=0.5, epochs=1, batch_size=16, progress=False)
    assert len(history.step_loss) == 2 and len(history.epoch_test_acc) == 1


import pytest  # noqa: E402

from gpulib.cnn import layers as L  # noqa: E402
from gpulib.conv import algorithms  # noqa: E402


@pytest.fixture(scope="module")
def direct_step():
    """One batch and the direct convolution's loss and gradients on it, shared by the algorithms."""
    rng = np.random.default_rng(4)
    X = rng.random((3, 1, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, 3).astype(np.int32)
    loss, grads = SmallCNN(channels=2, seed=4).loss_and_grads(X, y)
    return X, y, loss, [g.copy_to_host().astype(np.float64) for g in grads]


@pytest.mark.parametrize("algorithm", [a for a in algorithms.NAMES + ("auto",) if a != "direct"])
def test_every_conv_algorithm_is_a_drop_in_for_the_direct_one(algorithm, direct_step):
    X, y, direct_loss, direct_grads = direct_step
    loss, grads = SmallCNN(channels=2, seed=4, conv_algorithm=algorithm).loss_and_grads(X, y)
    # the tensor-core algorithms round X and W to fp16 (11 significant bits): their loss and
    # gradients match to fp16's precision, the others to fp32's
    fp16 = algorithm in algorithms.ALGORITHMS and algorithms.ALGORITHMS[algorithm].precision == "fp16"
    rtol = 2e-3 if fp16 else 1e-5
    assert abs(loss - direct_loss) < rtol * max(1.0, abs(direct_loss))
    for got, want in zip(grads, direct_grads):
        gpulib.validate(got, want, scale=np.abs(want).max() + 1e-12, rtol=rtol, name=algorithm)


def test_unknown_conv_algorithm_is_a_value_error():
    with pytest.raises(ValueError, match="unknown conv_algorithm 'winograd2'"):
        SmallCNN(conv_algorithm="winograd2")
    with pytest.raises(ValueError, match="algorithm must be one of .*, not 'im2col'"):
        L.conv2d_forward(np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32), algorithm="im2col")
    with pytest.raises(ValueError, match="algorithm 'winograd' cannot run this layer: .* 3x3 filter and stride 1"):
        L.conv2d_forward(np.ones((1, 1, 6, 6), np.float32), np.ones((1, 1, 5, 5), np.float32), algorithm="winograd")
