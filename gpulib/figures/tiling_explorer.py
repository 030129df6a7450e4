"""16.3, figure: the tiling explorer. Pick a tile size and a thread block of the direct convolution;
see the input tile with its halo that the block reads, the filter, the outputs it computes,
and how often each input element is read from global memory, for version 1 and version 2.

Every count comes from gpulib.trace running the real kernels on the simulator.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gpulib.conv import direct
from gpulib.shapes import conv_output_size
from gpulib.style import png_bytes
from gpulib.trace import trace


@lru_cache(maxsize=16)
def traced_layer(version: str, tile: int, H: int = 12, W: int = 12, C: int = 1, K: int = 2,
                 R: int = 3, padding: int = 1):
    """Trace one small layer (one image) with the given version and tile; cached per setting."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1, C, H, W)).astype(np.float32)
    Wt = rng.standard_normal((K, C, R, R)).astype(np.float32)
    b = np.zeros(K, np.float32)
    Ho, Wo = conv_output_size(H, R, padding, 1), conv_output_size(W, R, padding, 1)
    Y = np.full((1, K, Ho, Wo), np.nan, np.float32)
    grid_xy = ((Wo + tile - 1) // tile, (Ho + tile - 1) // tile)
    names = ("X", "W", "b", "Y")
    if version == "v1":
        t = trace(direct.conv2d_v1_kernel, (*grid_xy, K), (tile, tile), X, Wt, b, Y, padding, 1, names=names)
    else:  # version 2 with all K output channels in one block
        kernel = direct.conv2d_v2_kernel(R, R, 1, K, tile)
        t = trace(kernel, (*grid_xy, 1), (tile, tile), X, Wt, b, Y, padding, names=names)
    return t, dict(H=H, W=W, C=C, K=K, R=R, padding=padding, Ho=Ho, Wo=Wo, grid=grid_xy)


def block_picture(version: str, tile: int, bx: int, by: int):
    """A matplotlib figure: X with the block's reads as a heat map, the filter, and Y's tile."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    t, L = traced_layer(version, tile)
    bz = 0
    reads = t.block_element_reads("X", (bx, by, bz))[0, 0]
    fig, (ax_x, ax_w, ax_y) = plt.subplots(1, 3, figsize=(12, 4.2),
                                           gridspec_kw=dict(width_ratios=[L["W"], L["R"] * 1.6, L["Wo"]]))
    im = ax_x.imshow(reads, cmap="magma_r", vmin=0, vmax=max(1, int(t.element_reads("X").max())))
    fig.colorbar(im, ax=ax_x, fraction=0.046, label="이 블록의 전역 읽기 횟수")
    p = L["padding"]
    # the input tile with its halo: rows by·tile - p ... by·tile + tile - 1 + R - 1 - p
    x0, y0 = bx * tile - p, by * tile - p
    span = tile + L["R"] - 1
    ax_x.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), span, span, fill=False, lw=2.5, color="tab:blue"))
    ax_x.set_title(f"입력 X (12×12): 파란 틀 = 입력 타일 + halo {span}×{span}", fontsize=10)
    ax_w.imshow(t.element_reads("W")[0, 0], cmap="Greens")
    ax_w.set_title("필터 W[0] (전체 읽기 횟수)", fontsize=10)
    for (r, s), v in np.ndenumerate(t.element_reads("W")[0, 0]):
        ax_w.text(s, r, str(v), ha="center", va="center", fontsize=8)
    owned = np.zeros((L["Ho"], L["Wo"]))
    owned[by * tile:(by + 1) * tile, bx * tile:(bx + 1) * tile] = 1
    ax_y.imshow(owned, cmap="Blues", vmin=0, vmax=1.5)
    ax_y.set_title(f"출력 Y: 블록 ({bx}, {by})가 계산하는 {tile}×{tile} 타일", fontsize=10)
    for ax in (ax_x, ax_w, ax_y):
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig


class TileExplorer:
    """Version, tile size and block pickers over block_picture, with the block's read counts."""

    def __init__(self):
        import ipywidgets as widgets

        self.version = widgets.ToggleButtons(options=[("버전 1 (전역 메모리)", "v1"), ("버전 2 (셰어드 타일)", "v2")],
                                             value="v1", description="커널")
        self.tile = widgets.Dropdown(options=[4, 6, 8], value=4, description="타일")
        self.bx = widgets.IntSlider(value=1, min=0, max=2, description="blockIdx.x", continuous_update=False)
        self.by = widgets.IntSlider(value=1, min=0, max=2, description="blockIdx.y", continuous_update=False)
        self.text = widgets.HTML()
        self.image = widgets.Image(format="png")
        for w in (self.version, self.tile, self.bx, self.by):
            w.observe(lambda change: self.update(), names="value")
        self.view = widgets.VBox([self.version, widgets.HBox([self.tile, self.bx, self.by]), self.text, self.image])

    def update(self) -> None:
        t, L = traced_layer(self.version.value, self.tile.value)
        gx, gy = L["grid"]
        self.bx.max, self.by.max = gx - 1, gy - 1
        block = (min(self.bx.value, gx - 1), min(self.by.value, gy - 1), 0)
        x_reads = t.block_reads("X", block)
        shared = sum(t.block_reads(name, block) for name, r in t.arrays.items() if r.kind == "shared")
        first = (block[0] + gx * block[1]) * t.threads_per_block
        outputs = int(t.arrays["Y"].writes_by_thread[first:first + t.threads_per_block].sum())
        self.text.value = (f"블록 {block[:2]}: X 전역 읽기 {x_reads}회, 셰어드 읽기 {shared}회, "
                           f"출력 {outputs}개 · 전체 launch: 전역 읽기 {t.global_reads()}회, "
                           f"경쟁 상태 {t.race_count}건")
        self.image.value = png_bytes(block_picture(self.version.value, self.tile.value, *block[:2]))

    def show(self):
        from IPython.display import display

        display(self.view)
        self.update()
