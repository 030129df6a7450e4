"""16.5 (Hopper): the warpgroup MMA API (gpulib/tensorcore/wgmma.py) and tensor-core GEMM v5 on
it, against NumPy with fp16-rounded operands; the device-side address arithmetic against the
pure-Python model of the swizzle and the descriptor; on a GPU the SASS holds HGMMA."""

import numpy as np
import pytest
from numba import float32

import gpulib
from gpulib.env import cuda
from gpulib.gemm import tensorcore as tc_gemm
from gpulib.tensorcore import smem_layout, wgmma


def _python(device_function):
    """The Python function of a device function (on a GPU it cannot be called from the host)."""
    return getattr(device_function, "py_func", device_function)


def test_swizzled_chunk_places_agree_with_the_model():
    for row in range(24):
        for chunk in range(8):
            assert _python(wgmma.swizzled_byte)(row, chunk) == smem_layout.kmajor_offset(row, 8 * chunk, "128B")


@cuda.jit
def _encode_each(starts, sbos, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = wgmma.encode(starts[i], sbos[i])


def test_the_device_descriptor_has_the_models_bits():
    """encode as kernels run it (on a GPU its device functions cannot be called from the host)."""
    starts, sbos = np.array([0, 32, 16384 + 96, 200000], np.int64), np.array([1024, 1024, 2048, 1024], np.int64)
    out = cuda.to_device(np.zeros(4, np.uint64))
    _encode_each[1, 32](cuda.to_device(starts), cuda.to_device(sbos), out)
    assert out.copy_to_host().tolist() == [smem_layout.descriptor(int(a), 16, int(b), "128B") for a, b in zip(starts, sbos)]


def test_a_tiles_slices_have_the_descriptors_encode_gives_them():
    """multiply_tile builds a descriptor's low word once and adds 2 per 16-deep slice: the same
    64 bits as encoding each slice's address, anywhere in a 228 KiB shared window."""
    low, slice_of = _python(wgmma.descriptor_low), _python(wgmma.slice_descriptor)
    for start in range(0, 228 * 1024 - 1024, 1024 + 96):
        for kk in range(4):
            assert int(slice_of(low(start), kk)) == smem_layout.descriptor(start + 32 * kk, 16, wgmma.ATOM_BYTES, "128B")


@cuda.jit(device=True)
def _fill_tiles(smem, A, Bt, t):
    for e in range(t, 64 * 8, 128):  # A: 64 rows of 8 chunks, at byte 0
        wgmma.copy16_async(smem, wgmma.swizzled_byte(e // 8, e % 8), A, e // 8, 8 * (e % 8), True)
    for e in range(t, Bt.shape[0] * 8, 128):  # Bᵀ after it, at byte 8192
        wgmma.copy16_async(smem, 8192 + wgmma.swizzled_byte(e // 8, e % 8), Bt, e // 8, 8 * (e % 8), True)


@wgmma.kernel
def _one_warpgroup(A, Bt, C, first_slice, accumulate):
    """One warpgroup: C = A[:, 16s:+16]·Bt[:, 16s:+16]ᵀ for slice s = first_slice, then (if
    ``accumulate``) + the next slice, or the next slice alone (scale-d = 0)."""
    smem = cuda.shared.array(0, wgmma.float16)
    base = 2 * wgmma.aligned_start(smem)
    acc = cuda.local.array(64, float32)
    _fill_tiles(smem[base // 2:], A, Bt, cuda.threadIdx.x)
    wgmma.async_commit()
    wgmma.async_wait_all()
    wgmma.fence_async_proxy()
    cuda.syncthreads()
    wgmma.fill(acc, float32(0.0))
    wgmma.fence()
    for s in range(first_slice, first_slice + 2):
        a = wgmma.descriptor(smem, base + 32 * s, 1024)
        b = wgmma.descriptor(smem, base + 8192 + 32 * s, 1024)
        wgmma.mma_n128(acc, a, b, 1 if s == first_slice or accumulate else 0)
    wgmma.commit()
    wgmma.wait_all()
    wgmma.store_n128(C, 0, 0, acc)


@pytest.mark.parametrize("accumulate", [True, False])
def test_one_warpgroup_multiplies_two_slices_read_through_descriptors(rng, accumulate):
    """Operands placed by 16-byte chunks at their swizzled places, read as K slices 1 and 2 by
    descriptors whose start moves 32 bytes along K; scale-d = 0 drops what acc held."""
    A = rng.standard_normal((64, 64)).astype(np.float16)
    Bt = rng.standard_normal((128, 64)).astype(np.float16)
    C = gpulib.poisoned((64, 128))
    wgmma.launch(_one_warpgroup, 1, 128, 8192 + 16384 + 1024, cuda.to_device(A), cuda.to_device(Bt), C, 1,
                 accumulate)
    slices = slice(16, 48) if accumulate else slice(32, 48)
    want = A[:, slices].astype(np.float64) @ Bt[:, slices].astype(np.float64).T
    gpulib.validate(C, want, scale=np.abs(want).max(), name="one wgmma group")


def _check_v5(rng, M, N, K, config, version="v5"):
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    scale = (np.abs(A.astype(np.float16)).astype(np.float64) @ np.abs(B.astype(np.float16))).max()
    A16, Bt16 = A.astype(np.float16), np.ascontiguousarray(B.astype(np.float16).T)
    C = gpulib.poisoned((M, N))  # any unwritten element fails
    tc_gemm.launch(cuda.to_device(A16), cuda.to_device(Bt16), C, version=version, config=config)
    gpulib.validate(C, tc_gemm.reference(A, B), scale=scale, name=f"tensor-core GEMM {version} ({config})")


def test_v5_runs_more_steps_than_its_ring_has_buffers(rng):
    """K = 328: five full 64-deep tiles and a ragged sixth through a ring of 4 buffers (each is
    refilled); M = 70 and N = 40 leave most of the block tile outside C."""
    _check_v5(rng, 70, 40, 328, tc_gemm.V5_DEFAULT)


def test_v5_over_several_blocks(rng):
    """2 x 2 blocks, ragged in both directions, two steps: a swapped block axis or a lost step
    leaves poisoned or wrong elements."""
    _check_v5(rng, 130, 140, 72, tc_gemm.V5_DEFAULT)


@pytest.mark.parametrize("config", [c for c in tc_gemm.V5_CONFIGS if c != tc_gemm.V5_DEFAULT])
def test_every_v5_config_over_two_blocks_of_columns(rng, config):
    _check_v5(rng, 70, 2 * tc_gemm.V5_CONFIGS[config][0] - 20, 72, config)


def test_v6_runs_its_ring_of_barriers_through_several_phases(rng):
    """K = 328: six tiles through 4 buffers, so buffers 0 and 1 are waited on with parity 1;
    the TMA boxes hang over M = 70 and N = 40 and arrive zero-filled."""
    _check_v5(rng, 70, 40, 328, "128x128, 4 stages", "v6")


@pytest.mark.parametrize("config", ["128x128, 3 stages", "128x256, 3 stages"])
def test_v6_over_several_blocks(rng, config):
    """2 x 2 blocks of both tile widths (ragged both ways), two 64-deep steps (the 4-stage
    configs differ only in their ring, which the test above runs through several phases; the
    GPU test runs every config)."""
    _check_v5(rng, 130, 2 * tc_gemm.V6_CONFIGS[config][0] - 20, 72, config, "v6")


def test_v7_producer_and_multipliers_meet_only_at_barriers(rng):
    # a 128x256 tile with 3 buffers
    """K = 456: eight tiles through 3 buffers, so the producer waits on every "empty" barrier
    with parity 0 and then 1, and the multipliers on "full" ones with both parities; the boxes
    hang over M = 70 and N = 40."""
    _check_v5(rng, 70, 40, 456, "128x256, 3 stages", "v7")


@pytest.mark.parametrize("config", ["128x128, 4 stages"])
def test_v7_over_several_blocks(rng, config):
    """2 x 2 blocks (ragged both ways), two 64-deep steps: fewer tiles than buffers, so no
    buffer is waited on as empty. With the test above, both tile widths and both ring sizes
    (the configs differ in nothing else the simulator can see: registers are not modelled)."""
    _check_v5(rng, 130, 2 * tc_gemm.V7_CONFIGS[config][0] - 20, 72, config, "v7")


def _check_v8(rng, M, N, K, config, out=np.float32, operands="fp16", version="v8"):
    """v8 (or v9) on random operands against the float64 product of the rounded operands; C poisoned
    first (fp32, fp16, or bf16 words that are NaN), so a tile left unwritten fails."""
    from gpulib import precision

    A, Bt = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((N, K)).astype(np.float32)
    if operands == "fp16":
        A_in, Bt_in = A.astype(np.float16), Bt.astype(np.float16)
        A64, Bt64 = A_in.astype(np.float64), Bt_in.astype(np.float64)
    else:
        A_in, Bt_in = precision.bf16_bits(A), precision.bf16_bits(Bt)
        A64, Bt64 = (precision.from_bf16_bits(w).astype(np.float64) for w in (A_in, Bt_in))
    want, scale = A64 @ Bt64.T, (np.abs(A64) @ np.abs(Bt64).T).max()
    C = gpulib.poisoned((M, N), out)
    tc_gemm.launch(cuda.to_device(A_in), cuda.to_device(Bt_in), C, version=version, config=config, operands=operands)
    got = C.copy_to_host()
    if out == np.uint16:  # bf16 words: none may be left as poisoned, then their values
        assert not gpulib.check.unwritten_mask(got).any(), f"{version} left bf16 words of C unwritten"
        got = precision.from_bf16_bits(got)
    gpulib.validate(got, want, rtol=None if out == np.float32 else 1e-2, scale=scale, name=f"{version} {config}")
    return got, want


def test_v8_works_through_several_tiles_per_block(rng):
    """Four tiles of 128x256 on the simulator's two blocks, two 64-deep stages each through 3
    buffers: each block's second tile is fetched while its first is stored, and buffer parities
    run on across tiles. N = 300 keeps C's rows 8-byte aligned (paired stores)."""
    _check_v8(rng, 200, 300, 72, "128x256, 3 stages")


def test_v8_stores_single_values_where_rows_are_not_8_byte_aligned(rng):
    """N = 71: odd rows of C start at 4 bytes past a multiple of 8, where an 8-byte store would
    fault; three tiles over two blocks."""
    _check_v8(rng, 260, 71, 72, "128x128, 4 stages")


def test_v8_writes_fp16_c_through_tma_stores(rng):
    """C in fp16, staged in shared memory and written by the copy engine: ragged in M and N (the
    boxes hang over C's edges and only what lies inside is written), each value the fp32 sum
    rounded once (error within fp16's half-unit of the product's size)."""
    got, want = _check_v8(rng, 200, 136, 136, "128x128, 6 stages", np.float16)
    assert np.abs(got - want).max() <= 2.0**-11 * np.abs(want).max() * 1.01 + 1e-4 * np.abs(want).max()


def test_v8_writes_bf16_c_in_bf16_words(rng):
    _check_v8(rng, 130, 72, 72, "128x128, 6 stages", np.uint16, "bf16")


def test_v8_refuses_a_c_it_cannot_stage():
    f16 = lambda *shape: cuda.to_device(np.ones(shape, np.float16))  # noqa: E731
    with pytest.raises(ValueError, match="a 16-bit C needs N a multiple of 8"):
        tc_gemm.launch(f16(64, 16), f16(36, 16), cuda.device_array((64, 36), np.float16), version="v8")
    with pytest.raises(ValueError, match=r"config must be one of \('128x256, 3 stages', .*\) for v8 with a 16-bit C"):
        tc_gemm.launch(f16(64, 16), f16(32, 16), cuda.device_array((64, 32), np.float16), version="v8",
                       config="128x256, 4 stages")
    with pytest.raises(ValueError, match="C \\[M, N\\] must have dtype float32 or, for v8, the operands' uint16, not float16"):
        tc_gemm.launch(cuda.to_device(np.ones((64, 16), np.uint16)), cuda.to_device(np.ones((32, 16), np.uint16)),
                       cuda.device_array((64, 32), np.float16), version="v8", operands="bf16")
    with pytest.raises(ValueError, match="stages=4 with bn=256 and a staged 65536-byte output tile needs"):
        tc_gemm.make_tc_gemm_v8(256, 4, out="16-bit")


def test_v9_multiplies_while_a_producer_warpgroup_fills_the_ring_across_tiles(rng):
    """v9 (producer warpgroup, persistent): three tiles of 128x128 over the simulator's two
    blocks, two stages each through 4 buffers, so a block's second tile waits on buffers given
    back by both multiplying warpgroups; fp32 C in paired stores."""
    _check_v8(rng, 260, 72, 72, "128x128, 4 stages", version="v9")


def test_v9_writes_fp16_c_in_a_box_per_warpgroup(rng):
    """v9's 16-bit C: each multiplying warpgroup stages its 64 rows and writes them by TMA
    itself; M = 200 leaves the second tile's lower warpgroup's box wholly outside C."""
    got, want = _check_v8(rng, 200, 136, 72, "128x128, 6 stages", np.float16, version="v9")
    assert np.abs(got - want).max() <= 2.0**-11 * np.abs(want).max() * 1.01 + 1e-4 * np.abs(want).max()


def test_v7_refuses_an_unknown_version_or_config():
    A, Bt = cuda.to_device(np.ones((64, 16), np.uint16)), cuda.to_device(np.ones((32, 16), np.uint16))
    C = cuda.device_array((64, 32), np.float32)
    with pytest.raises(ValueError, match=r"version must be one of \('v1', .*'v9'\), not 'v10'"):
        tc_gemm.launch(A, Bt, C, version="v10")
    with pytest.raises(ValueError, match=r"config must be one of \('128x256, 3 stages', .*\) for v7, not 'huge'"):
        tc_gemm.launch(A, Bt, C, version="v7", config="huge", operands="bf16")


@pytest.mark.parametrize("version", tc_gemm.WGMMA_VERSIONS)
def test_matmul_tc_v5_and_v6_take_any_shape(rng, version):
    A = rng.standard_normal((33, 21)).astype(np.float32)  # K = 21 padded to 24 with zeros
    B = rng.standard_normal((21, 17)).astype(np.float32)
    C = tc_gemm.matmul_tc(A, B, version=version, out=gpulib.poisoned((33, 17)))
    scale = (np.abs(A.astype(np.float16)).astype(np.float64) @ np.abs(B.astype(np.float16))).max()
    gpulib.validate(C, tc_gemm.reference(A, B), scale=scale, name="matmul_tc v5")


def test_v5_refuses_what_it_cannot_take():
    A, Bt = cuda.to_device(np.ones((64, 20), np.float16)), cuda.to_device(np.ones((64, 20), np.float16))
    with pytest.raises(ValueError, match=r"version v5 needs K a multiple of 8 .*got K=20"):
        tc_gemm.launch(A, Bt, cuda.device_array((64, 64), np.float32), version="v5")
    A, Bt = cuda.to_device(np.ones((64, 16), np.float16)), cuda.to_device(np.ones((32, 16), np.float16))
    with pytest.raises(ValueError, match=r"C must be \[M, N\] = \(64, 32\) \(A.s rows, Bt.s rows\), not \(64, 64\)"):
        tc_gemm.launch(A, Bt, cuda.device_array((64, 64), np.float32), version="v5")
    with pytest.raises(ValueError, match="config must be one of .* for v5, not 'huge'"):
        tc_gemm.launch(A, Bt, cuda.device_array((64, 32), np.float32), version="v5", config="huge")
    with pytest.raises(ValueError, match="C must be"):
        tc_gemm.launch(A, Bt, cuda.device_array((64, 64), np.float32), version="v6")


def test_a_tensor_map_needs_a_2d_fp16_array_of_whole_16_byte_rows():
    from gpulib.tensorcore import tma

    with pytest.raises(ValueError, match=r"array must be a 2-D to 4-D fp16 array \(or uint16 holding bf16 words\), "
                                          r"not 2-D float32"):
        tma.tensor_map(cuda.to_device(np.ones((8, 64), np.float32)), 8)
    with pytest.raises(ValueError, match="C-contiguous with a last dimension of a multiple of 8 values"):
        tma.tensor_map(cuda.to_device(np.ones((8, 12), np.float16)), 8)
    with pytest.raises(
        ValueError, match=r"box must give each of the 2 dimensions 1..256 values and the last one 64 .*, not \(300, 64\)"
    ):
        tma.tensor_map(cuda.to_device(np.ones((8, 64), np.float16)), 300)
    with pytest.raises(ValueError, match=r"box must give each of the 4 dimensions .*, not \(1, 4, 32\)"):
        tma.tensor_map_box(cuda.to_device(np.ones((2, 5, 9, 8), np.float16)), (1, 4, 32))


def test_a_wait_for_a_phase_that_never_ends_is_an_error_on_the_simulator():
    if gpulib.on_gpu():
        pytest.skip("on a GPU the wait would hang: this is the emulation's guard")
    from gpulib.tensorcore import tma

    @tma.kernel
    def never(out):
        bars = cuda.shared.array(1, np.uint64)
        tma.init(bars, 0, 1)
        tma.expect(bars, 0, 1024)  # bytes announced, no load brings them
        tma.wait(bars, 0, 0)

    with pytest.raises(RuntimeError, match="phase parity 0 never finished"):
        never[1, 1](cuda.device_array(1, np.float32))
    with pytest.raises(RuntimeError, match=r"tid=\[0, 0, 0\] .*phase parity 0 never finished"):
        never[1, 64](cuda.device_array(1, np.float32))  # every thread waits: none can end the phase


def test_operands_in_two_shared_arrays_are_refused_by_the_emulation():
    if gpulib.on_gpu():
        pytest.skip("the emulation's check; on a GPU the descriptors hold shared addresses")

    @wgmma.kernel
    def two_arrays(C):
        a_tile = cuda.shared.array(4096, wgmma.float16)
        b_tile = cuda.shared.array(1024, wgmma.float16)
        acc = cuda.local.array(32, float32)
        wgmma.mma_n64(acc, wgmma.descriptor(a_tile, 0, 1024), wgmma.descriptor(b_tile, 0, 1024), 0)

    with pytest.raises(ValueError, match="A and B must lie in the same shared array"):
        two_arrays[1, 1](cuda.device_array(1, np.float32))


def test_v5_uses_warpgroup_mma_and_async_copies():
    if not gpulib.on_gpu():
        pytest.skip("needs the GPU: the simulator has no SASS (the emulation is tested above)")
    for config, (kernel, _) in tc_gemm.V5_KERNELS.items():
        _check_v5(np.random.default_rng(0), 64, 64, 64, config)
        sass = "\n".join(kernel.inspect_sass().values())
        assert "HGMMA" in sass and "LDGSTS" in sass, config
    for config, (kernel, _) in tc_gemm.V6_KERNELS.items():
        _check_v5(np.random.default_rng(0), 64, 64, 64, config, "v6")
        sass = "\n".join(kernel.inspect_sass().values())
        assert "HGMMA" in sass and "UTMALDG" in sass and "LDGSTS" not in sass, config
    for config, (kernel, _) in tc_gemm.V7_KERNELS.items():
        _check_v5(np.random.default_rng(0), 64, 64, 64, config, "v7")
        sass = "\n".join(kernel.inspect_sass().values())
        assert "HGMMA" in sass and "UTMALDG" in sass and "USETMAXREG" in sass, config
    for (version, operands, out), table in [((v, *key), table) for v, tables in tc_gemm.PERSISTENT.items()
                                            for key, table in tables.items()]:
        for config, (kernel, _) in table.items():
            dtype = np.float32 if out == "fp32" else (np.float16 if operands == "fp16" else np.uint16)
            _check_v8(np.random.default_rng(0), 200, 264, 136, config, dtype, operands, version)
            sass = "\n".join(kernel.inspect_sass().values())
            assert "HGMMA" in sass and "UTMALDG" in sass, (version, config, out)
            if version == "v9":  # the producer gives its registers to the multipliers
                assert "USETMAXREG" in sass, config
            if out == "fp32":  # the results in 8-byte stores, no TMA store
                assert "STG.E.64" in sass and "UTMASTG" not in sass, config
            else:  # packed into shared memory, written by the copy engine
                assert "UTMASTG" in sass and "F2FP" in sass, config
    from gpulib.conv import tensorcore as tc_conv

    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((1, 8, 6, 6)).astype(np.float32), rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    for version in ("v5", "v6"):  # compiles both kernels of conv v5 and of v6, each checked against the reference
        want = tc_conv.reference(X, W, None, 1, 1)
        gpulib.validate(tc_conv.conv2d_tc(X, W, None, 1, 1, version=version), want, name=f"conv {version}")
        Y = tc_conv.conv2d_tc_nhwc16(tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W), None, 1, 1,
                                     out=gpulib.poisoned((1, 6, 6, 16), np.float16), version=version)
        gpulib.validate(Y, want.transpose(0, 2, 3, 1), rtol=3e-3, name=f"conv {version}, fp16 Y")
    for kernel, sixteen in ((tc_conv.tc_conv_persistent_kernel, False), (tc_conv.tc_conv_persistent16_kernel, True),
                            (tc_conv.tc_conv_halo_kernel, False), (tc_conv.tc_conv_halo16_kernel, True)):
        sass = "\n".join(kernel.inspect_sass().values())
        assert "HGMMA" in sass and "UTMALDG" in sass and ("UTMASTG" in sass) == sixteen, kernel
    # conv v7 in each patch shape, fp32 and fp16 Y: filters as A, results straight from the registers
    Xn, Wk = tc_conv.image_nhwc16(X), tc_conv.filters_krsc16(W)
    want = tc_conv.reference(X, W, None, 1, 1).transpose(0, 2, 3, 1)
    for (tile, out), kernel in tc_conv.V7_KERNELS.items():
        Y = gpulib.poisoned((1, 6, 6, 16), np.float16 if out == "fp16" else np.float32)
        plan = tc_conv.launch_plan("v7", Xn, Wk, cuda.to_device(np.zeros(16, np.float32)), Y, 1, 6, 6, 3, 3, 1, 1, tile=tile)
        wgmma.launch(*plan[:4], *plan[4])
        gpulib.validate(Y, want, rtol=3e-3 if out == "fp16" else None, name=f"conv v7 {tile}, {out} Y")
        sass = "\n".join(kernel.inspect_sass().values())
        assert "HGMMA" in sass and "UTMALDG" in sass and "USETMAXREG" in sass and "UTMASTG" not in sass, (tile, out)


@pytest.mark.parametrize("padding, stride", [(1, 1), (2, 2)])
def test_wgmma_conv_is_the_fp16_convolution(rng, padding, stride):
    """Conv v3: C = 5 padded to 8, R·S·C8 = 72 or 200 (ragged 64-deep steps, several (r, s) per
    step), K = 70 over two blocks of 64 filters, 2 images; its own NHWC output poisoned."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    R = 3 if stride == 1 else 5
    X = rng.standard_normal((2, 5, 9, 8)).astype(np.float32)
    W = rng.standard_normal((70, 5, R, R)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    want = tc_conv.reference(X, W, b, padding, stride)
    operands = tc_conv.prepare(X, W, b, padding, stride, version="v3")
    N, K, Ho, Wo = want.shape
    Yn = gpulib.poisoned((N * Ho * Wo, K))
    tc_conv.launch(operands, Yn)
    scale = ref.conv2d_magnitude(X, W, b, padding, stride).max()
    gpulib.validate(tc_conv.to_nchw(Yn, want.shape), want, scale=scale, name="tensor-core conv v3")
    with pytest.raises(ValueError, match=r"Y must be a float32 device array of shape \[\d+, 70\] for v3"):
        tc_conv.launch(operands, gpulib.poisoned((N * Ho * Wo, K + 1)))


@pytest.mark.parametrize(
    "shape",
    [
        (1, 5, 9, 8, 70, 3, 1),  # C = 5 padded to 8 (the box's other 56 channels arrive as zeros), K over 2 blocks
        (1, 72, 6, 11, 20, 3, 2),  # two 64-channel steps per tap, a 2-wide border of zeros
        (1, 8, 20, 40, 8, 1, 0),  # 3 x 3 patches of 8 x 16 pixels, the last row and column of patches ragged
    ],
)
def test_tma_conv_is_the_fp16_convolution(rng, shape):
    """Conv v4: every tap's box of X moved by (r - padding, s - padding), zeros where it leaves
    the image; its own NHWC output poisoned, so a pixel or filter left unwritten fails."""
    from gpulib import reference as ref
    from gpulib.conv import tensorcore as tc_conv

    N, C, H, Wd, K, R, padding = shape
    X = rng.standard_normal((N, C, H, Wd)).astype(np.float32)
    W = rng.standard_normal((K, C, R, R)).astype(np.float32)
    b = rng.standard_normal(K).astype(np.float32)
    want = tc_conv.reference(X, W, b, padding, 1)
    operands = tc_conv.prepare(X, W, b, padding, 1, version="v4")
    Yn = gpulib.poisoned((N * want.shape[2] * want.shape[3], K))
    tc_conv.launch(operands, Yn)
    scale = ref.conv2d_magnitude(X, W, b, padding, 1).max()
    gpulib.validate(tc_conv.to_nchw(Yn, want.shape), want, scale=scale, name="tensor-core conv v4")


def test_tma_conv_patches_and_refusals():
    from gpulib.conv import tensorcore as tc_conv

    assert tc_conv.pixel_tile(56, 56) == (2, 64)  # every width leaves 448 pixels over: the widest
    assert tc_conv.pixel_tile(20, 40) == (8, 16)  # 3 x 3 patches, 352 pixels over (the fewest)
    X, W = np.ones((1, 8, 6, 6), np.float32), np.ones((4, 8, 3, 3), np.float32)
    with pytest.raises(ValueError, match="conv v4 .TMA boxes. needs stride 1, not 2"):
        tc_conv.prepare(X, W, None, 1, 2, version="v4")
    assert tc_conv.supports(W.shape, 2, version="v4") == "conv v4 (TMA boxes) needs stride 1, not 2"
    assert tc_conv.supports(W.shape, 1, version="v4") is None and tc_conv.supports(W.shape, 2, version="v1") is None
    with pytest.raises(ValueError, match=r"Y must be a float32 device array of shape \[36, 4\] for v4, not .* \[36, 5\]"):
        tc_conv.launch(tc_conv.prepare(X, W, None, 1, 1, version="v4"), gpulib.poisoned((36, 5)))
    with pytest.raises(ValueError, match="operands must come from prepare"):
        tc_conv.launch((X, W), gpulib.poisoned((36, 4)))


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_ring_timeline_never_refills_a_buffer_still_being_read(stages):
    from gpulib.figures.tensor_cores import ring_schedule

    tiles = ring_schedule(10, stages, copy=3.0, multiply=2.0)
    for k, t in enumerate(tiles):
        assert t["mma_start"] >= t["copy_end"]
        if k:
            assert t["mma_start"] >= tiles[k - 1]["mma_end"]
        if k >= stages:
            assert t["copy_start"] >= tiles[k - stages]["mma_end"]
    gaps = sum(b["mma_start"] - a["mma_end"] for a, b in zip(tiles, tiles[1:]))
    assert (gaps > 0) == (stages == 2)  # with 3 or more buffers the copies hide behind the multiplies


def test_grouped_tiles_cover_c_once():
    """The grouped numbering visits every tile of C exactly once, also with a ragged last group,
    and its first tiles share few rows of tiles (GROUP_M of them)."""
    for M, N, bn in ((1000, 520, 128), (4096, 4096, 256), (130, 40, 128)):
        tiles_m, tiles_n = -(-M // 128), -(-N // bn)
        seen = [_python(tc_gemm.tile_origin)(tile, M, N, 128, bn) for tile in range(tiles_m * tiles_n)]
        assert sorted(seen) == [(128 * i, bn * j) for i in range(tiles_m) for j in range(tiles_n)]
        first = seen[: 2 * min(tiles_m, 8)]
        assert len({row for row, _ in first}) == min(tiles_m, 8)


def _bf16_operands(rng, M, N, K):
    """Random A [M, K] and Bᵀ [N, K] (float32), their bf16 words, and the float64 product of the
    bf16-rounded operands with its scale."""
    from gpulib import precision

    A, Bt = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((N, K)).astype(np.float32)
    A_words, Bt_words = precision.bf16_bits(A), precision.bf16_bits(Bt)
    A_bf, Bt_bf = (precision.from_bf16_bits(w).astype(np.float64) for w in (A_words, Bt_words))
    return A, Bt, A_words, Bt_words, A_bf @ Bt_bf.T, (np.abs(A_bf) @ np.abs(Bt_bf).T).max()


def test_v6_multiplies_bf16_operands(rng):
    """bf16 words (uint16) through TMA and wgmma .bf16: the product of the bf16-rounded operands,
    fp32 sums; ragged in every direction."""
    A, Bt, A_words, Bt_words, want, scale = _bf16_operands(rng, 70, 40, 136)
    C = gpulib.poisoned((70, 40))
    tc_gemm.launch(cuda.to_device(A_words), cuda.to_device(Bt_words), C, version="v6", operands="bf16")
    gpulib.validate(C, want, scale=scale, name="v6 bf16")
    assert np.abs(C.copy_to_host() - A.astype(np.float64) @ Bt.T.astype(np.float64)).max() > 1e-3  # rounding shows
    with pytest.raises(ValueError, match=r"A \[M, K\] must have dtype uint16, not float16"):
        tc_gemm.launch(cuda.to_device(A.astype(np.float16)), cuda.to_device(Bt_words), C, version="v6", operands="bf16")
    with pytest.raises(ValueError, match=r"operands must be one of \('fp16', 'bf16'\), not 'fp8'"):
        tc_gemm.launch(cuda.to_device(A_words), cuda.to_device(Bt_words), C, version="v6", operands="fp8")


@pytest.mark.parametrize("version", tc_gemm.VERSIONS + tc_gemm.WGMMA_VERSIONS)
def test_every_version_of_the_ladder_takes_the_same_operands(rng, version):
    """One launcher, one orientation: A [M, K] and Bᵀ [N, K] fp16 on the device for v1 to v7
    (sizes that every version takes: multiples of 16), checked against float64."""
    A = rng.standard_normal((48, 32)).astype(np.float16)
    Bt = rng.standard_normal((64, 32)).astype(np.float16)
    C = gpulib.poisoned((48, 64))
    tc_gemm.launch(cuda.to_device(A), cuda.to_device(Bt), C, version=version)
    want = A.astype(np.float64) @ Bt.astype(np.float64).T
    gpulib.validate(C, want, scale=(np.abs(A).astype(np.float64) @ np.abs(Bt).astype(np.float64).T).max(),
                    name=f"launch {version}")


@pytest.mark.parametrize("version", tc_gemm.WGMMA_VERSIONS)
def test_bf16_runs_in_every_config_of_the_wgmma_versions(rng, version):
    """Every config on a GPU; on the simulator, where configs differ only in their tile width
    and ring, the first config of each tile width (the bf16 multiply is chosen by the width)."""
    _, _, A_words, Bt_words, want, scale = _bf16_operands(rng, 70, 40, 72)
    configs = tc_gemm.CONFIGS[version][0]
    widths = {}
    for name, config in configs.items():
        widths.setdefault(config[0], name)
    for config in configs if gpulib.on_gpu() else widths.values():
        C = gpulib.poisoned((70, 40))
        tc_gemm.launch(cuda.to_device(A_words), cuda.to_device(Bt_words), C, version=version, config=config, operands="bf16")
        gpulib.validate(C, want, scale=scale, name=f"{version} bf16 {config}")


def test_the_launcher_refuses_bad_preconditions_before_any_launch(monkeypatch):
    """Each precondition a ValueError naming the argument, raised before a kernel is launched
    (the launch paths are replaced by ones that fail the test)."""
    def no_launch(*args, **kwargs):
        raise AssertionError("launched")

    monkeypatch.setattr(tc_gemm, "_launch_wmma", no_launch)
    monkeypatch.setattr(tc_gemm.wgmma, "launch", no_launch)
    f16 = lambda *shape: cuda.to_device(np.ones(shape, np.float16))  # noqa: E731
    C = cuda.device_array((32, 32), np.float32)
    cases = [
        (dict(A=np.ones((32, 32), np.float16), Bt=f16(32, 32), C=C, version="v2"), r"A \[M, K\] must be a device array"),
        (dict(A=f16(32, 32), Bt=f16(32, 32), C=C, version="v10"), "version must be one of"),
        (dict(A=f16(32, 32), Bt=f16(32, 32), C=C, version="v2", operands="bf16"), "needs a wgmma version"),
        (dict(A=f16(24, 32), Bt=f16(32, 32), C=cuda.device_array((24, 32), np.float32), version="v3"),
         "M, N and K multiples of 16"),
        (dict(A=f16(32, 32), Bt=f16(32, 32), C=C, version="v1", config="128x128, 4 stages"), "has no configs"),
        (dict(A=cuda.to_device(np.ones((32, 64), np.float16))[:, :32], Bt=f16(32, 32), C=C, version="v5"),
         "must be C-contiguous"),
        (dict(A=f16(32, 32), Bt=f16(32, 16), C=C, version="v6"), "need the same K"),
        (dict(A=f16(32, 32), Bt=f16(32, 32), C=cuda.device_array((32, 32), np.float16), version="v7"),
         r"C \[M, N\] must have dtype float32, not float16"),
        (dict(A=f16(32, 32), Bt=f16(32, 32, 1), C=C, version="v7"), r"Bt \[N, K\] must be 2-D, but has shape \(32, 32, 1\)"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            tc_gemm.launch(kwargs.pop("A"), kwargs.pop("Bt"), kwargs.pop("C"), **kwargs)
