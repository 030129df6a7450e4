"""Stored benchmark results: present, complete, and drawn; live measurement needs a GPU."""

import matplotlib
import pytest

matplotlib.use("Agg")

import gpulib  # noqa: E402
from gpulib.bench import conv_direct as bench  # noqa: E402
from gpulib.book_layers import LAYER  # noqa: E402
from gpulib.figures import conv_direct as direct_figures  # noqa: E402
from gpulib.style import use_korean_font  # noqa: E402


def test_stored_results_name_device_date_and_every_rung():
    results = bench.load()
    assert results["device"] and results["date"] and results["layer"] == LAYER
    names = [r["name"] for r in results["rows"]]
    assert names[0] == "gpulib direct v1" and names[-1].startswith("cuDNN")
    assert all(r["rel_err"] < 1e-5 for r in results["rows"])  # each was checked before timing
    assert results["rows"][-1]["name"] == results["library"] and results["rows"][-1]["vs_library"] == 1.0
    variants = [r for r in results["rows"] if "constant memory" in r["name"]]
    assert len(variants) == 1  # version 3 is a variant of version 2 at 16 channels, not a rung above it
    speeds = [r["vs_library"] for r in results["rows"] if r not in variants]
    assert speeds == sorted(speeds)  # each rung of the ladder faster than the last, cuDNN fastest
    assert "of cuDNN" in bench.table(results)


def test_plot_of_stored_results():
    use_korean_font()
    fig = direct_figures.plot(bench.load(), measured_live=False)
    assert "저장된 측정값" in fig.axes[0].get_title()


@pytest.mark.skipif(gpulib.on_gpu(), reason="on a GPU measure() runs")
def test_measure_refuses_the_simulator():
    with pytest.raises(RuntimeError, match="timing needs a GPU"):
        bench.measure()


def test_blocks_by_shared_memory_counts_the_reserved_kilobyte():
    from gpulib.bench import measure as measuring

    assert measuring.blocks_by_shared_memory(99328) == 2  # 97 KiB + 1 KiB twice in 228 KiB
    assert measuring.blocks_by_shared_memory(132096) == 1
    assert measuring.blocks_by_shared_memory(0) == 228
