"""16.5 (Hopper): what one ``wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16`` computes, and
which of the warpgroup's 128 threads ends up holding which result, in NumPy.

    D (64 x N, fp32) += A (64 x 16, fp16) · B (16 x N, fp16)

A and B are read from shared memory through their matrix descriptors
(gpulib/tensorcore/smem_layout.py): both K-major, i.e. A's rows and B's columns each hold
their 16 K values in a run, in the canonical layout the descriptor's swizzle names. D lives in
registers, N / 2 floats per thread, laid out as the PTX ISA's figure for the wgmma m64nNk16
accumulator shows. Warp w of the warpgroup owns rows 16w..16w+15; inside a warp the layout
of each 8-column block is the one of mma.m16n8 (gpulib/tensorcore/layout.py, fragment C):

    thread t, warp w = t // 32, lane l = t % 32, group g = l // 4, i = l % 4
    d[4j + 0], d[4j + 1]   row 16w + g,     columns 8j + 2i, 8j + 2i + 1
    d[4j + 2], d[4j + 3]   row 16w + g + 8, the same columns

This is the model that the simulator's emulation of the instruction and the GPU kernels built
on it are checked against: ``multiply`` reads the operands out of a shared-memory image (the
bytes a kernel wrote) through the descriptors, rounds them to fp16 and sums the products in
fp32 (in float64 here: the GPU's order of the fp32 sums is its own), and ``fragments`` /
``from_fragments`` move D between the 64 x N tile and the 128 threads' registers.
"""

from __future__ import annotations

import numpy as np

from gpulib.tensorcore import smem_layout

M_TILE, K_TILE, THREADS = 64, 16, 128
N_SIZES = tuple(range(8, 257, 8))  # wgmma's N: a multiple of 8 up to 256


def _check_n(n: int) -> None:
    if n not in N_SIZES:
        raise ValueError(f"N must be a multiple of 8 from 8 to 256, not {n}")


def accumulator_element(thread: int, index: int, n: int) -> tuple[int, int]:
    """(row, column) of D held by register ``index`` (0 .. N/2 - 1) of ``thread`` (0..127)."""
    _check_n(n)
    if not 0 <= thread < THREADS:
        raise ValueError(f"thread must be in 0..127 (a warpgroup), not {thread}")
    if not 0 <= index < n // 2:
        raise ValueError(f"index must be in 0..{n // 2 - 1} for N = {n}, not {index}")
    warp, lane = divmod(thread, 32)
    group, i = divmod(lane, 4)
    block, r = divmod(index, 4)
    return 16 * warp + group + 8 * (r // 2), 8 * block + 2 * i + r % 2


def fragments(D: np.ndarray) -> np.ndarray:
    """D [64, N] as the warpgroup's registers: [128 threads, N / 2]."""
    n = D.shape[1]
    _check_n(n)
    if D.shape[0] != M_TILE:
        raise ValueError(f"D must have {M_TILE} rows, not {D.shape[0]}")
    out = np.empty((THREADS, n // 2), D.dtype)
    for t in range(THREADS):
        for k in range(n // 2):
            out[t, k] = D[accumulator_element(t, k, n)]
    return out


def from_fragments(regs: np.ndarray) -> np.ndarray:
    """The inverse of ``fragments``: [128, N/2] registers back to D [64, N]."""
    n = 2 * regs.shape[1]
    _check_n(n)
    D = np.empty((M_TILE, n), regs.dtype)
    for t in range(THREADS):
        for k in range(n // 2):
            D[accumulator_element(t, k, n)] = regs[t, k]
    return D


def _check_placement(smem, start: int, rows: int, mode: str, stride_byte_offset: int | None) -> None:
    """ValueError unless a tile of ``rows`` rows at byte ``start`` starts on a swizzle atom (the
    XOR uses the address's own bits) and ends inside the image."""
    atom = 8 * smem_layout.row_bytes(mode)
    if start % atom:
        raise ValueError(f"a {mode}-swizzled tile must start on a {atom}-byte boundary, not at byte {start}")
    sbo = atom if stride_byte_offset is None else stride_byte_offset
    end = start + (rows - 1) // 8 * sbo + atom
    if end > len(smem):
        raise ValueError(f"a {rows}-row tile at byte {start} ends at byte {end}, past the image's {len(smem)} bytes")


def write_kmajor(smem: np.ndarray, start: int, tile: np.ndarray, mode: str = "128B",
                 stride_byte_offset: int | None = None) -> None:
    """Store ``tile`` [rows, K] (K-major: each row's K values in a run) as fp16 into the byte
    image ``smem`` (uint8) at byte ``start``, in the canonical layout of ``mode``: what a
    kernel's copies (or TMA) must produce for wgmma to read it."""
    values = np.asarray(tile, np.float16)
    _check_placement(smem, start, values.shape[0], mode, stride_byte_offset)
    for (row, k), v in np.ndenumerate(values):
        at = start + smem_layout.kmajor_offset(row, k, mode, stride_byte_offset)
        smem[at:at + 2] = np.frombuffer(v.tobytes(), np.uint8)


def read_kmajor(smem: np.ndarray, desc: int, rows: int, k: int = K_TILE) -> np.ndarray:
    """The fp16 tile [rows, k] that descriptor ``desc`` points wgmma at in the byte image."""
    fields = smem_layout.decode(desc)
    if fields["base_offset"]:
        raise ValueError("this model covers swizzle atoms aligned to their size (base_offset 0)")
    _check_placement(smem, fields["start"], rows, fields["mode"], fields["stride_byte_offset"])
    out = np.empty((rows, k), np.float16)
    for row in range(rows):
        for kk in range(k):
            at = fields["start"] + smem_layout.kmajor_offset(row, kk, fields["mode"], fields["stride_byte_offset"])
            out[row, kk] = np.frombuffer(bytes(smem[at:at + 2]), np.float16)[0]
    return out


def multiply(smem: np.ndarray, a_desc: int, b_desc: int, n: int, D: np.ndarray | None = None) -> np.ndarray:
    """D + A·B for one wgmma m64nNk16: A [64, 16] and B (stored K-major as Bᵀ [N, 16]) read
    from the byte image through their descriptors, fp16 operands, sums in float64 (returned as
    float32). ``D`` None: start from zero (the instruction's scale-d = 0)."""
    _check_n(n)
    A = read_kmajor(smem, a_desc, M_TILE).astype(np.float64)
    Bt = read_kmajor(smem, b_desc, n).astype(np.float64)
    acc = np.zeros((M_TILE, n)) if D is None else np.asarray(D, np.float64)
    return (acc + A @ Bt.T).astype(np.float32)
