"""16.4's figures: GEMM and convolution as GEMM against cuBLAS and cuDNN, and their memory, from
stored results (gpulib/bench/conv_gemm.py measures them)."""

from __future__ import annotations

from gpulib.book_layers import describe
from gpulib.results import is_part_of_call, ratio_text, short_name


def plot_speed(results: dict, measured_live: bool):
    """Left: the GEMM ladder on 4096³ against cuBLAS; right: every way to compute the layer,
    time in ms (log scale), each labelled with its TFLOP/s and its speed as a share of cuDNN's."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, (ax_g, ax_l) = plt.subplots(1, 2, figsize=(14, 5.6), gridspec_kw=dict(width_ratios=[1, 1.15]))
    colour = dict(v1="tab:gray", v2="tab:blue", v3="tab:blue", v4="tab:cyan", v5="teal", library="tab:green",
                  im2col="tab:orange", gemm="tab:olive", **{"im2col+gemm": "tab:orange"}, implicit="tab:purple",
                  direct="tab:gray", cudnn="tab:green")
    for ax, rows, library in ((ax_g, results["gemm"]["rows"], "cuBLAS"), (ax_l, results["layer"]["rows"], "cuDNN")):
        ms = [r["ms"] for r in rows]
        ax.barh([short_name(r["name"]) for r in rows], ms, color=[colour.get(r["kind"], "tab:blue") for r in rows])
        for i, r in enumerate(rows):
            note = "합성곱의 한 부분" if is_part_of_call(r["name"]) else f"{library}의 {ratio_text(r['vs_library'])} 속도"
            rate = f"{r['tflops']:.1f} TFLOP/s, " if r.get("tflops") else ""
            ax.text(r["ms"] * 1.06, i, f"{r['ms']:.2f} ms, {rate}{note}", va="center", fontsize=7)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.invert_yaxis()
        ax.set_xlim(right=max(ms) * 30)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("시간 (ms, 로그 눈금, 짧을수록 빠름)")
    ax_g.set_title(f"GEMM {results['gemm']['size']}³ fp32", fontsize=10)
    ax_l.set_title(f"{describe(results['layer']['layer'])}, fp32", fontsize=10)
    source = "지금 이 GPU에서 측정" if measured_live else "저장된 측정값"
    fig.suptitle(f"{results['device']}, {results['date']} ({source})", fontsize=11)
    fig.tight_layout()
    return fig


def plot_memory(results: dict):
    """Bytes of X and X_col (measured) against filter size and against batch size, and what
    implicit GEMM allocated for the same layers."""
    import matplotlib.pyplot as plt

    rows = results["memory"]["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, sweep, key, xlabel in ((axes[0], "filter", "R", "필터 크기 R = S (N = 32)"),
                                   (axes[1], "batch", "N", "배치 크기 N (3x3 필터)")):
        im = [r for r in rows if r["sweep"] == sweep and r["method"] == "im2col"]
        imp = [r for r in rows if r["sweep"] == sweep and r["method"] == "implicit"]
        xs = [r[key] for r in im]
        ax.plot(xs, [r["x_bytes"] / 1e6 for r in im], "o-", label="입력 X")
        ax.plot(xs, [r["x_col_measured_bytes"] / 1e6 for r in im], "s-", label="X_col (im2col, 측정)")
        ax.plot(xs, [max(r["x_col_measured_bytes"], 0) / 1e6 for r in imp], "^-",
                label="implicit GEMM이 더 잡은 메모리 (측정)")
        for r in im:
            ax.annotate(f"{r['x_col_bytes'] / r['x_bytes']:.1f}배", (r[key], r["x_col_measured_bytes"] / 1e6),
                        textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("MB (10⁶ 바이트)")
        if sweep == "batch":
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(x) for x in xs])
        else:
            ax.set_xticks(xs)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"im2col의 메모리 비용: C=64, 56x56 - {results['device']}, {results['date']}", fontsize=11)
    fig.tight_layout()
    return fig
