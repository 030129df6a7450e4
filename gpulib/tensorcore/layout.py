"""16.5: which thread of a warp holds which element of a tensor-core tile.

The fragments of ``mma.sync.aligned.m16n8k16`` with fp16 operands and fp32 accumulators, as
the PTX ISA documents them ("Matrix fragments for mma.m16n8k16 with floating point type").
This is the instruction the hardware runs (SASS HMMA.16816): one WMMA m16n16k16 is two of
them, one per 8-column half of B and C. (WMMA's own fragments are opaque by definition: PTX
leaves their layout unspecified, which is why gpulib's kernels only ever load and store whole
fragments.)

A lane's ``group`` is lane // 4 (0..7) and its ``thread_in_group`` lane % 4 (0..3):

    A (16x16, row-major)  a0..a7   rows group and group + 8, columns 2t, 2t+1, 2t+8, 2t+9
    B (16x8, k x n)       b0..b3   rows 2t, 2t+1, 2t+8, 2t+9, column group
    C (16x8, fp32)        c0..c3   rows group and group + 8, columns 2t, 2t+1

Every element belongs to exactly one (lane, register) pair; ``owner`` answers for one element,
``owners`` draws the whole map, ``gather``/``scatter`` move a tile into and out of fragments.
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import require_real

SHAPES = {"a": (16, 16), "b": (16, 8), "c": (16, 8)}
PER_LANE = {"a": 8, "b": 4, "c": 4}


def _check_matrix(matrix) -> None:
    if not isinstance(matrix, str) or matrix not in SHAPES:
        raise ValueError(f"matrix must be 'a', 'b' or 'c', not {matrix!r}")


def element(matrix: str, lane: int, index: int) -> tuple[int, int]:
    """(row, column) of register ``index`` of ``lane`` in fragment ``matrix`` ('a', 'b' or 'c')."""
    _check_matrix(matrix)
    if isinstance(lane, bool) or not isinstance(lane, (int, np.integer)) or not 0 <= lane < 32:
        raise ValueError(f"lane must be an integer in 0..31, not {lane!r}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < PER_LANE[matrix]:
        raise ValueError(f"index must be in 0..{PER_LANE[matrix] - 1} for {matrix!r}, not {index}")
    group, t = divmod(lane, 4)
    if matrix == "a":  # a0 a1: (g, 2t..2t+1); a2 a3: (g+8, ..); a4 a5: (g, 2t+8..); a6 a7: (g+8, 2t+8..)
        return group + 8 * ((index // 2) % 2), 2 * t + index % 2 + 8 * (index // 4)
    if matrix == "b":  # b0 b1: rows 2t, 2t+1; b2 b3: rows 2t+8, 2t+9; column g
        return 2 * t + index % 2 + 8 * (index // 2), group
    return group + 8 * (index // 2), 2 * t + index % 2  # c0 c1: row g; c2 c3: row g+8


def owners(matrix: str) -> tuple[np.ndarray, np.ndarray]:
    """(lane, register) of every element of ``matrix``'s tile, as two integer arrays of its shape."""
    _check_matrix(matrix)
    lane_of = np.full(SHAPES[matrix], -1)
    index_of = np.full(SHAPES[matrix], -1)
    for lane in range(32):
        for index in range(PER_LANE[matrix]):
            r, c = element(matrix, lane, index)
            lane_of[r, c], index_of[r, c] = lane, index
    return lane_of, index_of


def owner(matrix: str, row: int, col: int) -> tuple[int, int]:
    """(lane, register) holding element (row, col) of ``matrix``'s tile."""
    lane_of, index_of = owners(matrix)
    for name, value, size in (("row", row, SHAPES[matrix][0]), ("col", col, SHAPES[matrix][1])):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
            raise ValueError(f"{name} must be an integer in 0..{size - 1} for {matrix!r}, not {value!r}")
    return int(lane_of[row, col]), int(index_of[row, col])


def gather(matrix: str, tile: np.ndarray) -> np.ndarray:
    """The fragments of a whole tile: an array [32 lanes, registers]."""
    _check_matrix(matrix)
    tile = require_real(tile, "tile", "[rows, cols]")
    if tile.shape != SHAPES[matrix]:
        raise ValueError(f"tile for {matrix!r} must be {SHAPES[matrix]}, not {tile.shape}")
    return np.array([[tile[element(matrix, lane, i)] for i in range(PER_LANE[matrix])] for lane in range(32)])


def _fragments(fragments, name: str, matrix: str) -> np.ndarray:
    f = require_real(fragments, name, "[lanes, registers]")
    if f.shape != (32, PER_LANE[matrix]):
        raise ValueError(f"{name} must be [32 lanes, {PER_LANE[matrix]} registers] for {matrix!r}, not {f.shape}")
    return f


def scatter(matrix: str, fragments: np.ndarray) -> np.ndarray:
    """The tile the fragments [32, registers] make up (the inverse of ``gather``)."""
    _check_matrix(matrix)
    fragments = _fragments(fragments, "fragments", matrix)
    tile = np.zeros(SHAPES[matrix], fragments.dtype)
    for lane in range(32):
        for i in range(PER_LANE[matrix]):
            tile[element(matrix, lane, i)] = fragments[lane, i]
    return tile


def warp_mma(a_frag: np.ndarray, b_frag: np.ndarray, c_frag: np.ndarray) -> np.ndarray:
    """D = A·B + C computed the way the warp does it: each lane's four outputs from the rows
    and columns the other lanes hold (fp16 operands, fp32 sums). Returns D's fragments."""
    a_frag, b_frag, c_frag = (_fragments(f, name, m) for f, name, m in ((a_frag, "a_frag", "a"), (b_frag, "b_frag", "b"),
                                                                        (c_frag, "c_frag", "c")))
    A = scatter("a", a_frag).astype(np.float16).astype(np.float32)
    B = scatter("b", b_frag).astype(np.float16).astype(np.float32)
    C = scatter("c", c_frag).astype(np.float32)
    return gather("c", A @ B + C)
