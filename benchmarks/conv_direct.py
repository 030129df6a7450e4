"""16.3 benchmark: the direct convolution versions against cuDNN, on one layer, in one run.

    python benchmarks/conv_direct.py [--out benchmarks/results/conv_direct.json]

Layer: N=32, C=64, H=W=56, K=64, 3x3, padding 1, stride 1, fp32. Every version is checked
against a float64 reference before it is timed. cuDNN runs through PyTorch with
``cudnn.benchmark = True`` and TF32 off, so it is an fp32 convolution like ours. Times are
medians of CUDA-event timings with L2 flushed (gpulib.benchmark). Needs an NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

import gpulib
from gpulib import reference as ref
from gpulib.conv import conv2d

LAYER = dict(N=32, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, stride=1)
# (version, channels_per_block): 1 channel is the chapter's tile; more reuse each loaded input
LADDER = [("v1", 1), ("v2", 1), ("v2", 4), ("v2", 8), ("v2", 16)]


def flop(layer) -> float:
    """2·N·K·H'·W'·C·R·S: one multiply and one add per filter tap."""
    Ho = ref.conv_output_size(layer["H"], layer["R"], layer["padding"], layer["stride"])
    Wo = ref.conv_output_size(layer["W"], layer["S"], layer["padding"], layer["stride"])
    return 2.0 * layer["N"] * layer["K"] * Ho * Wo * layer["C"] * layer["R"] * layer["S"]


def reference_output(X, W, b, layer):
    """float64 reference: PyTorch's conv2d in float64 on the GPU if present, else NumPy."""
    try:
        import torch
        import torch.nn.functional as F

        Y = F.conv2d(torch.from_numpy(X).double().cuda(), torch.from_numpy(W).double().cuda(),
                     torch.from_numpy(b).double().cuda(), stride=layer["stride"],
                     padding=layer["padding"])
        return Y.cpu().numpy(), "torch float64"
    except ImportError:
        return ref.conv2d(X, W, b, layer["padding"], layer["stride"]), "numpy float64"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    if not gpulib.on_gpu():
        print("This benchmark needs an NVIDIA GPU: the simulator's times say nothing about one.")
        return 0

    L = LAYER
    rng = np.random.default_rng(0)
    X = rng.standard_normal((L["N"], L["C"], L["H"], L["W"])).astype(np.float32)
    W = (rng.standard_normal((L["K"], L["C"], L["R"], L["S"])) / np.sqrt(L["C"] * 9)).astype(np.float32)
    b = rng.standard_normal(L["K"]).astype(np.float32)
    want, ref_name = reference_output(X, W, b, L)
    scale = ref.conv2d_magnitude(X[:2], W, b, L["padding"], L["stride"]).max()
    dX, dW, db = (gpulib.cuda.to_device(a) for a in (X, W, b))
    total_flop = flop(L)
    rows = []

    for version, group in LADDER:
        name = "direct v1" if version == "v1" else f"direct v2, {group} channel(s)/block"
        out = gpulib.poisoned(want.shape)
        conv2d(dX, dW, db, L["padding"], L["stride"], version, out=out, channels_per_block=group)
        check = gpulib.validate(out, want, scale=scale, name=name)
        t = gpulib.benchmark(conv2d, dX, dW, db, L["padding"], L["stride"], version, out, group,
                             repeat=args.repeat, label=name)
        rows.append(dict(name=f"gpulib {name}", version=version, channels_per_block=group,
                         ms=t.median_ms, tflops=t.tflops(total_flop), rel_err=check.rel_err))

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        torch = None
    if torch is not None:
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        tX, tW, tb = (torch.as_tensor(a, device="cuda") for a in (dX, dW, db))
        Y = F.conv2d(tX, tW, tb, stride=L["stride"], padding=L["padding"])
        check = gpulib.validate(Y.cpu().numpy(), want, scale=scale, name="cuDNN")
        t = gpulib.benchmark(lambda: F.conv2d(tX, tW, tb, stride=L["stride"], padding=L["padding"]),
                             repeat=args.repeat, label="cuDNN fp32")
        rows.append(dict(name="cuDNN fp32 (torch, benchmark=True, TF32 off)", ms=t.median_ms,
                         tflops=t.tflops(total_flop), rel_err=check.rel_err))

    base = rows[0]["ms"]
    cudnn = rows[-1]["ms"] if torch is not None else None
    device = gpulib.env.device_name()
    print(f"{device}, layer {L}, {total_flop / 1e9:.2f} GFLOP, checked against {ref_name}")
    print(f"{'implementation':<46} {'ms':>8} {'TFLOP/s':>8} {'vs v1':>7} {'vs cuDNN':>9} {'rel err':>8}")
    for row in rows:
        row["speedup_vs_v1"] = base / row["ms"]
        row["time_vs_cudnn"] = row["ms"] / cudnn if cudnn else None
        vs_cudnn = f"{row['time_vs_cudnn']:.1f}x" if cudnn else "-"
        print(f"{row['name']:<46} {row['ms']:8.3f} {row['tflops']:8.2f} {row['speedup_vs_v1']:6.1f}x "
              f"{vs_cudnn:>9} {row['rel_err']:8.1e}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(
            device=device, date=datetime.date.today().isoformat(), layer=L, gflop=total_flop / 1e9,
            reference=ref_name, repeat=args.repeat, timing="median of CUDA events, L2 flushed",
            rows=rows), indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
