"""16.5, figure: cuDNN's six convolution algorithms in one figure: a sketch of each (what it
builds in memory, what it computes) and its cost for one layer (multiplications, extra memory),
read from the algorithm registry (gpulib/conv/algorithms.py), which counts them with the
algorithms' own formulas (``costs``)."""

from __future__ import annotations

from gpulib.book_layers import LAYER, shapes
from gpulib.conv.algorithms import of_precision


def costs(layer: dict = LAYER) -> list[dict]:
    """For each fp32 algorithm of the registry: its name, label and cuDNN name, multiplications
    for the layer (None where it does not support the layer) and extra device memory in bytes."""
    X_shape, W_shape = shapes(layer)
    p, s = layer["padding"], layer["stride"]
    out = []
    for alg in of_precision("fp32"):
        supported = alg.supports(W_shape, s) is None
        out.append(dict(name=alg.name, label=alg.label, cudnn=alg.cudnn,
                        multiplications=alg.multiplications(X_shape, W_shape, p, s) if supported else None,
                        extra_bytes=alg.workspace(X_shape, W_shape, p, s) if supported else None))
    return out


def _matrix(ax, x, y, w, h, rows, cols, colour, label="", dashed=False, fontsize=8):
    """A w×h box at (x, y) ruled into rows×cols cells, with a label under it."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, fc=colour, ec="0.25", lw=1.2, ls="--" if dashed else "-",
                           alpha=0.45 if dashed else 0.9))
    for i in range(1, rows):
        ax.plot([x, x + w], [y + h * i / rows] * 2, color="0.4", lw=0.4)
    for j in range(1, cols):
        ax.plot([x + w * j / cols] * 2, [y, y + h], color="0.4", lw=0.4)
    if label:
        ax.text(x + w / 2, y - 0.25, label, ha="center", va="top", fontsize=fontsize)


def _arrow(ax, x0, x1, y, text=""):
    ax.annotate("", xy=(x1, y), xytext=(x0, y), arrowprops=dict(arrowstyle="->", lw=1.2))
    if text:
        ax.text((x0 + x1) / 2, y + 0.18, text, ha="center", fontsize=7)


def _sketch_gemm(ax, implicit=False, table=False):
    _matrix(ax, 0.1, 2.0, 1.0, 1.0, 4, 4, "#9ecae1", "X")
    colour = "#fdd0a2"
    _arrow(ax, 1.2, 1.9, 2.5, "모으기" if implicit else "im2col")
    _matrix(ax, 2.0, 0.8, 1.2, 3.2, 9, 4, colour, "타일만 (저장 안 함)" if implicit else "X_col (R·S배)",
            dashed=implicit)
    _matrix(ax, 3.6, 3.0, 1.8, 0.6, 2, 9, "#c7e9c0", "W_mat")
    ax.text(3.45, 2.2, "×", fontsize=14, ha="center")
    _arrow(ax, 4.5, 5.1, 1.8, "GEMM")
    _matrix(ax, 5.2, 1.4, 1.2, 0.6, 2, 4, "#dadaeb", "Y_mat")
    if table:
        _matrix(ax, 0.1, 0.2, 1.2, 1.2, 4, 3, "#fee391", "(c, r, s) 표")
        _arrow(ax, 1.3, 1.9, 0.8)


def _sketch_fft(ax):
    _matrix(ax, 0.1, 2.4, 0.9, 0.9, 4, 4, "#9ecae1", "X")
    _matrix(ax, 0.1, 0.6, 0.9, 0.9, 4, 4, "#c7e9c0", "W (0으로 채움)")
    for y in (2.85, 1.05):
        _arrow(ax, 1.1, 1.8, y, "FFT")
    _matrix(ax, 1.9, 2.4, 0.9, 0.9, 4, 3, "#fdae6b", "FFT(X)")
    _matrix(ax, 1.9, 0.6, 0.9, 0.9, 4, 3, "#fdae6b", "FFT(W)")
    _arrow(ax, 2.9, 4.2, 1.8, "곱해서 c로 합")
    _matrix(ax, 4.3, 1.5, 0.9, 0.9, 4, 3, "#fdae6b", "FFT(Y)")
    _arrow(ax, 5.3, 5.9, 1.95, "IFFT")
    _matrix(ax, 6.0, 1.6, 0.7, 0.7, 3, 3, "#dadaeb", "Y")


def _sketch_winograd(ax, fused=True):
    _matrix(ax, 0.1, 1.5, 1.0, 1.0, 4, 4, "#9ecae1", "입력 타일 d 4×4")
    _arrow(ax, 1.2, 1.9, 2.0, "BᵀdB")
    _matrix(ax, 2.0, 1.5, 1.0, 1.0, 4, 4, "#fdae6b", "V", dashed=fused)
    ax.text(3.3, 1.9, "⊙ U", fontsize=11, ha="center")
    _arrow(ax, 3.7, 4.2, 2.0, "c로 합")
    _matrix(ax, 4.3, 1.5, 1.0, 1.0, 4, 4, "#fdae6b", "M (곱 16개)", dashed=fused)
    _arrow(ax, 5.4, 5.9, 2.0, "AᵀMA")
    _matrix(ax, 6.0, 1.75, 0.5, 0.5, 2, 2, "#dadaeb", "Y 2×2")
    if fused:
        ax.text(3.4, 0.5, "한 커널: V와 M은 레지스터에", ha="center", fontsize=8)
    else:
        ax.text(3.4, 0.5, "커널 4개: V와 M을 전역 메모리에 쓰고 읽는다", ha="center", fontsize=8)


def draw(layer: dict = LAYER):
    """Top: a sketch of each algorithm; bottom: its multiplications and extra memory for ``layer``."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(15, 9.5))
    grid = fig.add_gridspec(3, 3, height_ratios=[1, 1, 1.25])
    sketches = [("GEMM (im2col + GEMM)", lambda ax: _sketch_gemm(ax)),
                ("IMPLICIT_GEMM", lambda ax: _sketch_gemm(ax, implicit=True)),
                ("IMPLICIT_PRECOMP_GEMM", lambda ax: _sketch_gemm(ax, implicit=True, table=True)),
                ("FFT", _sketch_fft),
                ("WINOGRAD (F(2x2, 3x3), fused)", lambda ax: _sketch_winograd(ax, True)),
                ("WINOGRAD_NONFUSED", lambda ax: _sketch_winograd(ax, False))]
    for i, (title, sketch) in enumerate(sketches):
        ax = fig.add_subplot(grid[i // 3, i % 3])
        sketch(ax)
        ax.set_xlim(-0.1, 6.9)
        ax.set_ylim(-0.3, 4.3)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=10)
    rows = [r for r in costs(layer) if r["multiplications"] is not None]
    names = [f"{r['label']}\n({r['cudnn']})" for r in rows]
    for j, (key, scale, label) in enumerate((("multiplications", 1e9, "곱셈 수 (G; FFT는 어림)"),
                                             ("extra_bytes", 1e6, "추가 메모리 (MB)"))):
        ax = fig.add_subplot(grid[2, j if j == 0 else slice(1, 3)])
        values = [r[key] / scale for r in rows]
        ax.barh(names, values, color="tab:blue" if j == 0 else "tab:orange")
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:.2f}" if v < 10 else f" {v:.0f}", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(values) * 1.25)
        ax.set_xlabel(label)
        ax.tick_params(axis="y", labelsize=7)
        if j == 1:
            ax.set_yticklabels([])
    L = layer
    fig.suptitle(f"cuDNN의 합성곱 알고리즘 여섯 가지와 그 비용 (N={L['N']} C={L['C']} {L['H']}x{L['W']} "
                 f"K={L['K']} {L['R']}x{L['S']}, padding {L['padding']}, stride {L['stride']})", fontsize=12)
    fig.tight_layout()
    return fig
