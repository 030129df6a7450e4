"""16.5 speed: tensor cores, cuDNN's algorithm families and mixed precision, measured on a GPU
or read from benchmarks/results/cudnn_tensorcore.json.

    tensor_cores   GEMM 4096³ fp16 → fp32: gpulib tensor-core v1-v4 against cuBLAS fp16 (CuPy);
                   the 16.3 layer in fp16: gpulib's tensor-core conv v1 (NCHW) and v2 (NHWC)
                   against cuDNN fp16 (channels_last)
    autotune       for each layer of LAYERS: gpulib's auto-tuner ranking (every algorithm checked,
                   timed, with its extra memory) and cuDNN fp32 for the same layer
    cudnn_engines  cuDNN's own execution plans for the 16.3 layer, listed and timed through the
                   cuDNN frontend, when that package is installed
    precision      one GEMM and one conv in fp32, TF32, fp16 and bf16 through PyTorch: time and
                   error against float64

Every timed row is checked first. ``benchmarks/cudnn_tensorcore.py`` is the command line.
"""

from __future__ import annotations

import datetime

import numpy as np

import gpulib
from gpulib import reference as ref
from gpulib.conv import autotune, cudnn_engines
from gpulib.conv import bench as direct_bench
from gpulib.conv.implicit_gemm import row_table
from gpulib.tensorcore import conv as TC
from gpulib.tensorcore import gemm as TG

RESULTS = direct_bench.RESULTS.parent / "cudnn_tensorcore.json"
GEMM_SIZE = 4096
# the notebook's layers: a first layer on RGB, the 16.3 layer, a 1x1 layer, a 5x5 layer
LAYERS = {
    "first layer, C=3, 7x7 stride 2": dict(N=32, C=3, H=224, W=224, K=64, R=7, S=7, padding=3, stride=2),
    "middle 3x3 (16.3)": dict(direct_bench.LAYER),
    "1x1": dict(N=32, C=256, H=28, W=28, K=128, R=1, S=1, padding=0, stride=1),
    "5x5": dict(N=32, C=32, H=28, W=28, K=64, R=5, S=5, padding=2, stride=1),
}


def _torch():
    import torch
    import torch.nn.functional as F

    return torch, F


def _row(name, t, flop, rel_err=None, **extra):
    row = dict(name=name, ms=t.median_ms, tflops=t.tflops(flop), rel_err=rel_err)
    row.update(extra)
    return row


def measure_tensor_cores(repeat: int = 20) -> dict:
    """gpulib's tensor-core GEMM and conv against cuBLAS fp16 and cuDNN fp16."""
    import cupy

    torch, F = _torch()
    cuda = gpulib.cuda
    rng = np.random.default_rng(3)
    S = GEMM_SIZE
    A = rng.standard_normal((S, S)).astype(np.float16)
    B = rng.standard_normal((S, S)).astype(np.float16)
    cA, cB = cupy.asarray(A), cupy.asarray(B)
    want = cupy.asnumpy(cA.astype(cupy.float64) @ cB.astype(cupy.float64))
    scale = float((cupy.abs(cA).astype(cupy.float64) @ cupy.abs(cB).astype(cupy.float64)).max())
    flop = 2.0 * S**3
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    gemm_rows = []
    for version in TG.VERSIONS:
        C = gpulib.poisoned((S, S))  # any element left unwritten fails the check
        run = lambda: TG.launch(version, dA, dB, C)  # noqa: E731
        run()
        check = gpulib.validate(C, want, scale=scale, name=f"tensor-core GEMM {version}")
        t = gpulib.benchmark(run, repeat=repeat, label=version)
        gemm_rows.append(_row(f"gpulib tensor-core GEMM {version}", t, flop, check.rel_err))
    cC = cupy.empty((S, S), cupy.float16)
    run = lambda: cupy.matmul(cA, cB, out=cC)  # noqa: E731
    run()
    check = gpulib.validate(cupy.asnumpy(cC).astype(np.float32), want, scale=scale, rtol=2e-3, name="cuBLAS fp16")
    t = gpulib.benchmark(run, repeat=repeat, label="cuBLAS fp16")
    gemm_rows.append(_row("cuBLAS fp16 (CuPy)", t, flop, check.rel_err))
    for row in gemm_rows:
        row["fraction_of_cublas"] = gemm_rows[-1]["ms"] / row["ms"]

    L = direct_bench.LAYER
    X, W, b = direct_bench.layer_inputs(L)
    as16 = lambda a: a.astype(np.float16).astype(np.float32)  # noqa: E731  (what the tensor cores see)
    want, _ = direct_bench._reference(as16(X), as16(W), b, L)
    scale = ref.conv2d_magnitude(X[:2], W, b, L["padding"], L["stride"]).max()
    flop = direct_bench.flop(L)
    X16 = cuda.to_device(X.astype(np.float16))
    W16 = cuda.to_device(W.astype(np.float16).reshape(L["K"], -1))
    db = cuda.to_device(b)
    table = cuda.to_device(row_table(L["C"], L["R"], L["S"]))
    Y = gpulib.poisoned(want.shape)
    run = lambda: TC.launch_nchw(X16, W16, db, Y, L["padding"], L["stride"], table)  # noqa: E731
    run()
    check = gpulib.validate(Y, want, scale=scale, name="tensor-core conv v1")
    t = gpulib.benchmark(run, repeat=repeat, label="tc conv v1")
    conv_rows = [_row("gpulib tensor-core conv v1 (NCHW, fp16)", t, flop, check.rel_err)]
    X2, Wt, bias_rows = TC.nhwc_operands(X, W, b)  # layout conversion outside the timing, as for cuDNN
    Ho, Wo = want.shape[2:]
    Yn = gpulib.poisoned((L["N"] * Ho * Wo, Wt.shape[1]))
    shape = (L["N"], L["H"], L["W"], L["R"], L["S"])
    run = lambda: TC.launch_nhwc(X2, Wt, bias_rows, Yn, shape, L["padding"], L["stride"])  # noqa: E731
    run()
    got = Yn.copy_to_host()[:, :L["K"]].reshape(L["N"], Ho, Wo, L["K"]).transpose(0, 3, 1, 2)
    check = gpulib.validate(got, want, scale=scale, name="tensor-core conv v2")
    t = gpulib.benchmark(run, repeat=repeat, label="tc conv v2")
    conv_rows.append(_row("gpulib tensor-core conv v2 (NHWC, async copies, fp16)", t, flop, check.rel_err))
    torch.backends.cudnn.benchmark = True
    tX = torch.as_tensor(X, device="cuda").half().to(memory_format=torch.channels_last)
    tW = torch.as_tensor(W, device="cuda").half().to(memory_format=torch.channels_last)
    tb = torch.as_tensor(b, device="cuda").half()
    run = lambda: F.conv2d(tX, tW, tb, stride=L["stride"], padding=L["padding"])  # noqa: E731
    out = run().float().cpu().numpy()
    check = gpulib.validate(out, want, scale=scale, rtol=3e-3, name="cuDNN fp16")
    t = gpulib.benchmark(run, repeat=repeat, label="cuDNN fp16")
    conv_rows.append(_row("cuDNN fp16 (torch, channels_last, benchmark=True)", t, flop, check.rel_err))
    for row in conv_rows:
        row["fraction_of_cudnn"] = conv_rows[-1]["ms"] / row["ms"]
    return dict(gemm=dict(size=S, rows=gemm_rows), conv=dict(layer=L, rows=conv_rows))


def measure_autotune(layers=LAYERS, repeat: int = 10) -> list[dict]:
    """The auto-tuner's ranking for each layer, next to cuDNN fp32 for the same layer."""
    torch, F = _torch()
    timer = lambda fn, label: gpulib.benchmark(fn, repeat=repeat, label=label).median_ms  # noqa: E731
    out = []
    for title, L in layers.items():
        X, W, b = direct_bench.layer_inputs(L)
        want, _ = direct_bench._reference(X, W, b, L)
        scale = ref.conv2d_magnitude(X[:2], W, b, L["padding"], L["stride"]).max()
        ranking = autotune.find_algorithms(X, W, b, L["padding"], L["stride"], timer=timer, reference=want,
                                           scale=scale)
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False
        tX, tW, tb = (torch.as_tensor(a, device="cuda") for a in (X, W, b))
        run = lambda: F.conv2d(tX, tW, tb, stride=L["stride"], padding=L["padding"])  # noqa: E731
        run()
        cudnn_ms = gpulib.benchmark(run, repeat=repeat, label="cuDNN").median_ms
        out.append(dict(title=title, layer=L, gflop=direct_bench.flop(L) / 1e9, cudnn_fp32_ms=cudnn_ms,
                        ranking=[vars(r) for r in ranking]))
    return out


def measure_cudnn_engines(repeat: int = 10) -> dict:
    """cuDNN's own execution plans for the 16.3 layer in fp16 (channels_last), if the cuDNN
    frontend is installed; else a note saying it is not."""
    version = cudnn_engines.available()
    if not version:
        return dict(version="", rows=[], note="the cuDNN frontend (pip install nvidia-cudnn-frontend) is not installed")
    L = direct_bench.LAYER
    X, W, _ = direct_bench.layer_inputs(L)
    return dict(version=version, layer=L, dtype="fp16, channels_last",
                rows=cudnn_engines.engines(X, W, L["padding"], L["stride"], half=True, repeat=repeat))


def measure_precision(repeat: int = 20) -> list[dict]:
    """One GEMM (4096³) and the 16.3 conv in fp32, TF32, fp16, bf16: time and error vs float64."""
    torch, F = _torch()
    rng = np.random.default_rng(5)
    A = torch.as_tensor(rng.standard_normal((GEMM_SIZE, GEMM_SIZE)), device="cuda")
    B = torch.as_tensor(rng.standard_normal((GEMM_SIZE, GEMM_SIZE)), device="cuda")
    L = direct_bench.LAYER
    X, W, b = (torch.as_tensor(a, device="cuda").double() for a in direct_bench.layer_inputs(L))
    exact_gemm = A @ B
    exact_conv = F.conv2d(X, W, b, padding=L["padding"], stride=L["stride"])
    rows = []
    for fmt, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                             ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        a, bb = A.to(dtype), B.to(dtype)
        run = lambda: a @ bb  # noqa: E731
        err = float((run().double() - exact_gemm).abs().max() / exact_gemm.abs().max())
        t = gpulib.benchmark(run, repeat=repeat, label=fmt)
        rows.append(dict(op=f"GEMM {GEMM_SIZE}^3", format=fmt, ms=t.median_ms,
                         tflops=t.tflops(2.0 * GEMM_SIZE**3), rel_err=err))
        x, w, bias = X.to(dtype), W.to(dtype), b.to(dtype)
        if dtype != torch.float32:
            x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        run = lambda: F.conv2d(x, w, bias, padding=L["padding"], stride=L["stride"])  # noqa: E731
        err = float((run().double() - exact_conv).abs().max() / exact_conv.abs().max())
        t = gpulib.benchmark(run, repeat=repeat, label=fmt)
        rows.append(dict(op="conv 3x3 (16.3 layer)", format=fmt, ms=t.median_ms,
                         tflops=t.tflops(direct_bench.flop(L)), rel_err=err))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return rows


def measure(repeat: int = 20, progress=print) -> dict:
    if not gpulib.on_gpu():
        raise RuntimeError("timing needs a GPU: the simulator's times say nothing about one")
    progress("tensor cores ...")
    tc = measure_tensor_cores(repeat)
    progress("auto-tuner ...")
    tuned = measure_autotune(repeat=max(5, repeat // 2))
    progress("cuDNN's own plans ...")
    try:
        engines = measure_cudnn_engines(max(5, repeat // 2))
    except Exception as e:  # the frontend's API moves between versions: report, do not lose the rest
        engines = dict(version=cudnn_engines.available(), rows=[], note=f"listing failed: {e}")
    progress("precision ...")
    prec = measure_precision(repeat)
    return dict(device=gpulib.env.device_name(), date=datetime.date.today().isoformat(),
                timing="median of CUDA events, L2 flushed", repeat=repeat,
                tensor_cores=tc, autotune=tuned, cudnn_engines=engines, precision=prec)


def load(path=RESULTS) -> dict:
    """The stored results (measured on a GPU earlier), as written by ``save``."""
    return direct_bench.load(path)


def save(results: dict, path=RESULTS) -> None:
    direct_bench.save(results, path)


PARTS = ("tensor_cores", "autotune", "cudnn_engines", "precision")


def table(results: dict, parts=PARTS) -> str:
    """The results as text: every part, or those named in ``parts``."""
    lines = [f"{results['device']}, {results['date']}, {results['timing']}"]
    tc = results["tensor_cores"]
    if "tensor_cores" in parts:
        lines.append(f"Tensor cores: GEMM {tc['gemm']['size']}^3 fp16 -> fp32")
        for r in tc["gemm"]["rows"]:
            lines.append(f"  {r['name']:<54} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s "
                         f"{r['fraction_of_cublas']:6.1%} of cuBLAS  rel err {r['rel_err']:.1e}")
        lines.append("Tensor cores: conv (16.3 layer) in fp16")
        for r in tc["conv"]["rows"]:
            lines.append(f"  {r['name']:<54} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s "
                         f"{r['fraction_of_cudnn']:6.1%} of cuDNN  rel err {r['rel_err']:.1e}")
    if "autotune" in parts:
        for layer in results["autotune"]:
            lines.append(f"Auto-tuner: {layer['title']} {layer['layer']} ({layer['gflop']:.2f} GFLOP), "
                         f"cuDNN fp32 {layer['cudnn_fp32_ms']:.3f} ms")
            ranking = [autotune.Result(**r) for r in layer["ranking"]]
            rows = autotune.table(ranking).splitlines()
            if ranking and ranking[0].status == "ok":
                rows[1] += "  <- the auto-tuner's pick"
            rows.append(f"{'-':>4} {'cuDNN fp32 (torch, benchmark=True)':<47} {'library':<14} "
                        f"{layer['cudnn_fp32_ms']:8.3f}")
            lines += ["  " + line for line in rows]
    engines = results.get("cudnn_engines", {})
    if "cudnn_engines" in parts and engines.get("rows"):
        lines.append(f"cuDNN {engines['version']} frontend: its own plans for the 16.3 layer ({engines['dtype']})")
        lines.append(cudnn_engines.table(engines["rows"]))
    elif "cudnn_engines" in parts and engines:
        lines.append(f"cuDNN's own plans: {engines['note']}")
    if "precision" in parts:
        lines.append("Precision (PyTorch): time and max error / max |exact|")
        for r in results["precision"]:
            lines.append(f"  {r['op']:<24} {r['format']:<5} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s  "
                         f"err {r['rel_err']:.1e}")
    return "\n".join(lines)


def _short(name: str) -> str:
    return (name.replace("gpulib ", "").replace(" (torch, channels_last, benchmark=True)", " (torch)")
            .replace(" (CuPy)", "").replace("tensor-core ", "TC "))


def plot_tensor_cores(results: dict):
    """Left: the tensor-core GEMM ladder against cuBLAS fp16 (TFLOP/s); middle: the 16.3 layer in
    fp16, gpulib's conv against cuDNN (and cuDNN's fastest own plan, if listed); right: time
    against error for fp32 / TF32 / fp16 / bf16 through PyTorch."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    tc = results["tensor_cores"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw=dict(width_ratios=[1, 1, 1.1]))
    gemm_rows = tc["gemm"]["rows"]
    conv_rows = [dict(r) for r in tc["conv"]["rows"]]
    engines = results.get("cudnn_engines", {}).get("rows", [])
    timed = [r for r in engines if r["ms"] is not None]
    if timed:  # cuDNN's fastest plan through the frontend: the convolution alone, no bias
        best = min(timed, key=lambda r: r["ms"])
        conv_rows.append(dict(name=f"cuDNN best plan ({best['name'].split('_')[0]}, no bias)", ms=best["ms"],
                              tflops=direct_bench.flop(tc["conv"]["layer"]) / best["ms"] / 1e9))
    for ax, rows, ref_name, title in ((axes[0], gemm_rows, "cuBLAS", f"GEMM {tc['gemm']['size']}x{tc['gemm']['size']}x{tc['gemm']['size']}, fp16 in, fp32 sums"),
                                      (axes[1], conv_rows, "cuDNN", "conv 3x3, N=32 C=64 56x56 K=64, fp16")):
        lib = [r for r in rows if r["name"].startswith(ref_name)][0]
        colours = ["tab:green" if r["name"].startswith(ref_name) else "tab:blue" for r in rows]
        ax.barh([_short(r["name"]) for r in rows], [r["tflops"] for r in rows], color=colours)
        for i, r in enumerate(rows):
            ax.text(r["tflops"] * 1.02, i, f"{r['ms']:.3f} ms, {_short(lib['name'])}의 {lib['ms'] / r['ms']:.0%} 속도",
                    va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(r["tflops"] for r in rows) * 1.45)
        ax.set_xlabel("TFLOP/s (길수록 빠름)")
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
    ax = axes[2]
    marker = {"GEMM": "o", "conv": "s"}
    colour = dict(fp32="tab:gray", tf32="tab:orange", fp16="tab:blue", bf16="tab:purple")
    for r in results["precision"]:
        kind = r["op"].split()[0]
        ax.scatter(r["ms"], r["rel_err"], marker=marker[kind], color=colour[r["format"]], s=60)
        ax.annotate(f"{kind} {r['format']}", (r["ms"], r["rel_err"]), textcoords="offset points", xytext=(5, 3),
                    fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, fmt in ((ax.xaxis, "{:g}"), (ax.yaxis, "{:.0e}")):
        axis.set_major_formatter(FuncFormatter(lambda v, _, fmt=fmt: fmt.format(v)))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("시간 (ms, 로그)")
    ax.set_ylabel("최대 오차 / 최대 |정확한 값|")
    ax.set_title("정밀도: 시간과 오차 (PyTorch, GEMM 4096과 16.3 레이어)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.suptitle(f"{results['device']}, {results['date']}", fontsize=11)
    fig.tight_layout()
    return fig


def plot_autotune(results: dict):
    """One panel per layer: every algorithm that passed its check, time in ms (the pick in
    orange), with cuDNN fp32 for the same layer as a green line."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    layers = results["autotune"]
    fig, axes = plt.subplots(1, len(layers), figsize=(4.2 * len(layers), 3.8))
    for ax, layer in zip(axes, layers):
        ok = [r for r in layer["ranking"] if r["status"] == "ok" and r["ms"] is not None]
        ax.barh([r["name"] for r in ok], [r["ms"] for r in ok],
                color=["tab:orange" if i == 0 else "tab:blue" for i in range(len(ok))])
        ax.axvline(layer["cudnn_fp32_ms"], color="tab:green", lw=2, label=f"cuDNN fp32 {layer['cudnn_fp32_ms']:.3f} ms")
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(layer["title"], fontsize=9)
        ax.set_xlabel("ms (로그)")
        ax.tick_params(axis="y", labelsize=8)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"자동 튜너의 순위 (주황: 고른 것) - {results['device']}, {results['date']}", fontsize=11)
    fig.tight_layout()
    return fig
