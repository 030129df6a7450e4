"""16.5b's profiler readings: Nsight Compute's counters of the Hopper kernels, stored like every timing.

    measure_nsight   runs ``ncu`` once per target below, each on a fresh Python process that
                     compiles and warms the kernel and then launches it once between
                     cudaProfilerStart and cudaProfilerStop; keeps every numeric metric of the
                     sections asked for (speed of light, occupancy, compute workload, warp state,
                     scheduler), per kernel launched in that window
    launch_target    what that process runs: ``python -m gpulib.bench.nsight TARGET``

    targets          v6 / v7: HGEMM 4096³ (128x256 tiles, 4 stages), the two 16.5b compares
                     conv v3 / conv v4: the tensor-core convolutions on the 16.3 layer

A metric's name is Nsight Compute's own (``sm__throughput.avg.pct_of_peak_sustained_elapsed``),
so the book's claims (book/claims.toml) can quote it and a reader can find it in the tool's
documentation. Needs a GPU whose counters the profiler may read.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import shutil
import subprocess
import sys

import numpy as np

from gpulib.bench import measure as measuring

SECTIONS = ("SpeedOfLight", "Occupancy", "ComputeWorkloadAnalysis", "WarpStateStats", "SchedulerStats", "LaunchStats")
GEMM_SIZE = 4096
GEMM_CONFIG = "128x256, 4 stages"
TARGETS = ("v6", "v7", "conv v3", "conv v4")
MORE_TARGETS = ("conv v6", "conv v7", "conv v7 8x8")  # the Hopper convolutions with fp16 Y, profiled on request


def ncu_path() -> str:
    """The Nsight Compute command line: on the PATH, or where CUDA installs it."""
    found = shutil.which("ncu") or next(
        iter(sorted(glob.glob("/usr/local/cuda*/bin/ncu") + glob.glob("/opt/nvidia/nsight-compute/*/ncu"))), None
    )
    if not found:
        raise RuntimeError("Nsight Compute (ncu) is not installed here")
    return found


def _launcher(target: str):
    """A function that launches ``target`` once, its inputs and output already on the GPU."""
    from gpulib.book_layers import LAYER, layer_inputs
    from gpulib.check import poisoned
    from gpulib.conv import tensorcore as tc_conv
    from gpulib.env import cuda
    from gpulib.gemm import tensorcore as tc_gemm
    from gpulib.shapes import conv_output_size
    from gpulib.tensorcore import wgmma

    if target in ("v6", "v7"):
        rng = np.random.default_rng(16)
        A = cuda.to_device(rng.standard_normal((GEMM_SIZE, GEMM_SIZE)).astype(np.float16))
        Bt = cuda.to_device(rng.standard_normal((GEMM_SIZE, GEMM_SIZE)).astype(np.float16))
        C = poisoned((GEMM_SIZE, GEMM_SIZE))
        return lambda: tc_gemm.launch(A, Bt, C, version=target, config=GEMM_CONFIG)
    if target in ("conv v3", "conv v4"):
        X, W, b = layer_inputs(LAYER)
        operands = tc_conv.prepare(X, W, b, LAYER["padding"], LAYER["stride"], version=target.split()[1])
        Y = poisoned(operands.out_shape)
        return lambda: tc_conv.launch(operands, Y)
    if target in ("conv v6", "conv v7", "conv v7 8x8"):  # NHWC fp16 in and out, as a channels-last model calls them
        X, W, b = layer_inputs(LAYER)
        Xn, Wk = tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W)
        bias = cuda.to_device(b)
        N, H, Wd, _ = Xn.shape
        K, R, S, _ = Wk.shape
        Ho, Wo = (conv_output_size(n, r, LAYER["padding"], LAYER["stride"]) for n, r in ((H, R), (Wd, S)))
        Y = poisoned((N, Ho, Wo, K), np.float16)
        version, *tile = target.split()[1:]
        plan = tc_conv.launch_plan(version, Xn, Wk, bias, Y, N, H, Wd, R, S, LAYER["padding"], LAYER["stride"],
                                   tile=(8, 8) if tile else None)
        return lambda: wgmma.launch(*plan[:4], *plan[4])
    raise ValueError(f"target must be one of {TARGETS + MORE_TARGETS}, not {target!r}")


def launch_target(target: str) -> None:
    """Compile and warm ``target``, then launch it once inside the profiler's window."""
    from gpulib.env import cuda

    run = _launcher(target)
    for _ in range(2):  # the first call compiles; neither is profiled (ncu --profile-from-start off)
        run()
    cuda.synchronize()
    cuda.profile_start()
    run()
    cuda.synchronize()
    cuda.profile_stop()


def _number(text: str):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict]:
    """``ncu --csv --page raw``: a header of metric names, a row of units, a row per kernel. Returns,
    per kernel, its name and a dict of every metric whose value is a number."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise RuntimeError("no CSV table in ncu's output:\n" + text[-2000:])
    table_lines = [line for line in lines[start:] if line.startswith('"')]  # not ncu's ==PROF== notes
    rows = list(csv.reader(io.StringIO("\n".join(table_lines))))
    names, units, kernels = rows[0], rows[1], rows[2:]
    out = []
    for values in kernels:
        record = dict(zip(names, values))
        metrics = {
            name: number
            for name, value in record.items()
            if "__" in name and (number := _number(value)) is not None
        }
        units_of = {n: u for n, u in zip(names, units) if n in metrics and u}
        out.append(dict(kernel=record.get("Kernel Name", ""), metrics=metrics, units=units_of))
    return out


def profile(target: str, timeout: int = 300) -> dict:
    """One ``ncu`` run over ``launch_target(target)``: every kernel launched in the window, the
    longest (the target's own kernel; a launch may add small ones) named ``main``."""
    command = [ncu_path(), "--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "raw"]
    for section in SECTIONS:
        command += ["--section", section]
    command += [sys.executable, "-m", "gpulib.bench.nsight", target]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    if done.returncode:
        raise RuntimeError(f"ncu failed on {target!r} ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    kernels = parse_raw_csv(done.stdout)
    main = max(range(len(kernels)), key=lambda i: kernels[i]["metrics"].get("gpu__time_duration.sum", 0.0))
    return dict(target=target, kernels=kernels, main=main)


def measure_nsight(targets=TARGETS) -> dict:
    """Every target profiled; the ncu version and the command's settings kept beside them."""
    measuring.require_gpu()
    version = subprocess.run([ncu_path(), "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return dict(
        measuring.header(1),
        timing="Nsight Compute, one profiled launch after two warm-up launches, --clock-control none",
        ncu=version[-1] if version else "",
        sections=list(SECTIONS),
        gemm=dict(size=GEMM_SIZE, config=GEMM_CONFIG),
        targets={target: profile(target) for target in targets},
    )


def main_metrics(result: dict, target: str) -> dict:
    """The stored metrics of ``target``'s own kernel."""
    entry = result["targets"][target]
    return entry["kernels"][entry["main"]]["metrics"]


READINGS = (  # what 16.5b reads, in Nsight Compute's names
    ("tensor pipe active %", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    ("wgmma issue % of peak", "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"),
    ("achieved occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("warps per scheduler", "smsp__warps_active.avg.per_cycle_active"),
    ("cycles per issued instruction", "smsp__average_warp_latency_per_inst_issued.ratio"),
    ("SM throughput %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("memory throughput %", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("DRAM throughput %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("barrier stalls / issue", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"),
    ("long scoreboard / issue", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"),
    ("fixed latency (wait) / issue", "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"),
)


def table(result: dict) -> str:
    targets = list(result["targets"])
    lines = [f"Nsight Compute ({result.get('ncu', '')}) on {result['device']}, {result['date']}",
             f"{'':32}" + "".join(f"{t:>12}" for t in targets)]
    for label, metric in READINGS:
        cells = []
        for t in targets:
            value = main_metrics(result, t).get(metric)
            cells.append(f"{value:12.2f}" if value is not None else f"{'-':>12}")
        lines.append(f"{label:32}" + "".join(cells))
    tensor = sorted({m for t in targets for m in main_metrics(result, t) if "pipe_tensor" in m})
    if tensor:
        lines.append("tensor-pipe metrics stored: " + ", ".join(tensor))
    return "\n".join(lines)


if __name__ == "__main__":
    launch_target(" ".join(sys.argv[1:]))
