"""16.3 speed: the direct convolution ladder against cuDNN, measured live on a GPU or read from
the results stored in benchmarks/results/conv_direct.json (with the device and date).

``benchmarks/conv_direct.py`` is the command-line front end; notebooks call ``measure`` on a
GPU and ``load`` elsewhere, and ``plot`` either way.
"""

from __future__ import annotations

from gpulib.bench import measure as M
from gpulib.book_layers import LAYER, describe, flop, layer_inputs
from gpulib.check import poisoned
from gpulib.conv.direct import conv2d_direct
from gpulib.env import cuda

RESULTS = M.RESULTS_DIR / "conv_direct.json"
# (version, channels_per_block): 1 channel is the chapter's tile; more reuse each loaded input
LADDER = [("v1", 1), ("v2", 1), ("v2", 4), ("v2", 8), ("v2", 16)]


def measure(layer=LAYER, ladder=LADDER, repeat: int = 20) -> dict:
    """Check every version against a float64 reference, then time it and cuDNN; GPU only."""
    M.require_gpu()
    X, W, b = layer_inputs(layer)
    want, ref_name = M.reference_conv(X, W, b, layer)
    scale = M.magnitude(X, W, b, layer)
    X_dev, W_dev, b_dev = (cuda.to_device(a) for a in (X, W, b))
    p, s, total = layer["padding"], layer["stride"], flop(layer)
    rows = []
    for version, group in ladder:
        name = "direct v1" if version == "v1" else f"direct v2, {group} channel(s)/block"
        out = poisoned(want.shape)
        run = lambda: conv2d_direct(X_dev, W_dev, b_dev, p, s, out=out, version=version, channels_per_block=group)  # noqa: E731
        rows.append(M.checked_row(f"gpulib {name}", run, want, out=out, flop=total, scale=scale, repeat=repeat,
                                  version=version, channels_per_block=group))
    library, run = M.cudnn_conv(X_dev, W_dev, b_dev, layer)
    rows.append(M.checked_row(library, run, want, flop=total, scale=scale, repeat=repeat, version="cudnn",
                              channels_per_block=None))
    return dict(M.header(repeat), layer=layer, gflop=total / 1e9, reference=ref_name, library=library,
                rows=M.with_ratio(rows, rows[-1]["ms"]))


def load(path=RESULTS) -> dict:
    return M.load(path)


def save(results: dict, path=RESULTS) -> None:
    M.save(results, path)


def table(results: dict) -> str:
    """The results as a text table: time, TFLOP/s, speed as a share of cuDNN's, error."""
    head = (f"{results['device']}, {results['date']}, layer {results['layer']}, {results['gflop']:.2f} GFLOP, "
            f"checked against {results['reference']}")
    return "\n".join([head] + M.rows_table(results["rows"], "cuDNN", width=46, indent=""))


def plot(results: dict, measured_live: bool):
    """Bars of time per implementation (log scale), labelled with where the numbers come from."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    names = [M.short_name(r["name"]) for r in rows]
    colors = ["tab:gray" if r["version"] == "v1" else "tab:green" if r["version"] == "cudnn" else "tab:blue"
              for r in rows]
    ax.barh(names, [r["ms"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.text(r["ms"] * 1.05, i, f"{r['ms']:.2f} ms, {r['tflops']:.1f} TFLOP/s, cuDNN의 {M.ratio_text(r['vs_library'])} 속도",
                va="center", fontsize=8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.invert_yaxis()
    ax.set_xlabel("시간 (ms, 로그 눈금, 짧을수록 빠름)")
    source = "지금 이 GPU에서 측정" if measured_live else "저장된 측정값"
    ax.set_title(f"{describe(results['layer'])}, fp32 - {results['device']}, {results['date']} ({source})",
                 fontsize=10)
    ax.set_xlim(right=max(r["ms"] for r in rows) * 12)
    fig.tight_layout()
    return fig
