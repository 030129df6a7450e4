"""16.5, figures: who holds what in a tensor-core instruction, and how an asynchronous copy
pipeline overlaps the copies with the tensor-core work.

    fragment_layout   the A (16x16), B (16x8) and C (16x8) tiles of mma.m16n8k16, every
                      element coloured by the lane that holds it, two lanes' registers named
    pipeline          a timeline of tensor-core GEMM v3 (copy, barrier, multiply, barrier) against
                      v4 (two shared tiles: the copy of step k+1 runs while step k multiplies)
    warpgroup_accumulators  the 64 x N accumulator tile of one wgmma m64nNk16: which of the
                      warpgroup's 128 threads (and which warp) holds each element
    swizzle_atom      one 8x128-byte atom of a wgmma operand tile without and with Hopper's
                      128-byte swizzle: which logical chunk sits where, and the banks one column
                      of chunks falls on
    tap_boxes         conv v4's TMA boxes: for a few filter taps (r, s), the patch of output
                      pixels moved by (r - padding, s - padding) over the input image, with the
                      cells outside the image that the copy engine fills with zeros
"""

from __future__ import annotations

import numpy as np

from gpulib.tensorcore import layout, smem_layout, wgmma_model

SHOWN_LANES = (0, 5)


def fragment_layout(lanes=SHOWN_LANES):
    """Three panels: A, B and C of one mma.m16n8k16, each element's lane as a colour (lanes of
    one group of four share a hue family), the registers of ``lanes`` written in their cells."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 5.4), gridspec_kw=dict(width_ratios=[16, 8, 8]))
    cmap = plt.get_cmap("tab20b", 32)
    for ax, matrix, title in zip(axes, "abc", ("A: 16×16 fp16, 레인마다 a0..a7",
                                                "B: 16×8 fp16, 레인마다 b0..b3",
                                                "C, D: 16×8 fp32, 레인마다 c0..c3")):
        lane_of, index_of = layout.owners(matrix)
        shown = np.isin(lane_of, lanes)
        ax.imshow(lane_of, cmap=cmap, vmin=-0.5, vmax=31.5, alpha=np.where(shown, 1.0, 0.35))
        for (r, c), lane in np.ndenumerate(lane_of):
            if lane in lanes:
                ax.text(c, r, f"{lane}\n{matrix}{index_of[r, c]}", ha="center", va="center", fontsize=6.5,
                        color="white")
            else:
                ax.text(c, r, str(lane), ha="center", va="center", fontsize=5.5, color="0.25")
        rows, cols = lane_of.shape
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.tick_params(labelsize=6)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("열 (k)" if matrix == "a" else "열 (n)")
        ax.set_ylabel("행 (m)" if matrix != "b" else "행 (k)")
    fig.suptitle(
        f"mma.m16n8k16 한 번의 피연산자: 칸의 숫자는 그 원소를 가진 레인 (진하게: 레인 {', '.join(map(str, lanes))}의 레지스터)",
        fontsize=11,
    )
    fig.tight_layout()
    return fig


def pipeline(steps: int = 4, copy: float = 3.0, multiply: float = 2.0, barrier: float = 0.3):
    """Two timelines of one block over ``steps`` K steps (durations are relative, not measured):
    v3 copies tile k into shared memory, waits at a barrier, multiplies, waits again; v4 issues
    the copy of tile k+1 into the other shared tile and multiplies tile k meanwhile."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colours = dict(copy=("tab:blue", "tab:cyan"), mma="tab:orange", barrier="0.5")
    fig, ax = plt.subplots(figsize=(12, 4.2))

    def bar(row, start, length, colour, text=""):
        ax.barh(row, length, left=start, height=0.6, color=colour, edgecolor="white")
        if text:
            ax.text(start + length / 2, row, text, ha="center", va="center", fontsize=8, color="white")

    t = 0.0  # v3: copy through registers, barrier, multiply, barrier; nothing overlaps
    for k in range(steps):
        bar(3, t, copy, colours["copy"][0], f"타일 {k} 복사")
        t += copy
        bar(3, t, barrier, colours["barrier"])
        t += barrier
        bar(2.3, t, multiply, colours["mma"], f"타일 {k} 곱")
        t += multiply
        bar(3, t, barrier, colours["barrier"])
        t += barrier
    v3_end = t
    # v4: tile 0's copy first; then at each step the copy of k+1 (into the other buffer) starts
    # and the tensor cores multiply tile k; the step ends when both are done (wait + barrier)
    bar(1, 0.0, copy, colours["copy"][0], "타일 0, 버퍼 0")
    t = copy
    for k in range(steps):
        bar(1, t, barrier, colours["barrier"])
        t += barrier
        if k + 1 < steps:
            bar(1, t, copy, colours["copy"][(k + 1) % 2], f"타일 {k + 1}, 버퍼 {(k + 1) % 2}")
        bar(0.3, t, multiply, colours["mma"], f"타일 {k} 곱 (버퍼 {k % 2})")
        t += max(copy if k + 1 < steps else 0.0, multiply)
    v4_end = t + barrier
    ax.axvline(v3_end, color="tab:red", ls=":", lw=1)
    ax.axvline(v4_end, color="tab:green", ls=":", lw=1)
    ax.text(v3_end, 3.55, "v3 끝", color="tab:red", ha="right", fontsize=8)
    ax.text(v4_end, 1.55, "v4 끝", color="tab:green", ha="right", fontsize=8)
    ax.set_yticks([3, 2.3, 1, 0.3])
    ax.set_yticklabels(["v3 복사 (레지스터 경유)", "v3 텐서 코어", "v4 cp.async 복사", "v4 텐서 코어"])
    ax.set_xlabel("시간 (개념도: 길이는 비율만 뜻한다, 측정값이 아니다)")
    ax.legend(
        handles=[
            Patch(color=colours["copy"][0], label="전역에서 셰어드로 복사 (버퍼 0)"),
            Patch(color=colours["copy"][1], label="복사 (버퍼 1)"),
            Patch(color=colours["mma"], label="텐서 코어 곱"),
            Patch(color=colours["barrier"], label="기다림 + 장벽"),
        ],
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.22),
        ncol=4,
    )
    ax.set_xlim(0, v3_end * 1.02)
    ax.set_title(f"K 단계 {steps}개: v3는 복사와 곱이 번갈아, v4는 다음 타일의 복사가 지금 타일의 곱과 겹친다", fontsize=10)
    fig.tight_layout()
    return fig


def ring_schedule(steps: int, stages: int, copy: float, multiply: float) -> list[dict]:
    """When each tile of GEMM v6's ring is copied and multiplied (relative times, a model): tile k's
    copy is asked for once its buffer is free (the multiplies of tile k - stages are done and the
    block has passed the barrier after issuing tile k - stages + 1's); its multiplies start when
    its bytes have landed and the previous tile's multiplies are done."""
    tiles = []
    for k in range(steps):
        if k < stages - 1:
            start = 0.0
        else:
            freed = tiles[k - stages]["mma_end"] if k >= stages else 0.0
            start = max(tiles[k - stages + 1]["mma_start"], freed)
        mma_start = max(start + copy, tiles[-1]["mma_end"] if tiles else 0.0)
        tiles.append(
            dict(
                tile=k,
                buffer=k % stages,
                copy_start=start,
                copy_end=start + copy,
                mma_start=mma_start,
                mma_end=mma_start + multiply,
            )
        )
    return tiles


def ring_pipeline(steps: int = 8, stages: int = 4, copy: float = 3.0, multiply: float = 2.0):
    """One row per shared buffer of GEMM v6's ring: when TMA fills it (blue) and when the warpgroups'
    wgmma read it (orange), from ``ring_schedule``; the title says how busy the tensor cores are."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    tiles = ring_schedule(steps, stages, copy, multiply)
    fig, ax = plt.subplots(figsize=(12, 0.7 * stages + 1.8))
    for t in tiles:
        row = stages - 1 - t["buffer"]
        ax.barh(row + 0.17, copy, left=t["copy_start"], height=0.3, color="tab:blue", edgecolor="white")
        ax.barh(row - 0.17, multiply, left=t["mma_start"], height=0.3, color="tab:orange", edgecolor="white")
        ax.text(t["copy_start"] + copy / 2, row + 0.17, f"TMA {t['tile']}", ha="center", va="center", fontsize=7, color="white")
        ax.text(t["mma_start"] + multiply / 2, row - 0.17, f"곱 {t['tile']}", ha="center", va="center", fontsize=7, color="white")
    end = tiles[-1]["mma_end"]
    busy = steps * multiply / end
    ax.set_yticks(range(stages))
    ax.set_yticklabels([f"버퍼 {stages - 1 - r}" for r in range(stages)])
    ax.set_xlabel("시간 (모형: 길이는 비율만 뜻한다, 측정값이 아니다)")
    ax.set_title(f"버퍼 {stages}개, 복사 {copy:g} : 곱 {multiply:g} — 텐서 코어가 일하는 몫 {busy:.0%}")
    ax.legend(
        handles=[Patch(color="tab:blue", label="TMA가 버퍼를 채움"), Patch(color="tab:orange", label="wgmma가 버퍼를 읽음")],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
    )
    fig.tight_layout()
    return fig


def swizzle_atom(column: int = 0):
    """Two panels, 8 rows x 8 chunks of 16 bytes (one 1024-byte atom of a K-major fp16 tile):
    without a swizzle and with the 128-byte one. Each cell shows the logical chunk (k = 8c..8c+7)
    stored there; the cells of logical chunk ``column`` are outlined, with the banks they use."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    cmap = plt.get_cmap("tab10")
    for ax, mode, title in zip(axes, ("none", "128B"), ("스위즐 없음", "128바이트 스위즐 (Hopper wgmma, TMA)")):
        table = smem_layout.atom_chunks(mode)
        ax.imshow(table, cmap=cmap, vmin=-0.5, vmax=9.5, alpha=0.55)
        for (r, c), logical in np.ndenumerate(table):
            ax.text(c, r, f"k {8 * logical}..{8 * logical + 7}", ha="center", va="center", fontsize=7)
            if logical == column:
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, linewidth=2.2, edgecolor="black"))
        ax.set_xticks(range(8), [f"{16 * c}-{16 * c + 15}B\n뱅크 {4 * c}-{4 * c + 3}" for c in range(8)], fontsize=6.5)
        ax.set_yticks(range(8), [f"행 {r}" for r in range(8)], fontsize=8)
        passes = smem_layout.bank_passes(mode, column)
        how = "뱅크 충돌 없이 한 번에 읽는다" if passes == 1 else f"같은 뱅크에 몰려 {passes}번에 나눠 읽는다"
        ax.set_title(f"{title}\nk {8 * column}..{8 * column + 7}의 8행: {how}", fontsize=10)
    fig.suptitle("K-major fp16 타일의 아톰 하나(8행 × 128바이트): 칸은 16바이트, 글자는 그 칸에 든 k", fontsize=11)
    fig.tight_layout()
    return fig


def warpgroup_accumulators(n: int = 16, threads=(0, 37)):
    """The 64 x ``n`` fp32 result of one wgmma m64nNk16, each element coloured by the warp whose
    thread holds it and labelled with that thread; the registers of ``threads`` named (d0...)
    in red."""
    import matplotlib.pyplot as plt

    owner = np.empty((64, n), np.int64)
    index = np.empty((64, n), np.int64)
    for t in range(128):
        for i in range(n // 2):
            owner[wgmma_model.accumulator_element(t, i, n)] = t
            index[wgmma_model.accumulator_element(t, i, n)] = i
    fig, ax = plt.subplots(figsize=(0.42 * n + 2.5, 11))
    warp = owner // 32
    ax.imshow(warp, cmap=plt.get_cmap("Pastel1"), vmin=-0.5, vmax=8.5, aspect="auto")
    for (r, c), t in np.ndenumerate(owner):
        bold = t in threads
        ax.text(
            c,
            r,
            f"{t}:d{index[r, c]}" if bold else str(t),
            ha="center",
            va="center",
            fontsize=5.5 if bold else 5,
            color="darkred" if bold else "0.2",
        )
    ax.set_xticks(range(n), [str(c) for c in range(n)], fontsize=6)
    ax.set_yticks(range(0, 64, 4), [str(r) for r in range(0, 64, 4)], fontsize=6)
    for w in range(1, 4):
        ax.axhline(16 * w - 0.5, color="black", linewidth=1.2)
    ax.set_xlabel("열 (n)")
    ax.set_ylabel("행 (m): 16행마다 워프 하나")
    ax.set_title(
        f"wgmma m64n{n}k16의 결과 D: 칸의 숫자는 그 원소를 가진 스레드 (0..127), 붉은 글씨: 스레드 "
        f"{', '.join(map(str, threads))}의 레지스터",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def tap_box(corner, tap, padding: int) -> tuple[int, int]:
    """The input row and column where conv v4's box for filter tap (r, s) starts, for the patch of
    output pixels whose top-left pixel is ``corner`` (stride 1): the patch moved by the tap's
    offset, (y0 + r - padding, x0 + s - padding), as ``conv._request_step`` asks TMA for it."""
    (y0, x0), (r, s) = corner, tap
    return y0 + r - padding, x0 + s - padding


def tap_boxes(image=(5, 12), patch=(2, 8), corner=(0, 0), padding: int = 1, taps=((0, 0), (1, 1), (2, 2))):
    """One panel per filter tap: the input image (grey) with its padding ring, the block's patch
    of ``patch`` output pixels at ``corner`` (dashed), and the TMA box the tap needs (orange inside
    the image, hatched red where it leaves it: those cells arrive as zeros, the padding)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    H, W = image
    ph, pw = patch
    fig, axes = plt.subplots(1, len(taps), figsize=(4.4 * len(taps), 3.2))
    for ax, tap in zip(np.atleast_1d(axes), taps):
        by, bx = tap_box(corner, tap, padding)
        zeros = 0
        for y in range(-padding, H + padding):
            for x in range(-padding, W + padding):
                inside = 0 <= y < H and 0 <= x < W
                in_box = by <= y < by + ph and bx <= x < bx + pw
                face = "tab:orange" if in_box and inside else ("0.85" if inside else "white")
                ax.add_patch(
                    Rectangle(
                        (x, y),
                        1,
                        1,
                        facecolor=face,
                        edgecolor="0.6",
                        linewidth=0.5,
                        hatch="///" if in_box and not inside else None,
                    )
                )
                if in_box and not inside:
                    zeros += 1
                    ax.add_patch(Rectangle((x, y), 1, 1, fill=False, edgecolor="tab:red", linewidth=0.8))
        ax.add_patch(Rectangle((corner[1], corner[0]), pw, ph, fill=False, edgecolor="tab:blue", linewidth=2, linestyle="--"))
        ax.set_xlim(-padding - 0.2, W + padding + 0.2)
        ax.set_ylim(H + padding + 0.2, -padding - 0.2)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"탭 (r, s) = {tap}: 상자는 ({by}, {bx})부터\n그림 밖 {zeros}칸은 TMA가 0으로 채운다", fontsize=9)
    fig.suptitle(
        f"합성곱 v4의 TMA 상자 (입력 {H}×{W}, 패딩 {padding}; 파란 점선: 블록의 출력 조각 {ph}×{pw}, 주황: 탭이 읽는 입력)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
