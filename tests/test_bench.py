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


def _scoreboard_row(value, met, **extra):
    return dict(ours="ours", ours_ms=1.0, library="lib", library_ms=value, value=value, met=met, **extra)


def test_the_scoreboard_says_which_targets_are_met():
    from gpulib.bench import scoreboard

    assert scoreboard._met("step", 1.0) and not scoreboard._met("step", 1.01)  # a time: at most PyTorch's
    assert scoreboard._met("conv", 1.0) and not scoreboard._met("conv", 0.99)  # a speed: at least cuDNN's
    assert scoreboard._met("gemm", 0.8) and not scoreboard._met("gemm", 0.79) and not scoreboard._met("gemm", None)
    results = dict(device="GPU", date="today",
                   step=_scoreboard_row(1.2, False, torch_compile=dict(ms=None, note="did not compile here: no C compiler"),
                                        forms_ms={"graph": 1.2}),
                   conv=_scoreboard_row(1.1, True, ranking=[dict(name="winograd_f4", status="ok", ms=1.0)]))
    text = scoreboard.table(results).splitlines()
    assert [line.split()[0] for line in text[2:] if not line.startswith("        ")] == ["step", "conv", "gemm"]
    assert text[2].split()[6:9] == ["<=", "1.0", "no"] and text[5].split()[6:9] == [">=", "1.0", "yes"]
    assert "did not compile here" in text[3] and "(not measured)" in text[-1]


@pytest.mark.skipif(gpulib.on_gpu(), reason="on a GPU measure() runs")
def test_the_scoreboard_refuses_the_simulator():
    from gpulib.bench import scoreboard

    with pytest.raises(RuntimeError, match="timing needs a GPU"):
        scoreboard.measure()
    with pytest.raises(ValueError, match="unknown part 'speed'"):
        scoreboard.measure_part("speed")


def test_the_step_row_takes_the_fastest_form_and_its_rounds():
    from gpulib.bench import scoreboard

    forms = dict(replayed=2.0, graph=1.9, staged_replayed=1.6, staged_graph=1.5, fused_replayed=1.45, fused_graph=None)
    rounds = [dict(torch=t, **{k: v or 9.0 for k, v in forms.items()}) for t in (1.5, 1.4, 1.6)]
    r = dict(torch_ms=1.5, rounds=rounds, **{f"{k}_ms": v for k, v in forms.items()})
    row = scoreboard.step_row(r, dict(ms=None, note="no"))
    assert row["ours"] == "fused_replayed" and "fused_graph" not in row["forms_ms"]  # a graph that was not built
    assert row["value"] == pytest.approx(1.45 / 1.5) and row["met"]
    assert row["round_values"] == [pytest.approx(1.45 / t) for t in (1.5, 1.4, 1.6)]


def test_the_step_figure_shows_torch_compile_or_says_why_not():
    from gpulib.figures.playbook import plot_step_against_pytorch

    pt = dict(gpulib_ms=6.0, replayed_ms=2.4, graph_ms=2.3, torch_ms=1.5, gpu_ms=1.6, batch=256,
              measured=dict(device="NVIDIA H200"), torch_compile=dict(ms=1.2, note=""))
    labels = [t.get_text() for t in plot_step_against_pytorch(pt).axes[0].get_yticklabels()]
    assert labels[:2] == ["PyTorch torch.compile", "PyTorch eager"]  # the last rows, drawn at the bottom
    pt["torch_compile"] = dict(ms=None, note="did not compile here: no C compiler")
    ax = plot_step_against_pytorch(pt).axes[0]
    assert "PyTorch torch.compile" not in [t.get_text() for t in ax.get_yticklabels()]
    assert "did not compile here" in ax.get_title()
