"""16.5's figures: the tensor cores against cuBLAS and cuDNN, the GEMM ladder, the auto-tuner's
rankings, from stored results (gpulib/bench/cudnn_tensorcore.py measures them)."""

from __future__ import annotations

from gpulib.book_layers import describe, flop
from gpulib.conv.algorithms import ALGORITHMS
from gpulib.results import short_name


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
        conv_rows.append(
            dict(
                name=f"cuDNN best plan ({best['name'].split('_')[0]}, no bias)",
                ms=best["ms"],
                tflops=flop(tc["conv"]["layer"]) / best["ms"] / 1e9,
            )
        )
    for ax, rows, ref_name, title in (
        (
            axes[0],
            gemm_rows,
            "cuBLAS",
            f"GEMM {tc['gemm']['size']}x{tc['gemm']['size']}x{tc['gemm']['size']}, fp16 in, fp32 sums",
        ),
        (axes[1], conv_rows, "cuDNN", f"{describe(tc['conv']['layer'])}, fp16"),
    ):
        lib = [r for r in rows if r["name"].startswith(ref_name)][0]
        colours = ["tab:green" if r["name"].startswith(ref_name) else "tab:blue" for r in rows]
        ax.barh([short_name(r["name"]) for r in rows], [r["tflops"] for r in rows], color=colours)
        for i, r in enumerate(rows):
            ax.text(
                r["tflops"] * 1.02,
                i,
                f"{r['ms']:.3f} ms, {short_name(lib['name'])}의 {lib['ms'] / r['ms']:.0%} 속도",
                va="center",
                fontsize=8,
            )
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
        ax.annotate(f"{kind} {r['format']}", (r["ms"], r["rel_err"]), textcoords="offset points", xytext=(5, 3), fontsize=8)
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


def ladder(results: dict) -> list[dict]:
    """The tensor-core GEMM ladder at 4096³ as shares of cuBLAS fp16 measured in the same run: v1-v4
    (WMMA, C = A·B) from the tensor_cores part, v5, v6 and v7 (wgmma, C = A·Bᵀ; their best
    config, and at 8192³ too) from the wgmma part."""
    rungs = [
        dict(version=r["name"].split()[-1], what="WMMA", ms=r["ms"], tflops=r["tflops"], share=r["vs_library"])
        for r in results["tensor_cores"]["gemm"]["rows"]
        if not r["name"].startswith("cuBLAS")
    ]
    wg = results.get("wgmma")
    if wg:
        for version, what in (("v5", "wgmma, cp.async"), ("v6", "wgmma, TMA"), ("v7", "wgmma, TMA, 생산자 워프그룹")):
            best = {}
            for entry in wg["sizes"]:
                rows = [r for r in entry["rows"] if f"GEMM {version} " in r["name"]]
                if not rows:  # measured before this version existed
                    break
                best[entry["size"]] = max(rows, key=lambda r: r["vs_library"])
            if not best:
                continue
            first = best[wg["sizes"][0]["size"]]
            rungs.append(
                dict(
                    version=version,
                    what=what,
                    ms=first["ms"],
                    tflops=first["tflops"],
                    share=first["vs_library"],
                    config=first["name"].rsplit("), ", 1)[1],
                    larger={size: r["vs_library"] for size, r in best.items()},
                )
            )
    return rungs


def plot_ladder(results: dict):
    """The tensor-core GEMM ladder v1-v7 at 4096³ as a share of cuBLAS fp16 (bars), with the wgmma
    versions' share at 8192³ marked."""
    import matplotlib.pyplot as plt

    rungs = ladder(results)
    fig, ax = plt.subplots(figsize=(10, 3.8))
    labels = [f"{r['version']} ({r['what']})" for r in rungs]
    ax.barh(labels, [100 * r["share"] for r in rungs], color=["tab:blue" if r["what"] == "WMMA" else "tab:orange" for r in rungs])
    for i, r in enumerate(rungs):
        larger = {size: share for size, share in r.get("larger", {}).items() if size != 4096}
        for size, share in larger.items():
            ax.plot(100 * share, i, "k|", ms=14)
        note = "".join(f"; {size}x{size}x{size}에서 {share:.0%} (|)" for size, share in larger.items())
        ax.text(
            100 * max([r["share"], *larger.values()]) + 1.5,
            i,
            f"{r['share']:.0%}, {r['ms']:.3f} ms, {r['tflops']:.0f} TFLOP/s{note}",
            va="center",
            fontsize=8,
        )
    ax.axvline(75, color="tab:red", ls=":", lw=1)
    ax.text(75.5, -0.55, "목표 75%", color="tab:red", fontsize=8)  # above the first bar (the axis is inverted)
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    ax.set_xlabel("cuBLAS fp16 속도 대비 % (같은 실행에서 잼, GEMM 4096x4096x4096)")
    ax.set_title(
        f"텐서 코어 GEMM 사다리 ({results['wgmma']['device'] if 'wgmma' in results else results['device']})", fontsize=10
    )
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
        ax.barh(
            [ALGORITHMS[r["name"]].label for r in ok],
            [r["ms"] for r in ok],
            color=["tab:orange" if i == 0 else "tab:blue" for i in range(len(ok))],
        )
        ax.axvline(layer["library"]["ms"], color="tab:green", lw=2, label=f"cuDNN fp32 {layer['library']['ms']:.3f} ms")
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
