"""16.5 (Hopper): how wgmma finds its operands in shared memory: swizzles and matrix descriptors,
as pure Python (``swizzle``, ``descriptor``, ``decode``, ``kmajor_offset``).

    descriptor bits   0-13  start address >> 4        (shared-window byte address)
                     16-29  leading byte offset >> 4  (LBO)
                     32-45  stride byte offset >> 4   (SBO: from one 8-row group to the next)
                     49-51  base offset               (0 when the swizzle atoms are aligned)
                     62-63  swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte

Inside a W-byte swizzle atom (8 rows of W bytes) address bits 4.. (the 16-byte chunk) are XORed
with address bits 7.. (which 128 bytes), over 3, 2 or 1 bits for W = 128, 64, 32 (CuTe's
Swizzle<B, 4, 3>): with 128-byte rows, chunk c of row r goes to chunk c XOR r. 16.5's notebook
draws it and says why. The tests check this
model, the notebook draws it, and the simulator's emulation of wgmma reads its operands through
it. What must stay true: these bits are the PTX ISA's (its matrix-descriptor format).
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import integer_arguments

SWIZZLES = {"none": 0, "128B": 1, "64B": 2, "32B": 3}  # the descriptor's 2-bit code
_SWIZZLE_BYTES = {"128B": 128, "64B": 64, "32B": 32}


def row_bytes(mode: str) -> int:
    """W, the bytes of one row of an atom under swizzle ``mode`` (an atom is 8 such rows); 128
    for "none", whose rows the figures and bank counts lay out 128 bytes apart."""
    _check_mode(mode)
    return _SWIZZLE_BYTES.get(mode, 128)
FIELD_LIMIT = 1 << 18  # 14-bit fields of 16-byte units: offsets and addresses below 256 KiB


def _check_mode(mode: str) -> None:
    if mode not in SWIZZLES:
        raise ValueError(f"swizzle mode must be one of {tuple(SWIZZLES)}, not {mode!r}")


@integer_arguments(address=0)
def swizzle(address: int, mode: str) -> int:
    """The byte address where a W-byte swizzle puts logical byte ``address`` (mode "128B",
    "64B", "32B"; "none" leaves it). The 16-byte chunk number (bits 4..) is XORed with the row
    of 128 bytes it lies in (bits 7..), over log2(W/16) bits: within one atom of 8·W bytes."""
    return int(swizzle_array(int(address), mode))


def swizzle_array(addresses, mode: str) -> np.ndarray:
    """``swizzle`` applied to every address of an integer array (the simulator's reads)."""
    _check_mode(mode)
    a = np.asarray(addresses) if addresses is not None and not isinstance(addresses, str) else np.asarray([0.5])
    if a.dtype.kind not in "iu" or (a.size and a.min() < 0):
        raise ValueError(f"addresses must be non-negative integers (byte addresses), not {addresses!r:.60}")
    addresses = a.astype(np.int64)
    if mode == "none":
        return addresses
    mask = (1 << {"128B": 3, "64B": 2, "32B": 1}[mode]) - 1
    return addresses ^ (((addresses >> 7) & mask) << 4)


@integer_arguments(start=0, leading_byte_offset=0, stride_byte_offset=0, base_offset=0)
def descriptor(start: int, leading_byte_offset: int, stride_byte_offset: int, mode: str = "128B",
               base_offset: int = 0) -> int:
    """The 64-bit wgmma matrix descriptor (see the module docstring); ValueError for an
    address or offset that is not a multiple of 16 bytes or does not fit its 14-bit field."""
    _check_mode(mode)
    for name, value in (("start", start), ("leading_byte_offset", leading_byte_offset),
                        ("stride_byte_offset", stride_byte_offset)):
        if value < 0 or value % 16 or value >= FIELD_LIMIT:
            raise ValueError(f"{name} must be a multiple of 16 bytes in [0, {FIELD_LIMIT}), not {value}")
    if not 0 <= base_offset < 8:
        raise ValueError(f"base_offset must be in 0..7, not {base_offset}")
    return ((start >> 4) | (leading_byte_offset >> 4) << 16 | (stride_byte_offset >> 4) << 32
            | base_offset << 49 | SWIZZLES[mode] << 62)


@integer_arguments(desc=0)
def decode(desc: int) -> dict:
    """The fields of a descriptor, in bytes (the inverse of ``descriptor``)."""
    if desc >= 1 << 64:
        raise ValueError(f"desc must fit in 64 bits (a wgmma matrix descriptor), not {desc}")
    field = lambda shift: ((desc >> shift) & 0x3FFF) << 4  # noqa: E731
    modes = {code: name for name, code in SWIZZLES.items()}
    return dict(start=field(0), leading_byte_offset=field(16), stride_byte_offset=field(32),
                base_offset=(desc >> 49) & 7, mode=modes[(desc >> 62) & 3])


@integer_arguments(row=0, k=0, stride_byte_offset=0, itemsize=1)
def kmajor_offset(row: int, k: int, mode: str = "128B", stride_byte_offset: int | None = None,
                  itemsize: int = 2) -> int:
    """Byte offset, from the tile's start, of element (row, k) of a K-major operand tile in the
    canonical layout of swizzle ``mode``: 8-row groups ``stride_byte_offset`` apart (by default
    one atom, 8·W bytes: the groups packed), each row W bytes, the swizzle applied. K must stay
    inside one row of W bytes (W / itemsize values: 64 fp16 for 128B), as one wgmma's K = 16
    does; larger K tiles are further atoms, which this model leaves to its caller."""
    _check_mode(mode)
    if mode == "none":
        raise ValueError("the unswizzled ('none') layout is made of 8x16-byte core matrices; "
                         "this model covers the swizzled layouts")
    width = row_bytes(mode)
    if not 0 <= k * itemsize < width:
        raise ValueError(f"k={k} lies outside one {width}-byte row ({width // itemsize} values of {itemsize} bytes)")
    if row < 0:
        raise ValueError(f"row must be at least 0, not {row}")
    sbo = 8 * width if stride_byte_offset is None else stride_byte_offset
    logical = (row // 8) * sbo + (row % 8) * width + k * itemsize
    return swizzle(logical, mode)


def atom_chunks(mode: str = "128B") -> np.ndarray:
    """For one atom (8 rows of W bytes): [row, physical chunk] = the logical 16-byte chunk that
    the swizzle stores there (what 16.5's figure draws)."""
    width = row_bytes(mode)
    chunks = width // 16
    table = np.empty((8, chunks), np.int64)
    for row in range(8):
        for c in range(chunks):
            physical = swizzle(row * width + 16 * c, mode) - row * width
            table[row, physical // 16] = c
    return table


@integer_arguments(chunk=0)
def bank_passes(mode: str = "128B", chunk: int = 0) -> int:
    """How many passes 32 banks need to serve logical chunk ``chunk`` of all 8 rows of an atom
    (8 x 16 bytes): 1 when the swizzle spreads them over distinct banks, up to 8 without it
    (rows 128 bytes apart fall on the same 4 banks)."""
    width = row_bytes(mode)
    if chunk >= width // 16:
        raise ValueError(f"chunk must be in 0..{width // 16 - 1} (16-byte chunks of a {width}-byte row), not {chunk}")
    banks: dict[int, set] = {}
    for row in range(8):
        address = swizzle(row * width + 16 * chunk, mode)  # "none" leaves it
        for word in range(4):  # a 16-byte chunk covers 4 banks of 4 bytes
            bank = (address // 4 + word) % 32
            banks.setdefault(bank, set()).add(address // 4 + word)
    return max(len(words) for words in banks.values())
