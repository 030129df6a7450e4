"""The timing helper, show() and the report."""

import numpy as np

import gpulib
from gpulib.mlp import kernels
from gpulib.source import source_of
from gpulib.timing import Timing


def test_show_prints_the_real_source_of_a_kernel(capsys):
    gpulib.show(kernels.dense_forward_kernel)
    out = capsys.readouterr().out
    assert out.startswith("# gpulib/mlp/kernels.py:")
    assert "def dense_forward_kernel(X, W, b, H, act):" in out
    assert "H[n, j] = activate(z, act)" in out


def test_source_location_points_at_the_definition():
    where, src = source_of(kernels.activate)
    path, line = where.split(":")
    lines = open(path).read().splitlines()
    assert lines[int(line) - 1].startswith("@cuda.jit")
    assert "def activate(z, act):" in src


def test_benchmark(rng):
    x = gpulib.cuda.to_device(rng.standard_normal(1000).astype(np.float32))
    t = gpulib.benchmark(lambda: kernels.sgd_update_kernel[8, 128](x, x, np.float32(0.0)),
                         repeat=3, label="sgd")
    if gpulib.on_simulator():
        assert not t.valid and "not timed" in str(t)
    else:
        assert len(t.times_ms) == 3 and t.median_ms > 0 and "median" in str(t)


def test_timing_statistics():
    t = Timing("x", [3.0, 1.0, 2.0])
    assert t.median_ms == 2.0 and t.min_ms == 1.0
    assert abs(t.tflops(2e9) - 1.0) < 1e-12  # 2 GFLOP in 2 ms


def test_report_names_backend_and_versions(capsys):
    gpulib.report()
    out = capsys.readouterr().out
    assert "gpulib backend:" in out and "why:" in out and "numba-cuda" in out


def test_sized_follows_the_backend():
    assert gpulib.sized(gpu="big", sim="small") == ("big" if gpulib.on_gpu() else "small")


def test_show_unwraps_a_cached_kernel_factory(capsys):
    from gpulib.conv import direct

    gpulib.show(direct.conv2d_v2_kernel)
    out = capsys.readouterr().out
    assert out.startswith("# gpulib/conv/direct.py:") and "cuda.syncthreads()" in out
