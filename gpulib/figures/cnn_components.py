"""16.2, figures: the convolution's rules drawn from gpulib.cnn.anatomy.

    padding_stride     where a 3x3 window lands on a padded input for a few (padding, stride)
    receptive_field    the input span that one output of a stack of layers sees, layer by layer
    channel_sum        Y[n, k] as the sum of one 2-D correlation per input channel
    transposed_conv    dX from dY: dilated, padded, correlated with the flipped filter
"""

from __future__ import annotations

import numpy as np

from gpulib.cnn import anatomy
from gpulib.shapes import conv_output_size


def padding_stride(H: int = 5, R: int = 3, cases=((0, 1), (1, 1), (1, 2), (0, 2))):
    """One panel per (padding, stride): the padded H x H input (padding grey), the window's
    first positions along the top row outlined, each output position's window centre dotted."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(1, len(cases), figsize=(3.3 * len(cases), 3.6))
    for ax, (p, s) in zip(axes, cases):
        size = H + 2 * p
        grid = np.zeros((size, size))
        grid[p:p + H, p:p + H] = 1
        ax.imshow(grid, cmap="Blues", vmin=-0.6, vmax=1.6)
        ax.set_xticks(np.arange(-0.5, size), minor=True)
        ax.set_yticks(np.arange(-0.5, size), minor=True)
        ax.grid(which="minor", color="white", lw=1)
        ax.tick_params(which="both", length=0)
        Ho = conv_output_size(H, R, p, s)
        for y in range(Ho):
            for x in range(Ho):
                ax.plot(x * s + R // 2, y * s + R // 2, "o", color="tab:red", ms=4)
        for x, colour in zip(range(min(Ho, 2)), ("tab:red", "tab:orange")):
            inset = 0.1 + 0.1 * x  # inside the cells, so the two frames and the axes' edge stay apart
            ax.add_patch(Rectangle((x * s - 0.5 + inset, -0.5 + inset), R - 2 * inset, R - 2 * inset,
                                   fill=False, lw=2.2, color=colour))
        ax.set_xticklabels([]), ax.set_yticklabels([])
        ax.set_title(f"패딩 {p}, 스트라이드 {s}\nH' = ⌊({H}+{2 * p}−{R})/{s}⌋+1 = {Ho}", fontsize=9)
    fig.suptitle(f"{H}×{H} 입력(진한 칸)과 {R}×{R} 창: 빨간 점 하나가 출력 하나, 옅은 칸은 패딩, "
                 "빨강과 주황 틀은 처음 두 창", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def receptive_field(layers):
    """Bars, one per layer of ``layers`` ((name, R, stride)): the input pixels one output sees."""
    import matplotlib.pyplot as plt

    rows = anatomy.receptive_field(layers)
    widest = rows[-1]["size"]
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(rows) + 1.4))
    for i, r in enumerate(rows):
        ax.barh(i, r["size"], left=(widest - r["size"]) / 2, color="tab:blue", alpha=0.35 + 0.6 * i / len(rows))
        ax.text(widest / 2, i, f"{r['size']} 픽셀 (이웃 출력 사이 {r['jump']} 픽셀)", ha="center", va="center",
                fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['name']} {r['R']}×{r['R']}, 스트라이드 {r['stride']}" for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("입력 픽셀 (한 축)")
    ax.set_title("수용 영역: 층을 지날 때마다 출력 하나가 보는 입력의 폭", fontsize=10)
    fig.tight_layout()
    return fig


def channel_sum(X, W, b=None, padding: int = 1, n: int = 0, k: int = 0):
    """Rows c = 0..C-1: input channel c, filter slice W[k, c], their 2-D correlation; the last
    column their sum (plus b[k]), which is output channel k."""
    import matplotlib.pyplot as plt

    terms = anatomy.per_channel_terms(X, W, padding, 1, n, k)
    C = terms.shape[0]
    total = terms.sum(axis=0) + (0.0 if b is None else float(np.asarray(b)[k]))
    fig, axes = plt.subplots(C, 4, figsize=(9.5, 2.1 * C))
    lim = np.abs(terms).max()
    for c in range(C):
        panels = ((np.asarray(X)[n, c], f"입력 채널 c={c}", "gray_r", None),
                  (np.asarray(W)[k, c], f"필터 W[{k}, {c}]", "RdBu_r", np.abs(np.asarray(W)[k]).max()),
                  (terms[c], f"채널 {c}의 몫", "RdBu_r", lim))
        for ax, (img, title, cmap, v) in zip(axes[c, :3], panels):
            ax.imshow(img, cmap=cmap, vmin=None if v is None else -v, vmax=v)
            ax.set_title(title, fontsize=9)
            ax.axis("off")
        axes[c, 3].axis("off")
    ax = axes[C // 2, 3]
    ax.imshow(total, cmap="RdBu_r", vmin=-np.abs(total).max(), vmax=np.abs(total).max())
    ax.set_title(f"합 + b[{k}] = 출력 채널 Y[{n}, {k}]", fontsize=9)
    ax.axis("on"), ax.set_xticks([]), ax.set_yticks([])
    fig.suptitle("출력 채널 하나 = 입력 채널마다 2차원 상관 하나, 그리고 그것들의 합", fontsize=10)
    fig.tight_layout()
    return fig


def transposed_conv(dY, W, input_shape, padding: int, stride: int):
    """Four panels for one channel pair (K = C = 1): dY, dY dilated and padded, the filter flipped,
    and dX, which the correlation of the second with the third gives."""
    import matplotlib.pyplot as plt

    dY, W = np.asarray(dY, np.float64), np.asarray(W, np.float64)
    R = W.shape[2]
    dX = anatomy.transposed_conv(dY, W, input_shape, padding, stride)
    D = anatomy.dilate(dY, stride)
    edge = R - 1 - padding
    H = input_shape[2]
    left = (H + 2 * padding - R) - stride * (dY.shape[2] - 1)
    D = np.pad(D, ((0, 0), (0, 0), (edge, edge + left), (edge, edge + left))) if edge >= 0 else D
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.6), gridspec_kw=dict(width_ratios=[dY.shape[3], D.shape[3], R, H]))
    panels = ((dY[0, 0], f"dY ({dY.shape[2]}×{dY.shape[3]})"),
              (D[0, 0], f"스트라이드 {stride}: 0을 끼우고\n테두리 {edge}칸을 0으로"),
              (W[0, 0, ::-1, ::-1], "필터를 180° 돌림"),
              (dX[0, 0], f"dX ({H}×{input_shape[3]}) = 둘의 상관"))
    for ax, (img, title) in zip(axes, panels):
        v = np.abs(img).max() or 1.0
        ax.imshow(img, cmap="RdBu_r", vmin=-v, vmax=v)
        for (r, c), value in np.ndenumerate(img):
            if img.size <= 121 and value != 0:
                ax.text(c, r, f"{value:.0f}", ha="center", va="center", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    fig.suptitle(f"dX는 전치 합성곱: 패딩 {padding}, 스트라이드 {stride}의 역전파를 보통의 합성곱으로", fontsize=10)
    fig.tight_layout()
    return fig
