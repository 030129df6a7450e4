"""16.5's stored GPU results (benchmarks/results/cudnn_tensorcore.json) and what the notebook
draws from them without a GPU: every part present and checked, the auto-tuner's stored
rankings consistent with their own times, the tables and plots."""

import matplotlib.pyplot as plt
import pytest

import gpulib
from gpulib.bench import cudnn_engines
from gpulib.bench import cudnn_tensorcore as bench
from gpulib.book_layers import LAYERS
from gpulib.conv.algorithms import ALGORITHMS
from gpulib.figures import cudnn_tensorcore as tc_plots


@pytest.fixture(scope="module")
def stored():
    return bench.load()


def test_stored_results_hold_every_part_and_every_row_was_checked(stored):
    assert stored["device"] and stored["date"]
    gemm = [r["name"] for r in stored["tensor_cores"]["gemm"]["rows"]]
    assert [f"gpulib tensor-core GEMM {v}" for v in ("v1", "v2", "v3", "v4")] == gemm[:4]
    assert gemm[-1].startswith("cuBLAS fp16")
    conv = [r["name"] for r in stored["tensor_cores"]["conv"]["rows"]]
    assert conv[0].startswith("gpulib tensor-core conv v1") and conv[1].startswith("gpulib tensor-core conv v2")
    assert conv[-1].startswith("cuDNN fp16")
    for part in ("gemm", "conv"):
        rows = stored["tensor_cores"][part]["rows"]
        assert rows[-1]["name"] == stored["tensor_cores"][part]["library"] and rows[-1]["vs_library"] == 1.0
        for row in rows:
            assert row["ms"] > 0 and row["rel_err"] < 1e-3  # fp16 operands, fp32 sums
            assert abs(row["vs_library"] - rows[-1]["ms"] / row["ms"]) < 1e-9  # the one ratio: higher is faster
    formats = {(r["op"].split()[0], r["format"]) for r in stored["precision"]}
    assert formats == {(op, f) for op in ("GEMM", "conv") for f in ("fp32", "tf32", "fp16", "bf16")}


def test_stored_auto_tuner_rankings_are_consistent_and_pick_a_checked_algorithm(stored):
    assert [layer["title"] for layer in stored["autotune"]] == list(LAYERS)
    for layer in stored["autotune"]:
        ranking = layer["ranking"]
        assert all(r["name"] in ALGORITHMS for r in ranking)  # the registry's names
        assert all(r["vs_library"] == layer["library"]["ms"] / r["ms"] for r in ranking if r["ms"])
        assert ranking[0]["status"] == "ok" and ranking[0]["ms"] is not None  # the pick passed its check
        ok_times = [r["ms"] for r in ranking if r["status"] == "ok"]
        assert ok_times == sorted(ok_times)
        statuses = [r["status"] for r in ranking]
        assert statuses == sorted(statuses, key=["ok", "failed check", "not supported"].index)
        winograd = [r for r in ranking if r["cudnn"].startswith("WINOGRAD")]
        supported = layer["layer"]["R"] == layer["layer"]["S"] == 3 and layer["layer"]["stride"] == 1
        assert all((r["status"] != "not supported") == supported for r in winograd)


def test_stored_cudnn_plans_were_checked_and_sorted(stored):
    engines = stored["cudnn_engines"]
    if not engines["rows"]:
        assert "not installed" in engines["note"] or "failed" in engines["note"]
        return
    times = [r["ms"] for r in engines["rows"] if r["ms"] is not None]
    assert times == sorted(times) and len(times) > 1
    assert all(r["rel_err"] < 2e-3 for r in engines["rows"] if r["ms"] is not None)
    assert "plan (cuDNN engine and knobs)" in cudnn_engines.table(engines["rows"])


def test_table_parts_and_plots(stored):
    whole = bench.table(stored)
    for part, marker in (("tensor_cores", "Tensor cores: GEMM"), ("autotune", "Auto-tuner:"),
                         ("precision", "Precision (PyTorch)")):
        only = bench.table(stored, parts=[part])
        assert marker in only and marker in whole
        assert all(m not in only for p, m in (("tensor_cores", "Tensor cores: GEMM"), ("autotune", "Auto-tuner:"),
                                              ("precision", "Precision (PyTorch)")) if p != part)
    tuned = bench.table(stored, parts=["autotune"])  # each layer: every algorithm, the pick, and cuDNN
    assert tuned.count("<- the auto-tuner's pick") == tuned.count("cuDNN fp32 (torch") == len(stored["autotune"])
    fig = tc_plots.plot_tensor_cores(stored)
    assert len(fig.axes) == 3
    plt.close(fig)
    fig = tc_plots.plot_autotune(stored)
    assert len(fig.axes) == len(stored["autotune"])
    plt.close(fig)


def test_cudnn_frontend_is_reported_missing_without_a_gpu():
    if gpulib.on_gpu():
        pytest.skip("on a GPU the frontend may be installed: benchmarks/cudnn_tensorcore.py lists its plans")
    assert cudnn_engines.available() == ""
    assert "not installed" in bench.measure_cudnn_engines()["note"]


def test_stored_kernel_resources_back_the_text(stored):
    from gpulib.bench import measure as measuring

    res = stored["resources"]
    assert res["device"] and res["date"]
    kernels = res["kernels"]
    assert set(kernels) >= {f"tensor-core GEMM {v}" for v in ("v1", "v2", "v3", "v4")}
    for k in kernels.values():  # the occupancy follows from the registers the compiler gave
        per_warp = -(-k["registers"] * 32 // measuring.REGISTER_UNIT) * measuring.REGISTER_UNIT
        assert k["blocks_by_registers"] == measuring.REGISTERS_PER_SM // (per_warp * (k["threads"] // 32))
    capped, free = res["register_cap"]
    assert capped["registers"] <= 168 < free["registers"] and capped["blocks_per_sm"] > free["blocks_per_sm"]
    assert capped["rel_err"] < 1e-5 and free["rel_err"] < 1e-5  # both were checked before timing
    assert "blocks/SM" in bench.table(stored, parts=["resources"])


def test_resources_part_needs_a_gpu():
    if gpulib.on_simulator():
        with pytest.raises(RuntimeError, match="timing needs a GPU"):
            bench.measure_part("resources")
