"""16.6: the fused kernels of BookCNN(fused=True) (gpulib/cnn/fused.py), each against float64
on fresh random inputs, with every output poisoned first, and the fused model against the
unfused one."""

import numpy as np
import pytest

import gpulib
from gpulib import reference as ref
from gpulib.cnn import fused, layers
from gpulib.cnn.book_model import BookCNN
from gpulib.env import cuda

f32 = np.float32


def _windows_with_ties_and_negatives(rng, shape):
    """Random pre-ReLU values where some windows are all negative and some hold a tie for the maximum."""
    Z = rng.standard_normal(shape).astype(f32)
    Z[0, 0, :2, :2] = -np.abs(Z[0, 0, :2, :2]) - 0.5  # a window ReLU turns to zeros
    Z[-1, -1, 2:4, 2:4] = 1.25  # a tie: the first element is the window's maximum
    return Z


@pytest.mark.parametrize("shape", [(3, 4, 6, 6), (2, 3, 5, 7)], ids=["even", "odd"])
def test_relu_max_pool_gives_relu_then_pool(rng, shape):
    Z = _windows_with_ties_and_negatives(rng, shape)
    N, C, H, W = shape
    Y, argmax = gpulib.poisoned((N, C, H // 2, W // 2)), cuda.to_device(np.full((N, C, H // 2, W // 2), -1, np.int32))
    grid, block = layers.grid_nchw(*Y.shape)
    fused.relu_max_pool_kernel[grid, block](cuda.to_device(Z), 2, Y, argmax)
    want = np.maximum(ref.max_pool2d(Z.astype(np.float64), 2), 0.0)
    gpulib.validate(Y, want, rtol=1e-7)  # a maximum is exact (float32 values compared in float64)
    unfused_Y, unfused_argmax = layers.max_pool2d(layers.relu(Z), 2)
    np.testing.assert_array_equal(Y.copy_to_host(), unfused_Y.copy_to_host())
    positive = want > 0  # where ReLU passes the maximum on, it sits where the unfused pooling found it
    np.testing.assert_array_equal(argmax.copy_to_host()[positive], unfused_argmax.copy_to_host()[positive])
    assert (argmax.copy_to_host() >= 0).all() and (argmax.copy_to_host() < 4).all()


@pytest.mark.parametrize("N, n_in, classes", [(5, 48, 10), (3, 70, 3), (2, 33, 32)])
def test_dense_softmax_xent_matches_float64(rng, N, n_in, classes):
    X, W = rng.standard_normal((N, n_in)).astype(f32), rng.standard_normal((classes, n_in)).astype(f32) * 0.3
    b = rng.standard_normal(classes).astype(f32)
    labels = rng.integers(0, classes, N).astype(np.int32)
    loss, dZ = gpulib.poisoned(N), gpulib.poisoned((N, classes))
    fused.dense_softmax_xent_kernel[N, (fused.LANES, classes)](*map(cuda.to_device, (X, W, b, labels)), loss, dZ)
    Z = X.astype(np.float64) @ W.T.astype(np.float64) + b
    gpulib.validate(loss, ref.softmax_cross_entropy(Z, labels)[0], rtol=1e-5)
    gpulib.validate(dZ, ref.softmax_cross_entropy_grad(Z, labels), rtol=1e-5)


def test_dense_softmax_xent_keeps_a_confident_prediction(rng):
    """The label's logit far above the rest: the loss (≈ 1e-7) and its gradient survive float32."""
    N, n_in, classes = 2, 32, 10
    X = np.zeros((N, n_in), f32)
    X[:, 0] = 1.0
    W = np.zeros((classes, n_in), f32)
    W[3, 0] = 16.0
    b = rng.standard_normal(classes).astype(f32) * 0.01
    labels = np.full(N, 3, np.int32)
    loss, dZ = gpulib.poisoned(N), gpulib.poisoned((N, classes))
    fused.dense_softmax_xent_kernel[N, (fused.LANES, classes)](*map(cuda.to_device, (X, W, b, labels)), loss, dZ)
    Z = X.astype(np.float64) @ W.T.astype(np.float64) + b
    gpulib.validate(loss, ref.softmax_cross_entropy(Z, labels)[0], rtol=1e-4)
    gpulib.validate(dZ, ref.softmax_cross_entropy_grad(Z, labels), rtol=1e-4)
    assert (loss.copy_to_host() > 0).all() and (dZ.copy_to_host()[:, 3] < 0).all()


@pytest.mark.parametrize("N, n_in, classes", [(13, 70, 10), (8, 32, 3), (3, 31, 2)])
def test_dense_weight_bias_grad_matches_float64(rng, N, n_in, classes):
    dZ, X = rng.standard_normal((N, classes)).astype(f32), rng.standard_normal((N, n_in)).astype(f32)
    dW, db = gpulib.poisoned((classes, n_in)), gpulib.poisoned(classes)
    grid = (-(-(n_in + 1) // fused.LANES), classes)
    fused.dense_weight_bias_grad_kernel[grid, (fused.LANES, fused.SLICES)](cuda.to_device(dZ), cuda.to_device(X), dW, db)
    gpulib.validate(dW, dZ.T.astype(np.float64) @ X, rtol=1e-5)
    gpulib.validate(db, dZ.sum(axis=0, dtype=np.float64), rtol=1e-5)


@pytest.mark.parametrize("shape, classes", [((3, 4, 6, 6), 10), ((2, 3, 5, 7), 4)], ids=["even", "odd"])
def test_dense_pool_input_grad_matches_float64(rng, shape, classes):
    """dX of FC, back through the 2x2 max pooling and the ReLU before it, against the chain rule
    in float64 (the rows and columns past the last window get 0)."""
    N, C, H, W = shape
    Z = _windows_with_ties_and_negatives(rng, shape)
    pooled_shape = (N, C, H // 2, W // 2)
    Y, argmax = cuda.device_array(pooled_shape, f32), cuda.device_array(pooled_shape, np.int32)
    fused.relu_max_pool_kernel[layers.grid_nchw(*pooled_shape)](cuda.to_device(Z), 2, Y, argmax)
    features = C * (H // 2) * (W // 2)
    dZ, Wf = rng.standard_normal((N, classes)).astype(f32), rng.standard_normal((classes, features)).astype(f32)
    dX = gpulib.poisoned(shape)
    fused.dense_pool_input_grad_kernel[layers.grid_nchw(*shape)](cuda.to_device(dZ), cuda.to_device(Wf), Y, argmax, 2, dX)
    A = np.maximum(Z.astype(np.float64), 0.0)
    d_pooled = (dZ.astype(np.float64) @ Wf).reshape(pooled_shape)
    want = ref.max_pool2d_backward(A, d_pooled, 2) * (A > 0)
    gpulib.validate(dX, want, rtol=1e-5)
    assert (dX.copy_to_host()[want == 0] == 0).all()  # no gradient where ReLU or the pooling stops it


def test_sgd_update_six_updates_every_element_of_each(rng):
    shapes = [(4, 1, 3, 3), (4,), (5, 4, 3, 3), (5,), (10, 20), (10,)]
    params = [rng.standard_normal(s).astype(f32) for s in shapes]
    grads = [rng.standard_normal(s).astype(f32) for s in shapes]
    dev = [cuda.to_device(p) for p in params]
    flat = [a for p, g in zip(dev, grads) for a in (p.ravel(), cuda.to_device(g).ravel())]
    total = sum(p.size for p in params)
    fused.sgd_update_six_kernel[-(-total // 64), 64](*flat, f32(0.25))
    for p, g, d in zip(params, grads, dev):
        gpulib.validate(d, p.astype(np.float64) - 0.25 * g.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("backward", [{}, dict(reduction="staged", input_grad="flipped")], ids=["tree", "staged"])
def test_fused_model_gives_the_unfused_models_gradients(rng, backward):
    X = rng.standard_normal((6, 1, 8, 8)).astype(f32)
    y = rng.integers(0, 10, 6).astype(np.int32)
    unfused = BookCNN(channels=(3, 4), seed=7, algorithms_per_layer=("direct", "direct"), **backward)
    model = BookCNN(channels=(3, 4), seed=7, algorithms_per_layer=("direct", "direct"), fused=True, **backward)
    loss, grads = model.loss_and_grads(X, y)
    want_loss, want = unfused.loss_and_grads(X, y)
    assert loss == pytest.approx(want_loss, rel=1e-6)
    for g, w in zip(grads, want):
        w = w.copy_to_host()
        gpulib.validate(g, w.astype(np.float64), scale=float(np.abs(w).max()), rtol=1e-5)
    np.testing.assert_array_equal(model.predict(X), unfused.predict(X))
    before = model.host_params()
    model.step(grads, 0.5)
    for p, g, after in zip(before, grads, model.host_params()):
        gpulib.validate(after, p.astype(np.float64) - 0.5 * g.copy_to_host().astype(np.float64), rtol=1e-6)


def test_fused_model_refuses_too_many_classes():
    with pytest.raises(ValueError, match="fused=True takes at most 32"):
        BookCNN(classes=33, fused=True)
    with pytest.raises(ValueError, match="fused"):
        BookCNN(fused="yes")
