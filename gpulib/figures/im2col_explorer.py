"""16.4, figure: the chapter's figure 16.2 as a widget. Pick an output element Y[n, k, y, x] and see
the R×S window of every input channel it reads, the column of X_col that im2col made of that
window, the row of W_mat that is filter k, and the element of Y_mat = W_mat · X_col they give.

The example is tiny and holds small integers so the dot product can be followed by hand; its
X_col comes from gpulib's im2col kernel and its Y_mat from ``gpulib.gemm.matmul``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpulib import reference as ref
from gpulib.conv.im2col import im2col
from gpulib.gemm import matmul
from gpulib.shapes import conv_output_size
from gpulib.style import png_bytes


@dataclass
class Im2colExample:
    """A tiny layer, its X_col, W_mat and Y_mat (all NumPy, copied back from the device)."""

    X: np.ndarray      # [N, C, H, W]
    W: np.ndarray      # [K, C, R, S]
    padding: int
    X_col: np.ndarray  # [C·R·S, N·H'·W']
    W_mat: np.ndarray  # [K, C·R·S]
    Y_mat: np.ndarray  # [K, N·H'·W']

    @classmethod
    def make(cls, N=2, C=2, H=5, W=5, K=2, R=3, padding=1, seed=0, gemm="library"):
        rng = np.random.default_rng(seed)
        X = rng.integers(1, 10, (N, C, H, W)).astype(np.float32)   # 1..9: no zero to hide behind
        Wt = rng.integers(-2, 3, (K, C, R, R)).astype(np.float32)
        X_col = im2col(X, R, R, padding)
        W_mat = Wt.reshape(K, C * R * R)
        Y_mat = matmul(W_mat, X_col, version=gemm)
        return cls(X, Wt, padding, X_col.copy_to_host(), W_mat, Y_mat.copy_to_host())

    @property
    def out_size(self):
        N, C, H, W = self.X.shape
        R = self.W.shape[2]
        return conv_output_size(H, R, self.padding, 1), conv_output_size(W, R, self.padding, 1)

    def column(self, n, y, x) -> int:
        """The X_col column of output pixel (y, x) of image n."""
        Ho, Wo = self.out_size
        return (n * Ho + y) * Wo + x

    def element(self, n, k, y, x) -> tuple[float, float]:
        """(Y_mat[k, column], the direct convolution's Y[n, k, y, x]) for the same element."""
        direct = ref.conv2d(self.X, self.W, None, self.padding)[n, k, y, x]
        return float(self.Y_mat[k, self.column(n, y, x)]), float(direct)


def figure(ex: Im2colExample, n: int, k: int, y: int, x: int):
    """Top: each channel of image n (padding drawn grey) with the window of (y, x) framed.
    Bottom: W_mat (row k framed) · X_col (column framed) = Y_mat (element framed)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    N, C, H, W = ex.X.shape
    K, _, R, S = ex.W.shape
    p = ex.padding
    col = ex.column(n, y, x)
    fig = plt.figure(figsize=(12, 6.4))
    grid = fig.add_gridspec(2, max(C, 3), height_ratios=[1, 1.05])
    for c in range(C):
        ax = fig.add_subplot(grid[0, c])
        padded = np.pad(ex.X[n, c], p, constant_values=np.nan)
        ax.imshow(np.nan_to_num(padded, nan=0), cmap="Blues", vmin=0, vmax=14)
        for (i, j), v in np.ndenumerate(padded):
            ax.text(j, i, "0" if np.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=8,
                    color="0.6" if np.isnan(v) else "black")
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), S, R, fill=False, lw=2.5, color="tab:red"))
        ax.set_title(f"X[{n}, {c}] (회색 0 = 패딩 {p})", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    ax = fig.add_subplot(grid[0, C]) if C < max(C, 3) else None
    if ax is not None:  # the filter k, one R×S slice per channel side by side
        filt = np.concatenate([np.pad(ex.W[k, c], ((0, 0), (0, 1)), constant_values=np.nan) for c in range(C)], axis=1)
        ax.imshow(np.nan_to_num(filt), cmap="RdBu", vmin=-3, vmax=3)
        for (i, j), v in np.ndenumerate(filt):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=8)
        ax.set_title(f"필터 W[{k}] (채널 {', '.join(map(str, range(C)))})", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    bottom = grid[1, :].subgridspec(1, 3, width_ratios=[ex.W_mat.shape[1], ex.X_col.shape[1], ex.Y_mat.shape[1]])
    panels = [
        (ex.W_mat, f"W_mat [{K}, {ex.W_mat.shape[1]}]: 행 {k} = 필터 {k}", (0, k, ex.W_mat.shape[1], 1), "RdBu"),
        (
            ex.X_col,
            f"X_col [{ex.X_col.shape[0]}, {ex.X_col.shape[1]}]: 열 {col} = 위의 창",
            (col, 0, 1, ex.X_col.shape[0]),
            "Blues",
        ),
        (ex.Y_mat, f"Y_mat = W_mat·X_col [{K}, {ex.Y_mat.shape[1]}]", (col, k, 1, 1), "PuOr"),
    ]
    for i, (mat, title, (x0, y0, w, h), cmap) in enumerate(panels):
        ax = fig.add_subplot(bottom[0, i])
        lim = np.abs(mat).max()
        ax.imshow(mat, cmap=cmap, aspect="auto", vmin=-lim if cmap != "Blues" else 0, vmax=lim)
        ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), w, h, fill=False, lw=2.5, color="tab:red"))
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    value, direct = ex.element(n, k, y, x)
    fig.suptitle(
        f"Y[{n}, {k}, {y}, {x}] = W_mat[{k}, :] · X_col[:, {col}] = {value:.0f}   (직접 conv: {direct:.0f})", fontsize=11
    )
    fig.tight_layout()
    return fig


def dot_product_text(ex: Im2colExample, n: int, k: int, y: int, x: int) -> str:
    """The dot product written out term by term, as HTML."""
    col = ex.column(n, y, x)
    terms = [f"({w:.0f})·{v:.0f}" for w, v in zip(ex.W_mat[k], ex.X_col[:, col])]
    value, direct = ex.element(n, k, y, x)
    return (
        f"<code>Y[{n},{k},{y},{x}] = " + " + ".join(terms) + f" = <b>{value:.0f}</b></code>"
        f" &nbsp; 직접 conv로 계산한 값: {direct:.0f}"
    )


class Im2colExplorer:
    """Sliders for n, k, y, x over ``figure``; the dot product written out under it."""

    def __init__(self, example: Im2colExample | None = None):
        import ipywidgets as widgets

        self.ex = example or Im2colExample.make()
        N, K = self.ex.X.shape[0], self.ex.W.shape[0]
        Ho, Wo = self.ex.out_size
        slider = lambda name, top, v: widgets.IntSlider(
            value=v,
            min=0,
            max=top,
            description=name,  # noqa: E731
            continuous_update=False,
        )
        self.n, self.k = slider("이미지 n", N - 1, 0), slider("채널 k", K - 1, 0)
        self.y, self.x = slider("출력 y", Ho - 1, 1), slider("출력 x", Wo - 1, 2)
        self.text = widgets.HTML()
        self.image = widgets.Image(format="png")
        for w in (self.n, self.k, self.y, self.x):
            w.observe(lambda change: self.update(), names="value")
        self.view = widgets.VBox([widgets.HBox([self.n, self.k]), widgets.HBox([self.y, self.x]), self.text, self.image])

    def selection(self):
        return self.n.value, self.k.value, self.y.value, self.x.value

    def update(self) -> None:
        self.text.value = dot_product_text(self.ex, *self.selection())
        self.image.value = png_bytes(figure(self.ex, *self.selection()))

    def show(self):
        from IPython.display import display

        display(self.view)
        self.update()
