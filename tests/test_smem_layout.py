"""16.5 (Hopper): the model of wgmma's shared-memory layouts: swizzles, matrix descriptors and
the canonical K-major layout (gpulib/tensorcore/smem_layout.py)."""

import numpy as np
import pytest

from gpulib.tensorcore import smem_layout as S

WIDTH = {"128B": 128, "64B": 64, "32B": 32}


@pytest.mark.parametrize("mode", ["128B", "64B", "32B"])
def test_a_swizzle_permutes_the_chunks_of_each_atom_and_keeps_chunks_whole(mode):
    atom = 8 * WIDTH[mode]
    for base in (0, atom, 5 * atom):
        moved = [S.swizzle(base + a, mode) for a in range(atom)]
        assert sorted(moved) == list(range(base, base + atom))  # a permutation of the atom
        for a in range(0, atom, 16):  # the 16 bytes of a chunk stay together and in order
            assert moved[a:a + 16] == list(range(moved[a], moved[a] + 16))
    assert S.swizzle(1234, "none") == 1234


def test_the_128_byte_swizzle_xors_the_chunk_with_the_row():
    for row in range(8):
        for chunk in range(8):
            assert S.swizzle(row * 128 + chunk * 16 + 3, "128B") == row * 128 + (chunk ^ row) * 16 + 3
    np.testing.assert_array_equal(S.atom_chunks("128B")[3], [c ^ 3 for c in range(8)])


@pytest.mark.parametrize("mode", ["128B", "64B", "32B"])
def test_swizzled_columns_need_one_bank_pass_and_unswizzled_ones_eight(mode):
    for chunk in range(WIDTH[mode] // 16):
        assert S.bank_passes(mode, chunk) == 1
    assert S.bank_passes("none", 0) == 8


def test_descriptor_fields_round_trip_and_sit_where_the_ptx_isa_puts_them():
    desc = S.descriptor(start=0x1230, leading_byte_offset=16, stride_byte_offset=1024, mode="128B", base_offset=2)
    assert desc & 0x3FFF == 0x123  # start >> 4 in bits 0-13
    assert (desc >> 16) & 0x3FFF == 1  # LBO >> 4 in bits 16-29
    assert (desc >> 32) & 0x3FFF == 64  # SBO >> 4 in bits 32-45
    assert (desc >> 49) & 7 == 2 and desc >> 62 == 1  # base offset, 128-byte swizzle
    assert S.decode(desc) == dict(start=0x1230, leading_byte_offset=16, stride_byte_offset=1024, base_offset=2,
                                  mode="128B")
    for mode, code in S.SWIZZLES.items():
        assert S.descriptor(0, 0, 0, mode) >> 62 == code


@pytest.mark.parametrize("kwargs, message", [
    (dict(start=8, leading_byte_offset=0, stride_byte_offset=0), "start must be a multiple of 16 bytes"),
    (dict(start=0, leading_byte_offset=0, stride_byte_offset=1 << 18), "stride_byte_offset must be a multiple"),
    (dict(start=0, leading_byte_offset=-16, stride_byte_offset=0), "leading_byte_offset must be an integer of at least 0"),
    (dict(start=0, leading_byte_offset=0, stride_byte_offset=0, mode="96B"), "swizzle mode must be one of"),
    (dict(start=0, leading_byte_offset=0, stride_byte_offset=0, base_offset=8), "base_offset must be in 0..7"),
])
def test_descriptor_refuses_what_does_not_fit(kwargs, message):
    with pytest.raises(ValueError, match=message):
        S.descriptor(**kwargs)


@pytest.mark.parametrize("mode", ["128B", "64B", "32B"])
def test_a_kmajor_tile_fills_its_bytes_once(mode):
    """A 64-row tile with K spanning one swizzle row: every element gets its own 2 bytes, the
    whole tile is 64·W bytes, and a row's K values stay in 16-byte runs of 8."""
    width, rows = WIDTH[mode], 64
    ks = width // 2
    offsets = np.array([[S.kmajor_offset(r, k, mode) for k in range(ks)] for r in range(rows)])
    assert sorted(offsets.ravel().tolist()) == list(range(0, rows * width, 2))
    runs = offsets.reshape(rows, ks // 8, 8)
    assert (np.diff(runs, axis=2) == 2).all() and (runs[:, :, 0] % 16 == 0).all()


def test_kmajor_groups_follow_the_stride_byte_offset():
    # 8-row groups 2048 bytes apart (two atoms: room for a second K block between them)
    assert S.kmajor_offset(8, 0, "128B", stride_byte_offset=2048) == 2048
    assert S.kmajor_offset(9, 8, "128B", stride_byte_offset=2048) == 2048 + 128 + (1 ^ 1) * 16
    with pytest.raises(ValueError, match="outside one 128-byte row"):
        S.kmajor_offset(0, 64, "128B")
    with pytest.raises(ValueError, match="core matrices"):
        S.kmajor_offset(0, 0, "none")
