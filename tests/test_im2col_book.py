"""16.4's book helpers: the figure-16.2 explorer's example and the stored benchmark results."""

import numpy as np
import pytest

import gpulib
from gpulib import reference as ref
from gpulib.bench import conv_gemm as gemm_bench
from gpulib.figures import conv_gemm as gemm_figures
from gpulib.figures.im2col_explorer import Im2colExample, Im2colExplorer, dot_product_text, figure


@pytest.fixture(scope="module")
def example():
    return Im2colExample.make(N=2, C=2, H=5, W=4, K=3, padding=1, seed=3)


def test_every_output_element_is_its_column_times_its_filter_row(example):
    ex = example
    Y = ref.conv2d(ex.X, ex.W, None, ex.padding)
    np.testing.assert_array_equal(ex.X_col, ref.im2col(ex.X, 3, 3, ex.padding))
    for n, k, y, x in np.ndindex(*Y.shape):
        value, direct = ex.element(n, k, y, x)
        assert value == direct == Y[n, k, y, x]  # small integers: exact in float32
        assert ex.Y_mat[k, ex.column(n, y, x)] == value


def test_the_explorer_draws_and_writes_out_the_dot_product(example):
    import matplotlib.pyplot as plt

    text = dot_product_text(example, 1, 2, 4, 3)
    assert text.count("·") == 2 * 9 and f"<b>{example.element(1, 2, 4, 3)[0]:.0f}</b>" in text
    fig = figure(example, 1, 2, 4, 3)
    assert len(fig.axes) == 2 + 1 + 3  # two channels, the filter, W_mat · X_col = Y_mat
    plt.close(fig)
    explorer = Im2colExplorer(example)
    explorer.update()
    first = explorer.image.value
    explorer.x.value = 0  # the widget redraws on a slider change
    assert explorer.image.value != first and explorer.image.value[:4] == b"\x89PNG"


def test_stored_results_hold_every_part_and_were_checked():
    r = gemm_bench.load()
    assert r["device"] and r["date"]
    names = " ".join(row["name"] for row in r["layer"]["rows"])
    for part in ("im2col alone", "im2col + cuBLAS", "implicit precomp GEMM", "cuDNN"):
        assert part in names
    for part in ("gemm", "layer"):
        rows = r[part]["rows"]
        assert rows[-1]["name"] == r[part]["library"] and rows[-1]["vs_library"] == 1.0
        for row in rows:
            assert row["ms"] > 0 and abs(row["vs_library"] - rows[-1]["ms"] / row["ms"]) < 1e-9
            assert row["rel_err"] is None or row["rel_err"] < 1e-5
    filters = [row for row in r["memory"]["rows"] if row["sweep"] == "filter" and row["method"] == "im2col"]
    for row in filters:  # X_col really is about R·S times X, and the measured bytes agree
        assert abs(row["x_col_bytes"] / row["x_bytes"] - row["R"] ** 2) < 1e-9
        assert abs(row["x_col_measured_bytes"] - row["x_col_bytes"]) < 4 * 2**20
    text = gemm_bench.table(r)
    assert "cuBLAS sgemm" in text and "Memory" in text and "of cuBLAS" in text and "of cuDNN" in text


def test_the_plots_draw_from_stored_results():
    import matplotlib.pyplot as plt

    r = gemm_bench.load()
    for fig in (gemm_figures.plot_speed(r, measured_live=False), gemm_figures.plot_memory(r)):
        assert len(fig.axes) == 2
        plt.close(fig)


def test_measuring_needs_a_gpu():
    if gpulib.on_gpu():
        pytest.skip("on a GPU measure() runs: benchmarks/conv_gemm.py does that")
    with pytest.raises(RuntimeError, match="timing needs a GPU"):
        gemm_bench.measure()


@pytest.mark.parametrize("script", ["conv_direct.py", "conv_gemm.py", "cudnn_tensorcore.py"])
def test_benchmark_scripts_show_stored_results_without_a_gpu(script):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, GPULIB_BACKEND="sim")
    done = subprocess.run([sys.executable, str(root / "benchmarks" / script)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "needs an NVIDIA GPU" in done.stdout and "Stored results:" in done.stdout and "cuDNN" in done.stdout
