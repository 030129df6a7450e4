"""16.3's speed figure: the direct-convolution ladder against cuDNN, from stored results
(gpulib/bench/conv_direct.py measures them)."""

from __future__ import annotations

from gpulib.book_layers import describe
from gpulib.results import ratio_text, short_name


def plot(results: dict, measured_live: bool):
    """Bars of time per implementation (log scale), labelled with where the numbers come from."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    names = [short_name(r["name"]) for r in rows]
    colors = ["tab:gray" if r["version"] == "v1" else "tab:green" if r["version"] == "cudnn" else "tab:blue"
              for r in rows]
    ax.barh(names, [r["ms"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.text(r["ms"] * 1.05, i, f"{r['ms']:.2f} ms, {r['tflops']:.1f} TFLOP/s, cuDNN의 {ratio_text(r['vs_library'])} 속도",
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
