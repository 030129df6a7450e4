"""16.5 (Hopper): the NumPy model of one wgmma m64nNk16 (gpulib/tensorcore/wgmma_model.py): its
accumulator layout over the warpgroup's 128 threads, and its product read through descriptors
out of a swizzled shared-memory image."""

import numpy as np
import pytest

from gpulib.tensorcore import layout, smem_layout
from gpulib.tensorcore import wgmma_model as W


@pytest.mark.parametrize("n", [8, 64, 256])
def test_every_element_of_d_has_exactly_one_owner(n):
    seen = {W.accumulator_element(t, i, n) for t in range(128) for i in range(n // 2)}
    assert len(seen) == 64 * n and seen == {(r, c) for r in range(64) for c in range(n)}


def test_each_warp_holds_sixteen_rows_laid_out_like_mma_m16n8():
    for warp in range(4):
        for lane in range(32):
            for j in range(3):  # three 8-column blocks of N = 24
                for r in range(4):
                    row, col = W.accumulator_element(32 * warp + lane, 4 * j + r, 24)
                    c_row, c_col = layout.element("c", lane, r)  # mma.m16n8's C fragment
                    assert (row, col) == (16 * warp + c_row, 8 * j + c_col)


def test_fragments_round_trip(rng):
    D = rng.standard_normal((64, 40)).astype(np.float32)
    regs = W.fragments(D)
    assert regs.shape == (128, 20)
    np.testing.assert_array_equal(W.from_fragments(regs), D)
    assert regs[33, 0] == D[16, 2] and regs[33, 3] == D[24, 3]  # warp 1, lane 1: group 0, i = 1


@pytest.mark.parametrize("mode", ["128B", "64B", "32B"])
def test_the_product_read_through_descriptors_matches_numpy(rng, mode):
    """A and Bᵀ written into a byte image in the swizzled canonical layout, read back through
    descriptors: the product is A·B with fp16-rounded operands."""
    n = 48
    A = rng.standard_normal((64, 16)).astype(np.float32)
    B = rng.standard_normal((16, n)).astype(np.float32)
    D0 = rng.standard_normal((64, n)).astype(np.float32)
    width = {"128B": 128, "64B": 64, "32B": 32}[mode]
    a_start, b_start = 1024, 1024 + 64 * width  # both atom-aligned: 1024 is a multiple of 8·W
    smem = np.zeros(b_start + n * width, np.uint8)
    W.write_kmajor(smem, a_start, A, mode)  # K = 16 fp16 values fill 32 bytes of each row
    W.write_kmajor(smem, b_start, B.T, mode)
    a_desc = smem_layout.descriptor(a_start, 16, 8 * width, mode)
    b_desc = smem_layout.descriptor(b_start, 16, 8 * width, mode)
    got = W.multiply(smem, a_desc, b_desc, n, D0)
    A16, B16 = A.astype(np.float16).astype(np.float64), B.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(got, (D0 + A16 @ B16).astype(np.float32), rtol=1e-6, atol=1e-6)
    assert np.array_equal(W.read_kmajor(smem, a_desc, 64), A.astype(np.float16))


def test_the_swizzle_matters_to_the_reader(rng):
    """The same bytes read with the wrong swizzle give another matrix: the descriptor must name
    the layout the copies produced."""
    A = rng.standard_normal((64, 16)).astype(np.float32)
    smem = np.zeros(8192, np.uint8)
    W.write_kmajor(smem, 0, A, "128B")
    right = W.read_kmajor(smem, smem_layout.descriptor(0, 16, 1024, "128B"), 64)
    wrong = W.read_kmajor(smem, smem_layout.descriptor(0, 16, 1024, "64B"), 64)
    assert np.array_equal(right, A.astype(np.float16)) and not np.array_equal(wrong, right)


def test_a_tile_must_start_on_an_atom_and_fit_its_image():
    smem = np.zeros(4096, np.uint8)
    with pytest.raises(
        ValueError, match="must start on a 1024-byte boundary or a 16-byte step inside its first 128-byte row, not at byte 512"
    ):
        W.write_kmajor(smem, 512, np.ones((8, 16)), "128B")
    with pytest.raises(ValueError, match="a 64-row tile at byte 0 ends at byte 8192, past the image's 4096 bytes"):
        W.write_kmajor(smem, 0, np.ones((64, 16)), "128B")


def test_the_model_refuses_shapes_wgmma_does_not_have():
    with pytest.raises(ValueError, match="N must be a multiple of 8 from 8 to 256, not 12"):
        W.accumulator_element(0, 0, 12)
    with pytest.raises(ValueError, match="thread must be in 0..127"):
        W.accumulator_element(128, 0, 8)
    with pytest.raises(ValueError, match="D must have 64 rows"):
        W.fragments(np.zeros((32, 8), np.float32))


def test_moving_the_start_32_bytes_along_k_reads_the_next_slice(rng):
    """A 64-wide K tile fills each 128-byte row of the atom; a kernel reads it as four K = 16
    slices by moving the descriptor's start 32 bytes at a time, and the swizzle, applied to the
    whole address, still finds each value."""
    A = rng.standard_normal((64, 64)).astype(np.float32)
    smem = np.zeros(8192, np.uint8)
    W.write_kmajor(smem, 0, A, "128B")
    for j in range(4):
        got = W.read_kmajor(smem, smem_layout.descriptor(32 * j, 16, 1024, "128B"), 64)
        np.testing.assert_array_equal(got, A[:, 16 * j : 16 * j + 16].astype(np.float16))
    with pytest.raises(ValueError, match="K = 72 fp16 values from byte 0 of a row pass its 128 bytes"):
        W.write_kmajor(smem, 0, np.ones((8, 72)), "128B")


@pytest.mark.parametrize("n", [64, 128])
def test_each_threads_products_are_its_fragment_of_the_whole_product(rng, n):
    """What the simulator gives each thread equals that thread's registers of the whole product."""
    A = rng.standard_normal((64, 64)).astype(np.float32)
    Bt = rng.standard_normal((n, 64)).astype(np.float32)
    smem = np.zeros(8192 + 128 * n, np.uint8)
    W.write_kmajor(smem, 0, A, "128B")
    W.write_kmajor(smem, 8192, Bt, "128B")
    a_desc, b_desc = (smem_layout.descriptor(s + 64, 16, 1024, "128B") for s in (0, 8192))  # K slice 2
    whole = W.fragments(W.multiply(smem, a_desc, b_desc, n))
    products = W.warpgroup_products(smem, a_desc, b_desc, n)
    for thread in (0, 37, 127):
        np.testing.assert_allclose(products[thread], whole[thread], rtol=1e-6, atol=1e-6)
    want = A[:, 32:48].astype(np.float16).astype(np.float64) @ Bt[:, 32:48].astype(np.float16).astype(np.float64).T
    np.testing.assert_allclose(W.from_fragments(whole), want, rtol=1e-5, atol=1e-5)


def test_bf16_operands_are_read_as_bf16(rng):
    from gpulib import precision

    A = rng.standard_normal((64, 16)).astype(np.float32)
    Bt = rng.standard_normal((24, 16)).astype(np.float32)
    smem = np.zeros(8192 + 24 * 128, np.uint8)
    W.write_kmajor(smem, 0, A, "128B", operands="bf16")
    W.write_kmajor(smem, 8192, Bt, "128B", operands="bf16")
    a, b = smem_layout.descriptor(0, 16, 1024), smem_layout.descriptor(8192, 16, 1024)
    np.testing.assert_array_equal(W.read_kmajor(smem, a, 64, operands="bf16"), precision.round_to(A, "bf16"))
    D = W.multiply(smem, a, b, 24, operands="bf16")
    want = precision.round_to(A, "bf16").astype(np.float64) @ precision.round_to(Bt, "bf16").astype(np.float64).T
    np.testing.assert_allclose(D, want, rtol=1e-6, atol=1e-5)
    with pytest.raises(ValueError, match="operands must be one of"):
        W.write_kmajor(smem, 0, A, "128B", operands="fp8")
