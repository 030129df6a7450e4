"""16.6's figures, drawn from benchmarks/results/book_model.json and the other stored results."""

from __future__ import annotations

import numpy as np

from gpulib.playbook import roofline

SECTION_COLORS = {"16.1": "#4C72B0", "16.2": "#DD8452", "16.3": "#55A868", "16.4": "#C44E52", "16.5": "#8172B3",
                  "16.5b": "#B07AA1", "16.6": "#937860", "library": "#333333", "": "#999999"}


def plot_breakdown(breakdowns: list[dict]):
    """One horizontal bar per training step, split into its operations (GPU ms), largest labelled."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(breakdowns), 1, figsize=(9, 1.6 + 1.1 * len(breakdowns)), squeeze=False)
    cmap = plt.get_cmap("tab20")
    names = list(dict.fromkeys(o["op"] for bd in breakdowns for o in bd["ops"]))  # one colour per operation
    for ax, bd in zip(axes[:, 0], breakdowns):
        left = 0.0
        total = sum(o["ms"] for o in bd["ops"])
        for o in bd["ops"]:
            color = cmap(names.index(o["op"]) % 20)
            ax.barh(0, o["ms"], left=left, color=color, edgecolor="white", linewidth=0.5)
            if o["ms"] > 0.12 * total:
                ax.text(left + o["ms"] / 2, 0, f"{o['op']}\n{o['ms']:.2f} ms", ha="center", va="center", fontsize=8)
            left += o["ms"]
        ax.set_yticks([])
        ax.set_xlim(0, total * 1.01)
        fused = ", 융합 커널" if bd.get("fused") else ""
        ax.set_title(f"배치 {bd['batch']}, {' / '.join(bd['algorithms'])}, dW·db 합산: {bd['reduction']}{fused} — "
                     f"GPU {total:.2f} ms, 벽시계 {bd['step_wall_ms']:.2f} ms", fontsize=9)
    axes[-1, 0].set_xlabel("한 학습 스텝의 GPU 시간 (ms)")
    fig.tight_layout()
    return fig


def plot_roofline(rows: list[dict], limits: dict, measured: dict | None = None, device: str = ""):
    """Every kernel with FLOPs under the fp32 and fp16 roofs (log-log), coloured by section."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.2))
    intensity = np.logspace(-1, 3.5, 200)
    for precision, style in (("fp32", "-"), ("fp16", "--")):
        roof = np.minimum(limits[precision], intensity * limits["hbm"]) / roofline.TB
        ax.plot(
            intensity,
            roof,
            style,
            color="black",
            linewidth=1.2,
            label=f"{precision} 지붕 (데이터시트: {limits[precision] / roofline.TB:.0f} TFLOP/s, "
            f"HBM {limits['hbm'] / roofline.TB:.2f} TB/s)",
        )
    for precision in ("fp32", "fp16") if measured else ():
        rate = measured[f"cublas_{precision}"] / roofline.TB
        ax.axhline(rate, color="gray", linestyle=":", linewidth=1)
        ax.text(0.12, rate * 1.08, f"측정: cuBLAS {precision} {rate:.0f}", fontsize=7, color="gray")
    seen = set()
    for r in rows:
        if not r["flop"]:
            continue
        color = SECTION_COLORS.get(r["section"], "#999999")
        marker = "s" if r["precision"] == "fp16" else "o"
        label = r["section"] if r["section"] not in seen else None
        seen.add(r["section"])
        ax.scatter(r["intensity"], r["tflops"], color=color, marker=marker, s=28, label=label, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("산술 강도 (FLOP / 최소 바이트)")
    ax.set_ylabel("달성 속도 (TFLOP/s)")
    elsewhere = {}  # rows timed on another GPU than the roofs' (stored results come from several runs)
    for r in rows:
        if r.get("device") and r["device"] not in device:
            elsewhere.setdefault(r["device"], set()).add(r["section"])
    note = "".join(f"; {', '.join(sorted(sections))}의 점은 {gpu}에서 잼" for gpu, sections in sorted(elsewhere.items()))
    ax.set_title(f"루프라인: 책의 커널과 라이브러리 ({device}{note}; ○ fp32, □ fp16 텐서 코어)", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    fig.tight_layout()
    return fig


def plot_memory(rows: list[dict]):
    """The estimator's peak against the measured one, per configuration and batch."""
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys(r["config"] for r in rows))
    fig, axes = plt.subplots(1, len(configs), figsize=(3.3 * len(configs), 3.2), sharey=True)
    for ax, config in zip(np.atleast_1d(axes), configs):
        sel = [r for r in rows if r["config"] == config]
        x = np.arange(len(sel))
        ax.bar(x - 0.2, [r["estimate"] / 2**20 for r in sel], 0.4, label="추정", color="#4C72B0")
        ax.bar(x + 0.2, [r["measured_live"] / 2**20 for r in sel], 0.4, label="측정 (살아 있는 배열)", color="#DD8452")
        ax.set_xticks(x, [str(r["batch"]) for r in sel])
        ax.set_xlabel("배치")
        ax.set_title(config, fontsize=9)
        ax.set_yscale("log")
    np.atleast_1d(axes)[0].set_ylabel("최대 메모리 (MiB)")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_channels(rows: list[dict]):
    """cuDNN fp16 speed by channel count: multiples of 8 against the rest."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    colors = ["#55A868" if r["C"] % 8 == 0 else "#C44E52" for r in rows]
    ax.bar([str(r["C"]) for r in rows], [r["tflops"] for r in rows], color=colors)
    ax.set_xlabel("C = K (초록: 8의 배수)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("cuDNN fp16 (channels_last), 16.3 레이어의 채널 수만 바꿔서", fontsize=10)
    fig.tight_layout()
    return fig


def plot_step_against_pytorch(pt: dict):
    """One bar per way of running the same training step (wall ms, median), PyTorch eager and
    torch.compile (where it compiled; else the title says why) last, each labelled with its
    multiple of PyTorch eager's time; the step's summed kernel time as a line."""
    import matplotlib.pyplot as plt

    rows = [("gpulib, 매번 실행", pt["gpulib_ms"])]
    if "replayed_ms" in pt:
        rows += [("gpulib, 기록 후 재생", pt["replayed_ms"]), ("gpulib, CUDA 그래프", pt["graph_ms"])]
    for name, label in (("staged", "빠른 backward"), ("fused", "빠른 backward + 융합")):
        if f"{name}_graph_ms" in pt:
            rows += [(f"gpulib, {label}, 재생", pt[f"{name}_replayed_ms"]),
                     (f"gpulib, {label}, CUDA 그래프", pt[f"{name}_graph_ms"])]
    rows.append(("PyTorch eager", pt["torch_ms"]))
    compiled = pt.get("torch_compile") or {}
    if compiled.get("ms"):
        rows.append(("PyTorch torch.compile", compiled["ms"]))
    fig, ax = plt.subplots(figsize=(7.5, 0.6 + 0.55 * len(rows)))
    names, ms = [r[0] for r in rows][::-1], [r[1] for r in rows][::-1]
    colours = ["tab:green" if n.startswith("PyTorch") else "tab:blue" for n in names]
    ax.barh(names, ms, color=colours)
    for y, value in enumerate(ms):
        ax.text(value, y, f" {value:.2f} ms ({value / pt['torch_ms']:.2f}x)", va="center", fontsize=9)
    if pt.get("gpu_ms"):
        ax.axvline(pt["gpu_ms"], color="tab:red", linestyle="--", linewidth=1, label=f"커널 시간의 합 {pt['gpu_ms']:.2f} ms")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlim(0, max(ms) * 1.35)
    ax.set_xlabel(f"학습 스텝 하나의 벽시계 시간 (ms, 배치 {pt['batch']}, {pt['measured']['device']})")
    if compiled.get("note"):  # torch.compile did not run on the measuring machine: say why
        ax.set_title(f"torch.compile: {compiled['note'][:90]}", fontsize=8)
    fig.tight_layout()
    return fig
