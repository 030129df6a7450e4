"""16.5 (Hopper): what one ``wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16`` computes, and
which of the warpgroup's 128 threads ends up holding which result, in NumPy.

    D (64 x N, fp32) += A (64 x 16, fp16) · B (16 x N, fp16)
    thread t, warp w = t // 32, lane l = t % 32, group g = l // 4, i = l % 4
    d[4j + 0], d[4j + 1]   row 16w + g,     columns 8j + 2i, 8j + 2i + 1
    d[4j + 2], d[4j + 3]   row 16w + g + 8, the same columns

``multiply`` reads the operands out of a shared-memory image through their descriptors
(smem_layout.py); ``fragments`` / ``from_fragments`` move D between the tile and the threads'
registers. What must stay true: this is the PTX ISA's accumulator layout, the model the
emulation and the GPU kernels are checked against.
"""

from __future__ import annotations

import numpy as np

from gpulib import precision
from gpulib.arrays import integer_arguments, require_real
from gpulib.tensorcore import smem_layout

M_TILE, K_TILE, THREADS = 64, 16, 128
N_SIZES = tuple(range(8, 257, 8))  # wgmma's N: a multiple of 8 up to 256


def _check_n(n: int) -> None:
    if n not in N_SIZES:
        raise ValueError(f"N must be a multiple of 8 from 8 to 256, not {n}")


@integer_arguments(thread=0, index=0, n=8)
def accumulator_element(thread: int, index: int, n: int) -> tuple[int, int]:
    """(row, column) of D held by register ``index`` (0 .. N/2 - 1) of ``thread`` (0..127)."""
    _check_n(n)
    if not 0 <= thread < THREADS:
        raise ValueError(f"thread must be in 0..127 (a warpgroup), not {thread}")
    if not 0 <= index < n // 2:
        raise ValueError(f"index must be in 0..{n // 2 - 1} for N = {n}, not {index}")
    return _element(thread, index)


def _element(thread: int, index: int) -> tuple[int, int]:
    warp, lane = divmod(thread, 32)
    group, i = divmod(lane, 4)
    block, r = divmod(index, 4)
    return 16 * warp + group + 8 * (r // 2), 8 * block + 2 * i + r % 2


def fragments(D: np.ndarray) -> np.ndarray:
    """D [64, N] as the warpgroup's registers: [128 threads, N / 2]."""
    D = require_real(D, "D", "[64, N]")
    n = D.shape[1]
    _check_n(n)
    if D.shape[0] != M_TILE:
        raise ValueError(f"D must have {M_TILE} rows, not {D.shape[0]}")
    out = np.empty((THREADS, n // 2), D.dtype)
    for t in range(THREADS):
        for k in range(n // 2):
            out[t, k] = D[_element(t, k)]
    return out


def from_fragments(regs: np.ndarray) -> np.ndarray:
    """The inverse of ``fragments``: [128, N/2] registers back to D [64, N]."""
    regs = require_real(regs, "regs", "[128, N / 2]")
    if regs.shape[0] != THREADS:
        raise ValueError(f"regs must have {THREADS} rows (one per thread of the warpgroup), not {regs.shape[0]}")
    n = 2 * regs.shape[1]
    _check_n(n)
    D = np.empty((M_TILE, n), regs.dtype)
    for t in range(THREADS):
        for k in range(n // 2):
            D[_element(t, k)] = regs[t, k]
    return D


def _check_image(smem) -> None:
    if not isinstance(smem, np.ndarray) or smem.dtype != np.uint8 or smem.ndim != 1:
        raise ValueError(f"smem must be a 1-D uint8 NumPy array (a byte image of shared memory), not "
                         f"{type(smem).__name__} {getattr(smem, 'dtype', '')} {getattr(smem, 'shape', '')}")


def _check_placement(smem, start: int, rows: int, mode: str, stride_byte_offset: int | None) -> None:
    _check_image(smem)
    """ValueError unless a tile of ``rows`` rows at byte ``start`` lies on swizzle atoms (the XOR
    uses the address's own bits: ``start`` is an atom boundary, or one plus a 16-byte step along
    K inside the first row, as a kernel's descriptor for the second or later K = 16 slice of a
    wider tile points) and ends inside the image."""
    width = smem_layout.row_bytes(mode)
    atom = 8 * width
    if start % atom >= width or start % 16:
        raise ValueError(f"a {mode}-swizzled tile must start on a {atom}-byte boundary or a 16-byte step "
                         f"inside its first {width}-byte row, not at byte {start}")
    sbo = atom if stride_byte_offset is None else stride_byte_offset
    end = start - start % atom + (rows - 1) // 8 * sbo + atom
    if end > len(smem):
        raise ValueError(f"a {rows}-row tile at byte {start} ends at byte {end}, past the image's {len(smem)} bytes")


@integer_arguments(start=0, k=0, stride_byte_offset=0)
def kmajor_addresses(start: int, rows, k: int, mode: str, stride_byte_offset: int) -> np.ndarray:
    """[len(rows), k] byte addresses of elements (row, 0..k-1) of a K-major fp16 tile whose
    descriptor starts at byte ``start``: the logical address (8-row groups ``stride_byte_offset``
    apart, rows W bytes apart, 2 bytes per value) with the swizzle applied to the whole address,
    as the hardware does (so a start moved along K by a 16-byte step reads the next values)."""
    r = np.asarray(rows) if rows is not None else np.asarray([-1])
    if r.ndim != 1 or r.dtype.kind not in "iu" or (r.size and r.min() < 0):
        raise ValueError(f"rows must be a 1-D array of non-negative row numbers, not {rows!r:.60}")
    rows = r.astype(np.int64)[:, None]
    logical = start + rows // 8 * stride_byte_offset + rows % 8 * smem_layout.row_bytes(mode) + 2 * np.arange(k)
    return smem_layout.swizzle_array(logical, mode)


OPERANDS = ("fp16", "bf16")  # the 16-bit operand formats (.f16 / .bf16 in the instruction's name)


def _words(tile, operands: str) -> np.ndarray:
    """A tile's values as the 16-bit words shared memory holds."""
    if operands not in OPERANDS:
        raise ValueError(f"operands must be one of {OPERANDS}, not {operands!r}")
    if operands == "bf16":
        return precision.bf16_bits(tile)
    return np.asarray(tile, np.float16).view(np.uint16)


def _values(words: np.ndarray, operands: str) -> np.ndarray:
    """16-bit words back to their float32 values."""
    return precision.from_bf16_bits(words) if operands == "bf16" else words.view(np.float16).astype(np.float32)


@integer_arguments(start=0, stride_byte_offset=0)
def write_kmajor(smem: np.ndarray, start: int, tile: np.ndarray, mode: str = "128B",
                 stride_byte_offset: int | None = None, operands: str = "fp16") -> None:
    """Store ``tile`` [rows, K] (K-major: each row's K values in a run) as fp16 into the byte
    image ``smem`` (uint8) at byte ``start``, in the canonical layout of ``mode``: what a
    kernel's copies (or TMA) must produce for wgmma to read it. K may fill a whole row of the
    atom (64 fp16 values for 128B): wgmma then reads it 16 at a time, its descriptor's start
    moved 32 bytes along K for each slice."""
    _check_image(smem)
    tile = require_real(tile, "tile", "[rows, K]")
    words = _words(tile, operands)
    rows, k = words.shape
    width = smem_layout.row_bytes(mode)
    if start % width + 2 * k > width:
        raise ValueError(f"K = {k} fp16 values from byte {start % width} of a row pass its {width} bytes")
    sbo = 8 * width if stride_byte_offset is None else stride_byte_offset
    _check_placement(smem, start, rows, mode, sbo)
    at = kmajor_addresses(start, np.arange(rows), k, mode, sbo)
    smem[at] = (words & 0xFF).astype(np.uint8)
    smem[at + 1] = (words >> 8).astype(np.uint8)


@integer_arguments(desc=0, rows=1, k=1)
def read_kmajor(smem: np.ndarray, desc: int, rows: int, k: int = K_TILE, only=None, operands: str = "fp16") -> np.ndarray:
    """The tile [rows, k] that descriptor ``desc`` points wgmma at in the byte image (or just its
    rows ``only``, in that order): fp16 values, or with ``operands="bf16"`` bf16 values as float32."""
    fields = smem_layout.decode(desc)
    if fields["base_offset"]:
        raise ValueError("this model covers swizzle atoms aligned to their size (base_offset 0)")
    _check_placement(smem, fields["start"], rows, fields["mode"], fields["stride_byte_offset"])
    wanted = np.arange(rows) if only is None else np.asarray(only)
    at = kmajor_addresses(fields["start"], wanted, k, fields["mode"], fields["stride_byte_offset"])
    image = np.asarray(smem, np.uint8)
    words = image[at] | image[at + 1].astype(np.uint16) << 8
    return words.view(np.float16) if operands == "fp16" else _values(words, operands)


@integer_arguments(a_desc=0, b_desc=0, n=8)
def multiply(smem: np.ndarray, a_desc: int, b_desc: int, n: int, D: np.ndarray | None = None,
             operands: str = "fp16") -> np.ndarray:
    """D + A·B for one wgmma m64nNk16: A [64, 16] and B (stored K-major as Bᵀ [N, 16]) read
    from the byte image through their descriptors, fp16 operands, sums in float64 (returned as
    float32). ``D`` None: start from zero (the instruction's scale-d = 0)."""
    _check_n(n)
    A = read_kmajor(smem, a_desc, M_TILE, operands=operands).astype(np.float64)
    Bt = read_kmajor(smem, b_desc, n, operands=operands).astype(np.float64)
    acc = np.zeros((M_TILE, n)) if D is None else np.asarray(D, np.float64)
    return (acc + A @ Bt.T).astype(np.float32)


def _owned(n: int) -> tuple[np.ndarray, np.ndarray]:
    """[128, N/2] rows and columns of D held by each thread's registers."""
    if n not in _OWNED:
        cells = np.array([[_element(t, i) for i in range(n // 2)] for t in range(THREADS)])
        _OWNED[n] = cells[..., 0], cells[..., 1]
    return _OWNED[n]


_OWNED: dict = {}


@integer_arguments(a_desc=0, b_desc=0, n=8)
def warpgroup_products(smem: np.ndarray, a_desc: int, b_desc: int, n: int, operands: str = "fp16") -> np.ndarray:
    """The N/2 values of A·B (fp16 or bf16 operands, fp32 sums) that each of the warpgroup's 128
    threads holds after one wgmma m64nNk16, in its register order, [128, N/2]: what the
    simulator's emulation gives the threads (the operands gathered once for all of them)."""
    _check_n(n)
    rows, cols = _owned(n)
    A = read_kmajor(smem, a_desc, M_TILE, operands=operands).astype(np.float32)
    Bt = read_kmajor(smem, b_desc, n, operands=operands).astype(np.float32)
    return np.einsum("tik,tik->ti", A[rows], Bt[cols], dtype=np.float32)
