"""16.6: a training step recorded once and replayed, and a launch bound once per layout
(gpulib/playbook/replay.py)."""

import numpy as np
import pytest

from gpulib.cnn.book_model import BookCNN
from gpulib.env import cuda, on_gpu
from gpulib.gemm import api
from gpulib.launch import BoundLaunch
from gpulib.playbook.replay import RecordingError, ReplayedStep, record


@cuda.jit
def _add_one(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] += 1.0


def _batch(rng, n):
    return rng.standard_normal((n, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, n).astype(np.int32)


@pytest.mark.parametrize("algorithms, backward", [
    (("direct", "direct"), {}), (("gemm", "direct"), {}),
    (("direct", "direct"), dict(reduction="staged", input_grad="flipped")),
    (("direct", "direct"), dict(reduction="staged", input_grad="flipped", fused=True))],
    ids=["direct", "gemm", "staged-flipped", "fused-staged-flipped"])
def test_replayed_steps_equal_eager_steps(rng, algorithms, backward):
    """Three steps on three different batches: the replayed model ends with the eager model's
    parameters bit for bit and returns the same losses (the same kernels in the same order)."""
    eager = BookCNN(channels=(2, 3), algorithms_per_layer=algorithms, seed=5, **backward)
    replayed = BookCNN(channels=(2, 3), algorithms_per_layer=algorithms, seed=5, **backward)
    step = ReplayedStep(replayed, batch=3, lr=0.1)
    for _ in range(3):
        X, y = _batch(rng, 3)
        loss, grads = eager.loss_and_grads(X, y)
        eager.step(grads, 0.1)
        assert step(X, y) == loss
        for a, b in zip(eager.host_params(), replayed.host_params()):
            np.testing.assert_array_equal(a, b)
    names = step.recording.names
    if backward.get("fused"):  # one launch in place of each group of small kernels
        assert names.count("sgd_update_six_kernel") == 1 and names.count("relu_kernel") == 1, names
        assert {"relu_max_pool_kernel", "dense_softmax_xent_kernel", "dense_weight_bias_grad_kernel",
                "dense_pool_input_grad_kernel"} <= set(names), names
        assert not {"sgd_update_kernel", "softmax_xent_kernel", "max_pool_kernel", "dense_forward_kernel",
                    "relu_backward_kernel"} & set(names), names
        assert len(names) == 14, names  # conv 2, ReLU 1, the fused 5, conv2's backward 4, conv1's 2
    else:
        assert names.count("sgd_update_kernel") == 6 and "softmax_xent_kernel" in names
    if "gemm" in algorithms:  # im2col + GEMM: the library's product is replayed as a call
        assert {"numpy matmul", "cuBLAS sgemm"} & set(names), names
    if backward:  # the faster backward's kernels, and none of the ones they replace
        assert names.count("weight_grad_staged_kernel") == 2 and names.count("flip_filters_kernel") == 1, names
        assert not {"conv2d_input_grad_kernel", "weight_grad_tree_kernel", "bias_grad_tree_kernel"} & set(names)


def test_a_replay_launches_the_recorded_kernel_again():
    a = cuda.to_device(np.arange(5, dtype=np.float32))
    with record() as rec:
        _add_one[1, 8](a)
    rec.replay()
    rec.replay()
    np.testing.assert_array_equal(a.copy_to_host(), np.arange(5) + 3.0)
    assert rec.names == ["_add_one"]


def test_a_replayed_library_call_reads_its_operands_again(rng):
    A, B = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    A_dev, B_dev, C_dev = cuda.to_device(A), cuda.to_device(B), cuda.device_array((3, 2), np.float32)
    with record() as rec:
        api.library_matmul(A_dev, B_dev, C_dev)
    A2 = rng.standard_normal((3, 4)).astype(np.float32)
    A_dev.copy_to_device(A2)
    rec.replay()
    np.testing.assert_allclose(C_dev.copy_to_host(), A2 @ B, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("copy", ["to_host", "to_device", "cuda.to_device"])
def test_a_recording_refuses_copies_and_undoes_its_patches(copy):
    a = cuda.to_device(np.ones(4, np.float32))
    do = {"to_host": lambda: a.copy_to_host(),
          "to_device": lambda: a.copy_to_device(np.zeros(4, np.float32)),
          "cuda.to_device": lambda: cuda.to_device(np.zeros(4, np.float32))}[copy]
    with pytest.raises(RecordingError, match="a replay would not repeat it"):
        with record():
            do()
    do()  # allowed again once the recording has ended
    np.testing.assert_array_equal(cuda.to_device(np.full(2, 7, np.float32)).copy_to_host(), [7, 7])


def test_recordings_do_not_nest_and_graphs_need_a_gpu():
    with record():
        with pytest.raises(RecordingError, match="do not nest"):
            with record():
                pass
    if not on_gpu():
        with record() as rec:
            pass
        with pytest.raises(RecordingError, match="need a GPU"):
            rec.graph()


def test_replayed_step_checks_its_inputs(rng):
    model = BookCNN(channels=(2, 2), algorithms_per_layer=("direct", "direct"))
    with pytest.raises(ValueError, match="batch"):
        ReplayedStep(model, batch=0, lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        ReplayedStep(model, batch=2, lr=float("nan"))
    step = ReplayedStep(model, batch=2, lr=0.1)
    X, y = _batch(rng, 3)
    with pytest.raises(ValueError, match="built for batches of 2"):
        step(X, y)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 10\)"):
        step(X[:2], np.array([0, 10], np.int32))
    with pytest.raises(ValueError, match="images of shape"):
        step(np.zeros((2, 1, 6, 6), np.float32), y[:2])
    assert step.recording is None  # nothing was recorded, nothing launched


@pytest.mark.parametrize("bad", ["nan", "inf", "label"])
def test_replayed_step_checks_device_inputs_in_its_staging_launch(rng, bad):
    """Device inputs are checked by the launch that copies them in: a NaN, an infinity or a label
    out of range is refused with the eager step's message and leaves the parameters as they
    were; the next good batch steps as the eager model does."""
    eager = BookCNN(channels=(2, 2), algorithms_per_layer=("direct", "direct"), seed=2)
    model = BookCNN(channels=(2, 2), algorithms_per_layer=("direct", "direct"), seed=2)
    step = ReplayedStep(model, batch=3, lr=0.1)
    X, y = _batch(rng, 3)
    step(cuda.to_device(X), cuda.to_device(y))  # recorded
    eager.step(eager.loss_and_grads(X, y)[1], 0.1)
    before = model.host_params()
    X_bad, y_bad = X.copy(), y.copy()
    if bad == "label":
        y_bad[2] = 10
    else:
        X_bad[1, 0, 4, 5] = np.nan if bad == "nan" else -np.inf
    message = r"labels must lie in \[0, 10\)" if bad == "label" else "NaN or infinite"
    with pytest.raises(ValueError, match=message):
        step(cuda.to_device(X_bad), cuda.to_device(y_bad))
    for a, b in zip(before, model.host_params()):
        np.testing.assert_array_equal(a, b)
    X2, y2 = _batch(rng, 3)
    assert step(cuda.to_device(X2), cuda.to_device(y2)) == eager.loss_and_grads(X2, y2)[0]
    eager.step(eager.loss_and_grads(X2, y2)[1], 0.1)
    for a, b in zip(eager.host_params(), model.host_params()):
        np.testing.assert_array_equal(a, b)


@cuda.jit
def _scaled_copy(src, dst, factor):
    i = cuda.grid(1)
    if i < dst.shape[0]:
        dst[i] = src[i] * factor


def test_a_bound_launch_takes_new_arrays_and_scalars_and_rebinds_on_a_new_layout(rng):
    """Same layout: the recorded call with the new addresses and scalar; a longer array (another
    layout) binds afresh. On a GPU the second call really is the bound path (checked)."""
    launch = BoundLaunch(_scaled_copy, 1, 32)
    for n, factor in ((8, 2.0), (8, -3.0), (13, 0.5)):
        src = cuda.to_device(rng.standard_normal(n).astype(np.float32))
        dst = cuda.to_device(np.full(n, np.nan, np.float32))
        launch(src, dst, np.float32(factor))
        np.testing.assert_allclose(dst.copy_to_host(), src.copy_to_host() * factor, rtol=1e-6)
        if on_gpu():
            assert launch._layout is not None and launch._layout[0][0] == (n,)


def test_the_profiler_and_a_recording_see_every_call_of_a_bound_launch(rng):
    """A bound launch's calls after the first skip Numba's launch on a GPU; the profiler still
    times each, and a recording still names it, keeps its arrays and replays it."""
    from gpulib.playbook.profile import Profiler

    launch = BoundLaunch(_scaled_copy, 1, 32)
    src = cuda.to_device(rng.standard_normal(8).astype(np.float32))
    dst = cuda.device_array(8, np.float32)
    with Profiler() as prof:
        launch(src, dst, np.float32(2.0))  # binds
        launch(src, dst, np.float32(3.0))  # the bound call
    assert [entry.kernel for entry in prof.launches] == ["_scaled_copy", "_scaled_copy"]
    with record() as rec:
        launch(src, dst, np.float32(4.0))
    assert rec.names == ["_scaled_copy"] and any(a is src for kept in rec.keep if isinstance(kept, tuple) for a in kept)
    src.copy_to_device(np.ones(8, np.float32))
    rec.replay()
    np.testing.assert_array_equal(dst.copy_to_host(), np.full(8, 4.0, np.float32))
