"""16.6: the book's model, its profiler and memory estimator, the tree reductions, the roofline,
im2col with compiled-in sizes, grids beyond 65,535 planes, and the CUDA C kernels (on a GPU)."""


import numpy as np
import pytest

import gpulib
from gpulib import reference as ref
from gpulib.bench import book_model as bench
from gpulib.bench import measure as measuring
from gpulib.cnn import layers as CL
from gpulib.cnn.book_model import BookCNN, reference_grads, reference_loss
from gpulib.conv import cuda_c, direct
from gpulib.playbook import memory, patterns, roofline
from gpulib.playbook.profile import Profiler
from gpulib.reductions.softmax import softmax_rows


def _batch(rng, n):
    X = rng.random((n, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)
    return X, y


@pytest.mark.parametrize("algorithms, backward", [
    (("direct", "direct"), {}), (("gemm", "implicit_precomp_gemm"), {}),
    (("direct", "implicit_precomp_gemm"), dict(reduction="staged", input_grad="flipped")),
    (("direct", "direct"), dict(fused=True)),
    (("direct", "implicit_precomp_gemm"), dict(reduction="staged", input_grad="flipped", fused=True))],
    ids=["direct", "gemm-implicit", "staged-flipped", "fused", "fused-staged-flipped"])
def test_book_cnn_gradients_match_float64(rng, algorithms, backward):
    model = BookCNN(channels=(2, 3), algorithms_per_layer=algorithms, seed=int(rng.integers(1000)), **backward)
    X, y = _batch(rng, 2)
    loss, grads = model.loss_and_grads(X, y)
    params = model.host_params()
    assert loss == pytest.approx(reference_loss(params, X, y), rel=1e-5)
    for g, want in zip(grads, reference_grads(params, X, y)):
        gpulib.validate(g, want, scale=float(np.abs(want).max()), rtol=1e-4)


def test_reference_grads_match_finite_differences(rng):
    model = BookCNN(channels=(2, 2), seed=3, algorithms_per_layer=("direct", "direct"))
    X, y = _batch(rng, 2)
    params = [p.astype(np.float64) for p in model.host_params()]
    grads = reference_grads(params, X, y)
    for which in (0, 1, 2, 4):
        numeric = ref.numerical_grad(lambda: reference_loss(params, X, y), params[which], indices=[0, 1])
        for i, value in numeric.items():
            assert value == pytest.approx(grads[which].reshape(-1)[i], abs=1e-6), (which, i)


def test_inplace_relu_gives_the_same_gradients(rng):
    X, y = _batch(rng, 2)
    a = BookCNN(channels=(2, 2), seed=4, algorithms_per_layer=("direct", "direct"))
    b = BookCNN(channels=(2, 2), seed=4, algorithms_per_layer=("direct", "direct"), inplace_relu=True)
    for ga, gb in zip(a.loss_and_grads(X, y)[1], b.loss_and_grads(X, y)[1]):
        np.testing.assert_array_equal(ga.copy_to_host(), gb.copy_to_host())


def test_book_cnn_refuses_bad_configurations():
    with pytest.raises(ValueError, match="channels must be 2 positive integers"):
        BookCNN(channels=(4,))
    with pytest.raises(ValueError, match="algorithms_per_layer must be two of"):
        BookCNN(algorithms_per_layer=("direct", "cudnn"))
    with pytest.raises(ValueError, match="even"):
        BookCNN(image_shape=(1, 7, 8))
    with pytest.raises(ValueError, match="X holds images of shape"):
        BookCNN(algorithms_per_layer=("direct", "direct")).loss_and_grads(np.zeros((2, 1, 6, 6), np.float32),
                                                                          np.zeros(2, np.int32))


def test_profiler_records_every_launch_and_restores_the_launch(rng):
    model = BookCNN(channels=(1, 2), algorithms_per_layer=("direct", "gemm"))
    X, y = _batch(rng, 1)
    with Profiler() as prof:
        model.profiler = prof
        model.step(model.loss_and_grads(X, y)[1], 0.1)
    kernels = [k["kernel"] for k in prof.kernels()]
    assert kernels.count("sgd_update_kernel") == 6
    assert "im2col_unsigned_kernel" in kernels and ("numpy matmul" in kernels or "cuBLAS sgemm" in kernels)
    assert all(k["pattern"] != "?" for k in prof.kernels()), [k["kernel"] for k in prof.kernels() if k["pattern"] == "?"]
    assert [o["op"] for o in prof.ops()][:2] == ["conv1 forward", "relu1"]
    count = len(prof.launches)
    model.loss_and_grads(X, y)  # the hooks are gone: nothing more is recorded
    assert len(prof.launches) == count


@pytest.mark.parametrize("reduction", ["thread", "tree"])
def test_conv_backward_reductions_match_float64(rng, reduction):
    X = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    W = rng.standard_normal((2, 2, 2, 3)).astype(np.float32)
    for padding, stride in ((1, 2),):
        dY = rng.standard_normal(ref.conv2d(X, W, None, padding, stride).shape).astype(np.float32)
        want_dX, want_dW, want_db = ref.conv2d_backward(X, W, dY, padding, stride)
        dX, dW, db = CL.conv2d_backward(X, W, dY, padding, stride, reduction=reduction,
                                        out=(gpulib.poisoned(X.shape), gpulib.poisoned(W.shape),
                                             gpulib.poisoned((2,))))
        gpulib.validate(dX, want_dX)
        gpulib.validate(dW, want_dW)
        gpulib.validate(db, want_db)
    with pytest.raises(ValueError, match="unknown reduction 'atomic'"):
        CL.conv2d_backward(X, W, dY, padding, stride, reduction="atomic")


@pytest.mark.parametrize("shape", [(1, 1), (3, 10), (2, 129)])
def test_softmax_rows_matches_float64(rng, shape):
    Z = (rng.standard_normal(shape) * 6).astype(np.float32)
    gpulib.validate(softmax_rows(Z, out=gpulib.poisoned(shape)), ref.softmax(Z))
    with pytest.raises(ValueError, match="is empty"):
        softmax_rows(np.zeros((0, 3), np.float32))


def test_planes_beyond_the_grid_limit_are_all_computed(rng, monkeypatch):
    """With the grid's z limit lowered to 3, every kernel that walks N·C planes must loop."""
    import gpulib.cnn.layers as layers_module
    import gpulib.conv.direct as direct_module

    monkeypatch.setattr(layers_module, "MAX_GRID_Z", 3)
    monkeypatch.setattr(direct_module, "MAX_GRID_Z", 3)
    X = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    W = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    for version in direct.VERSIONS:
        Y = direct.conv2d_direct(X, W, None, 1, 1, version=version, out=gpulib.poisoned((2, 2, 4, 4)),
                                 channels_per_block=1)
        gpulib.validate(Y, ref.conv2d(X, W, None, 1))
    Yp, argmax = CL.max_pool2d(X, 2, out=(gpulib.poisoned((2, 3, 2, 2)), None))
    gpulib.validate(Yp, ref.max_pool2d(X, 2))
    dY = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    gpulib.validate(CL.max_pool2d_backward(dY, argmax, X.shape, 2, out=gpulib.poisoned(X.shape)),
                    ref.max_pool2d_backward(X, dY, 2))
    dYc = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    dX, _, _ = CL.conv2d_backward(X, W, dYc, 1, out=(gpulib.poisoned(X.shape), None, None))
    gpulib.validate(dX, ref.conv2d_backward(X, W, dYc, 1)[0])


def test_the_estimator_counts_the_model_exactly_where_it_can():
    est = memory.estimate(8, (2, 4), ("direct", "direct"))
    act = lambda *s: 4 * int(np.prod(s))  # noqa: E731
    forward = (act(8, 1, 8, 8) + 4 * 8 + 2 * act(8, 2, 8, 8) + 2 * act(8, 4, 8, 8) + 2 * act(8, 4, 4, 4)
               + act(8, 10) + act(8, 10) + act(8))
    params = 4 * (2 * 9 + 2 + 4 * 2 * 9 + 4 + 10 * 64 + 10)
    backward = act(8, 10) + act(8, 64) + 2 * act(8, 4, 8, 8) + 2 * act(8, 2, 8, 8)
    assert est.peak_at == "conv1 backward"
    assert est.peak_bytes == params * 2 + forward + backward
    with_gemm = memory.estimate(8, (2, 4), ("gemm", "gemm"))
    assert with_gemm.by_kind["workspace"] == 4 * 8 * 64 * (4 + 2 * 9 * 2)  # dY_mat, X_col and dX_col of conv2
    assert memory.estimate(8, (2, 4), ("direct", "direct"), inplace_relu=True).peak_bytes == \
        est.peak_bytes - act(8, 2, 8, 8) - act(8, 4, 8, 8)
    with pytest.raises(ValueError, match="resolve 'auto' first"):
        memory.estimate(8, (2, 4), ("auto", "direct"))
    with pytest.raises(ValueError, match="batch must be an integer of at least 1"):
        memory.estimate(0)


def test_every_stored_kernel_has_a_pattern_and_the_stored_results_are_whole():
    stored = bench.load()
    assert stored["device"] and not stored.get("failed")
    for part in bench.PARTS:
        assert part in stored, part
    for bd in stored["breakdown"]:
        for k in bd["kernels"]:
            assert k["pattern"] == patterns.pattern_of(k["kernel"])[0] != "?", k["kernel"]
    assert max(stored["training"]["grad_rel_err"]) < 1e-4
    print(bench.table(stored))


def test_roofline_places_every_stored_kernel_under_its_roof():
    stored = {n: measuring.load(measuring.RESULTS_DIR / f"{n}.json") for n in ("conv_direct", "conv_gemm", "cudnn_tensorcore")}
    limits = roofline.datasheet(stored["conv_direct"]["device"])
    rows = roofline.book_kernels(stored["conv_direct"], stored["conv_gemm"], stored["cudnn_tensorcore"], limits)
    assert len(rows) > 15
    names = " | ".join(r["name"] for r in rows)
    for kernel in ("gemm v5", "GEMM v5 (wgmma", "GEMM v6", "GEMM v7", "conv v3", "conv v4", "Winograd F(4x4", "conv v2"):
        assert kernel in names, f"{kernel} missing from the roofline 16.6 promises for every kernel"
    for r in rows:
        assert 0 < r["percent"] < 100, r
    assert roofline.limit(1.0, 67e12, 4.8e12) == 4.8e12
    assert roofline.limit(1000.0, 67e12, 4.8e12) == 67e12
    assert roofline.datasheet("NVIDIA H100 80GB HBM3")["hbm"] == 3.35e12


def test_cuda_c_sources_are_shown_everywhere_and_run_on_a_gpu(rng, capsys):
    for name in cuda_c.NAMES:
        assert "__global__" in cuda_c.source(name)
    cuda_c.show("direct_conv")
    assert "conv2d_direct" in capsys.readouterr().out
    with pytest.raises(ValueError, match="name must be one of the CUDA C sources"):
        cuda_c.source("winograd")
    X = rng.standard_normal((2, 3, 9, 7)).astype(np.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    if gpulib.on_simulator():
        with pytest.raises(RuntimeError, match="CUDA C runs only on a GPU"):
            cuda_c.conv2d_direct_c(X, W)
        return
    for padding, stride in ((0, 1), (1, 2)):
        want = ref.conv2d(X, W, None, padding, stride)
        gpulib.validate(cuda_c.conv2d_direct_c(X, W, None, padding, stride, out=gpulib.poisoned(want.shape)), want)
        want_col = ref.im2col(X, 3, 3, padding, stride)
        for fixed in (False, True):
            got = cuda_c.im2col_c(X, 3, 3, padding, stride, fixed_sizes=fixed, out=gpulib.poisoned(want_col.shape))
            gpulib.validate(got, want_col)


NSYS_STATS = """\
 ** CUDA API Summary (cuda_api_sum):
+----------+-----------------+-----------+----------+----------+----------+----------+-------------+------------------+
| Time (%) | Total Time (ns) | Num Calls | Avg (ns) | Med (ns) | Min (ns) | Max (ns) | StdDev (ns) |       Name       |
+----------+-----------------+-----------+----------+----------+----------+----------+-------------+------------------+
|     96.7 |      20,224,201 |     2,050 |  9,865.5 |  7,032.0 |    4,948 |  228,960 |    12,829.2 | cuLaunchKernelEx |
|      0.6 |         132,297 |         1 |132,297.0 |132,297.0 |  132,297 |  132,297 |         0.0 | cuMemAlloc_v2    |
+----------+-----------------+-----------+----------+----------+----------+----------+-------------+------------------+
 ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):
+----------+-----------------+-----------+----------+----------+----------+----------+-------------+----------------------+
| Time (%) | Total Time (ns) | Instances | Avg (ns) | Med (ns) | Min (ns) | Max (ns) | StdDev (ns) |         Name         |
+----------+-----------------+-----------+----------+----------+----------+----------+-------------+----------------------+
|    100.0 |       2,165,161 |     2,050 |  1,056.2 |  1,024.0 |    1,024 |    1,472 |        12.3 | __main__::add_one[ab… |
+----------+-----------------+-----------+----------+----------+----------+----------+-------------+----------------------+
"""


def test_the_nsys_report_gives_the_launch_and_the_kernel_times():
    """16.6's launch-bound sentence reads these fields: each from its own table and column."""
    from gpulib.playbook import correctness

    got = correctness.launch_and_kernel(NSYS_STATS)
    assert got == {"launch_api": "cuLaunchKernelEx", "launch_calls": 2050, "launch_avg_us": 9.8655,
                   "launch_median_us": 7.032, "kernel_calls": 2050, "kernel_avg_us": 1.0562, "kernel_median_us": 1.024}
    assert correctness.launch_and_kernel(NSYS_STATS.split(" ** CUDA GPU")[0]) == {}  # no kernel table: nothing quoted


def test_the_stored_correctness_reports_show_each_tool_finding_its_bug():
    """The stored GPU reports (benchmarks/results/correctness.json) are the tools' findings, not
    their failures: memcheck an out-of-bounds access, racecheck a hazard, synccheck a barrier
    error, the blocking run the wild kernel's line, nsys both tables."""
    from gpulib.bench import correctness as correctness_bench

    reports = correctness_bench.load()["reports"]
    assert "out of bounds" in reports["memcheck"]["report"] and "ERROR SUMMARY: 1 error" in reports["memcheck"]["report"]
    assert "Race reported" in reports["racecheck"]["report"]
    assert "Barrier error" in reports["synccheck"]["report"]
    assert "line A" in reports["launch_blocking"]["report_blocking"] and "line B" in reports["launch_blocking"]["report"]
    assert reports["nsys"]["kernel_avg_us"] < reports["nsys"]["launch_avg_us"]
    assert "OutOfMemoryError" in reports["memory_summary"]["report"]
    for r in reports.values():
        assert "site-packages/" not in r["report"].replace(".../site-packages/", ""), r["name"]  # no machine's paths
