"""16.3 speed: the direct convolution ladder against cuDNN, measured live on a GPU or read
from the results stored in benchmarks/results/ (with the device and date they came from).

``benchmarks/conv_direct.py`` is the command-line front end; notebooks call ``measure`` on a
GPU and ``load`` elsewhere, and ``plot`` either way.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np

import gpulib
from gpulib import reference as ref
from gpulib.conv.direct import conv2d

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "conv_direct.json"
LAYER = dict(N=32, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, stride=1)
# (version, channels_per_block): 1 channel is the chapter's tile; more reuse each loaded input
LADDER = [("v1", 1), ("v2", 1), ("v2", 4), ("v2", 8), ("v2", 16)]


def flop(layer=LAYER) -> float:
    """2·N·K·H'·W'·C·R·S: one multiply and one add per filter tap."""
    Ho = ref.conv_output_size(layer["H"], layer["R"], layer["padding"], layer["stride"])
    Wo = ref.conv_output_size(layer["W"], layer["S"], layer["padding"], layer["stride"])
    return 2.0 * layer["N"] * layer["K"] * Ho * Wo * layer["C"] * layer["R"] * layer["S"]


def layer_inputs(layer=LAYER, seed: int = 0):
    """Random X, W (scaled by 1/sqrt(C·R·S)) and b for a layer, float32."""
    L = layer
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((L["N"], L["C"], L["H"], L["W"])).astype(np.float32)
    W = (rng.standard_normal((L["K"], L["C"], L["R"], L["S"])) / np.sqrt(L["C"] * L["R"] * L["S"])).astype(np.float32)
    b = rng.standard_normal(L["K"]).astype(np.float32)
    return X, W, b


def _reference(X, W, b, layer):
    """float64 reference: PyTorch's conv2d in float64 on the GPU if present, else NumPy."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return ref.conv2d(X, W, b, layer["padding"], layer["stride"]), "numpy float64"
    Y = F.conv2d(*(torch.from_numpy(a).double().cuda() for a in (X, W, b)),
                 stride=layer["stride"], padding=layer["padding"])
    return Y.cpu().numpy(), "torch float64"


def measure(layer=LAYER, ladder=LADDER, repeat: int = 20) -> dict:
    """Check every version against a float64 reference, then time it and cuDNN; GPU only."""
    if not gpulib.on_gpu():
        raise RuntimeError("timing needs a GPU: the simulator's times say nothing about one")
    L = layer
    X, W, b = layer_inputs(L)
    want, ref_name = _reference(X, W, b, L)
    scale = ref.conv2d_magnitude(X[:2], W, b, L["padding"], L["stride"]).max()
    dX, dW, db = (gpulib.cuda.to_device(a) for a in (X, W, b))
    total = flop(L)
    rows = []
    for version, group in ladder:
        name = "direct v1" if version == "v1" else f"direct v2, {group} channel(s)/block"
        out = gpulib.poisoned(want.shape)
        conv2d(dX, dW, db, L["padding"], L["stride"], version, out=out, channels_per_block=group)
        check = gpulib.validate(out, want, scale=scale, name=name)
        t = gpulib.benchmark(conv2d, dX, dW, db, L["padding"], L["stride"], version, out, group,
                             repeat=repeat, label=name)
        rows.append(dict(name=f"gpulib {name}", version=version, channels_per_block=group,
                         ms=t.median_ms, tflops=t.tflops(total), rel_err=check.rel_err))
    cudnn_row = cudnn_fp32(dX, dW, db, L, want, scale, repeat)
    if cudnn_row is not None:
        rows.append(cudnn_row)
    base = rows[0]["ms"]
    cudnn = cudnn_row["ms"] if cudnn_row is not None else None
    for row in rows:
        row["speedup_vs_v1"] = base / row["ms"]
        row["time_vs_cudnn"] = row["ms"] / cudnn if cudnn else None
    return dict(device=gpulib.env.device_name(), date=datetime.date.today().isoformat(), layer=L,
                gflop=total / 1e9, reference=ref_name, repeat=repeat,
                timing="median of CUDA events, L2 flushed", rows=rows)


def cudnn_fp32(dX, dW, db, layer, want, scale, repeat: int = 20) -> dict | None:
    """cuDNN's time for the layer through PyTorch (benchmark=True, TF32 off), checked against
    ``want`` first; None without PyTorch."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    tX, tW, tb = (torch.as_tensor(a, device="cuda") for a in (dX, dW, db))
    run = lambda: F.conv2d(tX, tW, tb, stride=layer["stride"], padding=layer["padding"])  # noqa: E731
    check = gpulib.validate(run().cpu().numpy(), want, scale=scale, name="cuDNN")
    t = gpulib.benchmark(run, repeat=repeat, label="cuDNN fp32")
    return dict(name="cuDNN fp32 (torch, benchmark=True, TF32 off)", version="cudnn", channels_per_block=None,
                ms=t.median_ms, tflops=t.tflops(flop(layer)), rel_err=check.rel_err)


def load(path=RESULTS) -> dict:
    """The stored results (measured on a GPU earlier), as written by ``save``."""
    return json.loads(Path(path).read_text())


def save(results: dict, path=RESULTS) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")


def table(results: dict) -> str:
    """The results as a text table (time, TFLOP/s, speed-up over v1, time relative to cuDNN)."""
    lines = [f"{results['device']}, {results['date']}, layer {results['layer']}, "
             f"{results['gflop']:.2f} GFLOP, checked against {results['reference']}",
             f"{'implementation':<46} {'ms':>8} {'TFLOP/s':>8} {'vs v1':>7} {'vs cuDNN':>9} {'rel err':>8}"]
    for row in results["rows"]:
        vs = f"{row['time_vs_cudnn']:.1f}x" if row.get("time_vs_cudnn") else "-"
        lines.append(f"{row['name']:<46} {row['ms']:8.3f} {row['tflops']:8.2f} "
                     f"{row['speedup_vs_v1']:6.1f}x {vs:>9} {row['rel_err']:8.1e}")
    return "\n".join(lines)


def plot(results: dict, measured_live: bool):
    """Bars of time per implementation (log scale), labelled with where the numbers come from."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    names = [r["name"].replace("gpulib ", "").replace(" (torch, benchmark=True, TF32 off)", "") for r in rows]
    colors = ["tab:gray" if r["version"] == "v1" else "tab:green" if r["version"] == "cudnn" else "tab:blue"
              for r in rows]
    ax.barh(names, [r["ms"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.text(r["ms"] * 1.05, i, f"{r['ms']:.2f} ms, {r['tflops']:.1f} TFLOP/s", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.invert_yaxis()
    ax.set_xlabel("시간 (ms, 로그 눈금, 짧을수록 빠름)")
    source = "지금 이 GPU에서 측정" if measured_live else "저장된 측정값"
    ax.set_title(f"conv 3x3, N=32 C=64 56x56 K=64, fp32 - {results['device']}, {results['date']} ({source})",
                 fontsize=10)
    ax.set_xlim(right=max(r["ms"] for r in rows) * 8)
    fig.tight_layout()
    return fig
