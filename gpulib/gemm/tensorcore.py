"""16.5: GEMM on the tensor cores, C = A·B with A, B in fp16 and C accumulated in fp32.

    version 1   one warp per 16x16 tile of C; each step along K loads a 16x16 tile of A and
                of B straight from global memory into fragments and issues one tensor-core
                multiply-accumulate. 4 warps per block, one per tile down a column of tiles.
    version 2   a block of 4 warps computes a 64x64 tile of C, each warp 32x32 (2x2 fragments
                of accumulators, kept across the whole K loop). Per 16-deep step the block
                stages a 64x16 tile of A and a 16x64 tile of B in shared memory (every thread
                copies 8 + 8 fp16 values), then each warp loads 2 A and 2 B fragments from
                shared memory and issues 4 multiply-accumulates: each fragment serves twice.
    version 3   a block of 8 warps computes a 128x128 tile of C, each warp 64x32 (4x2
                fragments: each A fragment serves twice, each B fragment four times). Tiles
                are 32 deep and staged with 16-byte vector copies (``wmma.copy8``), rows padded
                by 8 fp16 values to spread them over the shared-memory banks.
    version 4   version 3 with two pairs of shared tiles and asynchronous copies (cp.async):
                the copies of the next 32-deep tiles fly while the tensor cores work on these.
    version 5   Hopper's warpgroup MMA (wgmma.py): a block of 2 warpgroups computes a 128xBN
                tile, each warpgroup 64xBN with one m64nBNk16 instruction per 16-deep slice,
                its operands read by the tensor cores straight from shared memory (no fragment
                loads); 64-deep tiles in the 128-byte swizzled layout, filled by cp.async into
                a ring of STAGES buffers, the copies two tiles ahead of the multiplies and one
                group of multiplies left running while the next is issued. It multiplies
                A [M, K] by Bᵀ given as [N, K] (both K-major, as wgmma reads fp16 from shared
                memory without a transpose; nn.Linear keeps its weights this way).
    version 6   version 5 with the tiles brought by the tensor memory accelerator (tma.py):
                one thread asks for each 64-deep tile of A and of Bᵀ (the copy engine swizzles
                it and fills what lies outside the matrices with zeros), one mbarrier per buffer
                says when its bytes have landed, and the ring is kept STAGES - 1 tiles ahead.
                The other 255 threads issue no copies and no address arithmetic. It also takes
                bf16 operands (``operands="bf16"``: uint16 arrays of bf16 words).
    version 7   version 6 with the work split by role (warp specialization): a third warpgroup
                only asks TMA for tiles, the two others only multiply. Two barriers per buffer,
                "full" (its bytes have landed) and "empty" (both multiplying warpgroups are done
                with it), replace the whole block's barrier at every step, so neither warpgroup
                waits for the other. ``setmaxnreg`` moves registers from the producer, which
                needs few, to the multiplying warpgroups: a 64 x 256 tile's 128 accumulators fit.

Tensor cores take whole 16x16x16 tiles, so ``matmul_tc`` pads A and B with zeros to
multiples of 16 (zeros add nothing to the products) and crops C back; version 5 needs only K a
multiple of 8 (whole 16-byte copies) and writes C's edges itself.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, types, uint64

from gpulib.arrays import blocks, output, require, to_device, to_host
from gpulib.tensorcore import tma, wgmma, wmma
from gpulib.tensorcore.wmma import AB_DTYPE, AB_FRAGMENT, ACC_FRAGMENT, SHARED_ALIGN, TILE  # constants

float16 = types.float16

WARPS = 4  # warps per block, stacked along the rows of C
VERSIONS = ("v1", "v2", "v3", "v4")  # WMMA (warp-level), B given as [K, N]
WGMMA_VERSIONS = ("v5", "v6", "v7")  # warpgroup MMA, B given as Bᵀ [N, K]


@wmma.kernel
def tc_gemm_v1_kernel(A, B, C):
    """Warp w of block (bx, by) owns C[16·(by·WARPS + w) : +16, 16·bx : +16]."""
    row = (cuda.blockIdx.y * WARPS + cuda.threadIdx.y) * TILE
    col = cuda.blockIdx.x * TILE
    if row < C.shape[0] and col < C.shape[1]:  # the same for all 32 threads of the warp
        a = cuda.local.array(AB_FRAGMENT, AB_DTYPE)
        b = cuda.local.array(AB_FRAGMENT, AB_DTYPE)
        acc = cuda.local.array(ACC_FRAGMENT, float32)
        wmma.fill(acc, float32(0.0))
        for k in range(0, A.shape[1], TILE):
            wmma.load_a(a, A, row, k)
            wmma.load_b(b, B, k, col)
            wmma.mma(acc, a, b)
        wmma.store(C, row, col, acc)


@cuda.jit(device=True)
def warp_mma(a_tile, b_tile, a, b, acc, wy, wx, kk):
    """One 16-deep step of a warp's part of the block tile: A fragments of the shared tile's
    rows wy, wy + 16, ..., B fragments of its columns wx, wx + 16, ..., at depth kk; then every
    A fragment times every B fragment into the accumulators (acc[i·len(b) + j])."""
    for i in range(a.shape[0]):
        wmma.load_a_shared(a[i], a_tile, wy + 16 * i, kk)
    for j in range(b.shape[0]):
        wmma.load_b_shared(b[j], b_tile, kk, wx + 16 * j)
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            wmma.mma(acc[b.shape[0] * i + j], a[i], b[j])


@cuda.jit(device=True)
def warp_store(C, acc, row, col, tiles_i, tiles_j):
    """Store a warp's tiles_i x tiles_j accumulators at C[row:, col:], skipping tiles outside C."""
    for i in range(tiles_i):
        for j in range(tiles_j):
            r, c = row + 16 * i, col + 16 * j
            if r < C.shape[0] and c < C.shape[1]:  # matmul_tc pads C to multiples of 16
                wmma.store(C, r, c, acc[tiles_j * i + j])


BM = BN = 64  # version 2's block tile; 2x2 warps of 32x32
V2_THREADS = 128


@wmma.kernel
def tc_gemm_v2_kernel(A, B, C):
    """Block (bx, by) owns C[64·by : +64, 64·bx : +64]; warp w its 32x32 quarter (w // 2, w % 2)."""
    a_tile = cuda.shared.array((BM, TILE), float16, alignment=SHARED_ALIGN)
    b_tile = cuda.shared.array((TILE, BN), float16, alignment=SHARED_ALIGN)
    a = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    b = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    acc = cuda.local.array((4, ACC_FRAGMENT), float32)
    t = cuda.threadIdx.x
    warp = t // 32
    wy, wx = (warp // 2) * 32, (warp % 2) * 32  # the warp's quarter inside the block tile
    row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
    M, K = A.shape
    N = B.shape[1]
    for f in range(4):
        wmma.fill(acc[f], float32(0.0))
    for k0 in range(0, K, TILE):
        for e in range(t, BM * TILE, V2_THREADS):  # stage A[row0:+64, k0:+16] and B[k0:+16, col0:+64]
            r, c = e // TILE, e % TILE
            gi, gk = row0 + r, k0 + c
            a_tile[r, c] = A[gi, gk] if gi < M and gk < K else float16(0.0)
            r, c = e // BN, e % BN
            gk, gj = k0 + r, col0 + c
            b_tile[r, c] = B[gk, gj] if gk < K and gj < N else float16(0.0)
        cuda.syncthreads()
        warp_mma(a_tile, b_tile, a, b, acc, wy, wx, 0)
        cuda.syncthreads()
    warp_store(C, acc, row0 + wy, col0 + wx, 2, 2)


V3_BM = V3_BN = 128
V3_BK = 32
V3_THREADS = 256
A_LD, B_LD = V3_BK + 8, V3_BN + 8  # padded row lengths (fp16 values) of the shared tiles


@cuda.jit(device=True)
def _zero8(tile, row, col):
    for i in range(8):
        tile[row, col + i] = float16(0.0)


@wmma.kernel
def tc_gemm_v3_kernel(A, B, C):
    """Block (bx, by) owns C[128·by : +128, 128·bx : +128]; warp w the 64x32 part (w // 4, w % 4).
    Needs K and N multiples of 8 (16-byte rows chunks); ``matmul_tc`` pads to 16."""
    a_tile = cuda.shared.array((V3_BM, A_LD), float16, alignment=SHARED_ALIGN)
    b_tile = cuda.shared.array((V3_BK, B_LD), float16, alignment=SHARED_ALIGN)
    a = cuda.local.array((4, AB_FRAGMENT), AB_DTYPE)
    b = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    acc = cuda.local.array((8, ACC_FRAGMENT), float32)
    t = cuda.threadIdx.x
    warp = t // 32
    wy, wx = (warp // 4) * 64, (warp % 4) * 32
    row0, col0 = cuda.blockIdx.y * V3_BM, cuda.blockIdx.x * V3_BN
    M, K = A.shape
    N = B.shape[1]
    for f in range(8):
        wmma.fill(acc[f], float32(0.0))
    for k0 in range(0, K, V3_BK):
        for c in range(2):  # 512 chunks of 8 values per tile, 2 per thread
            e = t + c * V3_THREADS
            r, cc = e // 4, (e % 4) * 8  # A tile: 128 rows x 4 chunks
            if row0 + r < M and k0 + cc < K:
                wmma.copy8(a_tile, r, cc, A, row0 + r, k0 + cc)
            else:
                _zero8(a_tile, r, cc)
            r, cc = e // 16, (e % 16) * 8  # B tile: 32 rows x 16 chunks
            if k0 + r < K and col0 + cc < N:
                wmma.copy8(b_tile, r, cc, B, k0 + r, col0 + cc)
            else:
                _zero8(b_tile, r, cc)
        cuda.syncthreads()
        for kk in range(0, V3_BK, TILE):
            warp_mma(a_tile, b_tile, a, b, acc, wy, wx, kk)
        cuda.syncthreads()
    warp_store(C, acc, row0 + wy, col0 + wx, 4, 2)


@cuda.jit(device=True)
def _issue_tiles(a_tile, b_tile, A, B, row0, col0, k0, t):
    """Start the async copies of A[row0:+128, k0:+32] and B[k0:+32, col0:+128] into the shared
    tiles (2 + 2 chunks of 8 fp16 values per thread; zeros outside A and B)."""
    M, K = A.shape
    N = B.shape[1]
    for c in range(2):
        e = t + c * V3_THREADS
        r, cc = e // 4, (e % 4) * 8
        wmma.copy8_async(a_tile, r, cc, A, row0 + r, k0 + cc, row0 + r < M and k0 + cc < K)
        r, cc = e // 16, (e % 16) * 8
        wmma.copy8_async(b_tile, r, cc, B, k0 + r, col0 + cc, k0 + r < K and col0 + cc < N)


@wmma.kernel
def tc_gemm_v4_kernel(A, B, C):
    """Version 3's tiles and warps, with two shared tiles of A and two of B: while the warps
    multiply tile k, the asynchronous copies of tile k + 1 are on their way into the other pair."""
    a_tiles = cuda.shared.array((2, V3_BM, A_LD), float16, alignment=SHARED_ALIGN)
    b_tiles = cuda.shared.array((2, V3_BK, B_LD), float16, alignment=SHARED_ALIGN)
    a = cuda.local.array((4, AB_FRAGMENT), AB_DTYPE)
    b = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    acc = cuda.local.array((8, ACC_FRAGMENT), float32)
    t = cuda.threadIdx.x
    warp = t // 32
    wy, wx = (warp // 4) * 64, (warp % 4) * 32
    row0, col0 = cuda.blockIdx.y * V3_BM, cuda.blockIdx.x * V3_BN
    steps = (A.shape[1] + V3_BK - 1) // V3_BK
    for f in range(8):
        wmma.fill(acc[f], float32(0.0))
    _issue_tiles(a_tiles[0], b_tiles[0], A, B, row0, col0, 0, t)
    wmma.async_commit()
    for step in range(steps):
        if step + 1 < steps:  # start the next pair of tiles, then wait for this one only
            _issue_tiles(a_tiles[(step + 1) % 2], b_tiles[(step + 1) % 2], A, B, row0, col0, (step + 1) * V3_BK, t)
            wmma.async_commit()
            wmma.async_wait_one()
        else:
            wmma.async_wait_all()
        cuda.syncthreads()  # every thread's copies of this tile have landed
        for kk in range(0, V3_BK, TILE):
            warp_mma(a_tiles[step % 2], b_tiles[step % 2], a, b, acc, wy, wx, kk)
        cuda.syncthreads()  # done reading before the next step's copies overwrite it
    warp_store(C, acc, row0 + wy, col0 + wx, 4, 2)


V5_BM, V5_BK = 128, 64  # two warpgroups of 64 rows; one 128-byte swizzle row of K
V5_THREADS = 2 * wgmma.WARPGROUP
V5_CONFIGS = {"128x128, 4 stages": (128, 4), "128x128, 3 stages": (128, 3), "128x256, 3 stages": (256, 3)}
V5_DEFAULT = "128x128, 4 stages"


GROUP_M = 8  # tile rows that sweep the columns together (grouped_tile)


@cuda.jit(device=True)
def grouped_tile(M, N, bm, bn):
    """(row0, col0) of block blockIdx.x's bm x bn tile of C [M, N], numbered so that groups of
    GROUP_M tile rows sweep the tile columns together: the blocks running at the same time share
    a few panels of A and of Bᵀ, which then stay in L2, instead of each block row reading all of Bᵀ."""
    tiles_m = (M + bm - 1) // bm
    tiles_n = (N + bn - 1) // bn
    per_group = GROUP_M * tiles_n
    first = (cuda.blockIdx.x // per_group) * GROUP_M
    size = min(tiles_m - first, GROUP_M)
    inside = cuda.blockIdx.x % per_group
    return (first + inside % size) * bm, (inside // size) * bn


def make_tc_gemm_v5(bn: int, stages: int):
    """Version 5 for a 128 x ``bn`` block tile (bn = 64, 128 or 256) and a ring of ``stages``
    (3 or 4) shared buffers of A's and Bᵀ's 64-deep tiles; returns (kernel, shared bytes)."""
    multiply, store = wgmma.MULTIPLY_TILE["fp16", bn], wgmma.STORE[bn]
    a_bytes = V5_BM * V5_BK * 2
    stage_bytes = a_bytes + bn * V5_BK * 2
    acc_size = bn // 2  # each thread's share of its warpgroup's 64 x bn accumulators
    ahead = stages - 2  # tiles in flight ahead of the one being multiplied

    @cuda.jit(device=True)
    def issue(smem, stage, A, Bt, row0, col0, k0, t):
        """Start the cp.async copies of A[row0:+128, k0:+64] and Bᵀ[col0:+bn, k0:+64] into
        buffer ``stage`` (bytes from the aligned start), each 16-byte chunk at its swizzled place."""
        M, K = A.shape
        N = Bt.shape[0]
        for i in range(V5_BM * 8 // V5_THREADS):
            e = t + i * V5_THREADS
            r, c = e // 8, e % 8
            wgmma.copy16_async(smem, stage + wgmma.swizzled_byte(r, c), A, row0 + r, k0 + 8 * c,
                               row0 + r < M and k0 + 8 * c < K)
        for i in range(bn * 8 // V5_THREADS):
            e = t + i * V5_THREADS
            r, c = e // 8, e % 8
            wgmma.copy16_async(smem, stage + a_bytes + wgmma.swizzled_byte(r, c), Bt, col0 + r, k0 + 8 * c,
                               col0 + r < N and k0 + 8 * c < K)

    @wgmma.kernel
    def tc_gemm_v5_kernel(A, Bt, C):
        """Each block owns a 128 x bn tile of C (grouped_tile); warpgroup g its rows 64g .. 64g + 63."""
        smem = cuda.shared.array(0, float16)
        base = 2 * wgmma.aligned_start(smem)
        acc = cuda.local.array(acc_size, float32)
        t = cuda.threadIdx.x
        group = t // wgmma.WARPGROUP
        row0, col0 = grouped_tile(C.shape[0], C.shape[1], V5_BM, bn)
        steps = (A.shape[1] + V5_BK - 1) // V5_BK
        for s in range(ahead):
            if s < steps:
                issue(smem, base + s * stage_bytes, A, Bt, row0, col0, s * V5_BK, t)
            wgmma.async_commit()  # one group per tile, empty past the end: the counts stay regular
        wgmma.fill(acc, float32(0.0))
        for step in range(steps):
            if ahead == 2:
                wgmma.async_wait_one()  # this tile's copies have landed (the next may still fly)
            else:
                wgmma.async_wait_all()
            wgmma.fence_async_proxy()  # ... and are visible to the tensor cores' reads
            cuda.syncthreads()  # every thread's copies; and every warpgroup is done with tile step - 2
            if step + ahead < steps:
                issue(smem, base + (step + ahead) % stages * stage_bytes, A, Bt, row0, col0, (step + ahead) * V5_BK, t)
            wgmma.async_commit()
            stage = base + step % stages * stage_bytes
            wgmma.fence()
            multiply(acc, smem, stage + group * wgmma.M_TILE * 128, stage + a_bytes, 1)  # four 16-deep slices
            wgmma.commit()
            wgmma.wait_one()  # the previous tile's multiplies are done: its buffer may be refilled
        wgmma.wait_all()
        store(C, row0 + wgmma.M_TILE * group, col0, acc)

    return tc_gemm_v5_kernel, stages * stage_bytes + wgmma.ATOM_BYTES


V5_KERNELS = {name: make_tc_gemm_v5(*config) for name, config in V5_CONFIGS.items()}


V6_CONFIGS = {"128x128, 4 stages": (128, 4), "128x128, 3 stages": (128, 3), "128x256, 4 stages": (256, 4),
              "128x256, 3 stages": (256, 3)}
V6_DEFAULT = "128x256, 4 stages"  # the fastest measured (4096³ on an H200)


def _tma_request(stages: int, a_bytes: int, stage_bytes: int):
    @cuda.jit(device=True)
    def request(smem, base, bars, a_map, b_map, row0, col0, tile):
        """(One thread) announce 64-deep tile ``tile``'s bytes on its buffer's barrier (tile mod
        stages) and ask TMA for A's and Bᵀ's boxes: A[row0:+128] then Bᵀ[col0:+bn], K from 64·tile."""
        s = tile % stages
        tma.expect(bars, s, stage_bytes)
        tma.load(smem, base + s * stage_bytes, a_map, row0, tile * V5_BK, bars, s)
        tma.load(smem, base + s * stage_bytes + a_bytes, b_map, col0, tile * V5_BK, bars, s)
    return request


def make_tc_gemm_v6(bn: int, stages: int, operands: str = "fp16"):
    """Version 6 for a 128 x ``bn`` block tile, ``stages`` buffers and fp16 or bf16 operands;
    returns (kernel, shared bytes)."""
    multiply, store = wgmma.MULTIPLY_TILE[operands, bn], wgmma.STORE[bn]
    a_bytes = V5_BM * V5_BK * 2
    stage_bytes = a_bytes + bn * V5_BK * 2
    acc_size = bn // 2

    request = _tma_request(stages, a_bytes, stage_bytes)

    @tma.kernel
    def tc_gemm_v6_kernel(a_map, b_map, C, K):
        """Each block owns a 128 x bn tile of C (grouped_tile); warpgroup g its rows 64g .. 64g + 63."""
        smem = cuda.shared.array(0, float16)
        bars = cuda.shared.array(stages, uint64)
        base = 2 * wgmma.aligned_start(smem)
        acc = cuda.local.array(acc_size, float32)
        t = cuda.threadIdx.x
        group = t // wgmma.WARPGROUP
        row0, col0 = grouped_tile(C.shape[0], C.shape[1], V5_BM, bn)
        steps = (K + V5_BK - 1) // V5_BK
        if t == 0:
            for s in range(stages):
                tma.init(bars, s, 1)  # one arrival per phase: the thread that asks for the tile
        tma.fence_init()
        cuda.syncthreads()
        if t == 0:
            for tile in range(min(stages - 1, steps)):
                request(smem, base, bars, a_map, b_map, row0, col0, tile)
        wgmma.fill(acc, float32(0.0))
        for step in range(steps):
            tma.wait(bars, step % stages, (step // stages) % 2)  # this tile's bytes have landed
            wgmma.fence()
            stage = base + step % stages * stage_bytes
            multiply(acc, smem, stage + group * wgmma.M_TILE * 128, stage + a_bytes, 1)
            wgmma.commit()
            wgmma.wait_one()  # this warpgroup's multiplies of tile step - 1 are done
            cuda.syncthreads()  # ... and every warpgroup's: that buffer may be refilled
            if t == 0 and step + stages - 1 < steps:
                request(smem, base, bars, a_map, b_map, row0, col0, step + stages - 1)
        wgmma.wait_all()
        store(C, row0 + wgmma.M_TILE * group, col0, acc)

    return tc_gemm_v6_kernel, stages * stage_bytes + wgmma.ATOM_BYTES


V6_KERNELS = {name: make_tc_gemm_v6(*config) for name, config in V6_CONFIGS.items()}
# bf16 operands (A and Bᵀ as uint16 arrays of bf16 words, ``precision.bf16_bits``): the default config
V6_BF16_KERNELS = {V6_DEFAULT: make_tc_gemm_v6(*V6_CONFIGS[V6_DEFAULT], "bf16")}


V7_CONFIGS = {  # bn, stages, registers per thread at launch, then the producer's and the multipliers'
    "128x256, 3 stages": (256, 3, 168, 40, 232),  # one block an SM: 40 + 2 x 232 = 3 x 168
    "128x256, 4 stages": (256, 4, 168, 40, 232),
    "128x128, 4 stages": (128, 4, 168, 40, 232),
}  # two blocks an SM (128x128, 3 stages) would leave 80 registers a thread: too few for ptxas
V7_DEFAULT = "128x256, 3 stages"
V7_THREADS = 3 * wgmma.WARPGROUP


def make_tc_gemm_v7(bn: int, stages: int, registers: int, producer_registers: int, consumer_registers: int,
                    operands: str = "fp16"):
    """Version 7 for a 128 x ``bn`` block tile and ``stages`` buffers: one producer warpgroup and
    two multiplying ones, whose registers ``setmaxnreg`` sets; returns (kernel, shared bytes)."""
    multiply, store = wgmma.MULTIPLY_TILE[operands, bn], wgmma.STORE[bn]
    release, claim = wgmma.RELEASE[producer_registers], wgmma.CLAIM[consumer_registers]
    a_bytes = V5_BM * V5_BK * 2
    stage_bytes = a_bytes + bn * V5_BK * 2
    acc_size = bn // 2
    request = _tma_request(stages, a_bytes, stage_bytes)

    @cuda.jit(device=True)
    def produce(smem, base, full, empty, a_map, b_map, row0, col0, steps):
        """(One thread) every tile in turn: wait until its buffer is empty, announce its bytes, ask TMA."""
        for tile in range(steps):
            s = tile % stages
            if tile >= stages:  # the buffer's previous tile, tile - stages, must be done with
                tma.wait(empty, s, (tile // stages - 1) % 2)
            request(smem, base, full, a_map, b_map, row0, col0, tile)

    @cuda.jit(device=True)
    def consume(smem, base, full, empty, acc, group, steps):
        """(A multiplying warpgroup) every tile in turn: wait until it is full, multiply, and say
        when the tile before it is done with (one arrival per warpgroup)."""
        for step in range(steps):
            s = step % stages
            tma.wait(full, s, (step // stages) % 2)
            wgmma.fence()
            stage = base + s * stage_bytes
            multiply(acc, smem, stage + group * wgmma.M_TILE * 128, stage + a_bytes, min(step, 1))  # the first: from zero
            wgmma.commit()
            wgmma.wait_one()  # the multiplies of tile step - 1 are done: its buffer is free
            if step > 0 and wgmma.thread_in_warpgroup() == 0:
                tma.arrive(empty, (step - 1) % stages)
        wgmma.wait_all()

    @tma.kernel(max_registers=registers)
    def tc_gemm_v7_kernel(a_map, b_map, C, K):
        """Each block owns a 128 x bn tile of C (grouped_tile). Warpgroup 0 fetches; warpgroup
        1 + g multiplies and stores rows 64g .. 64g + 63."""
        smem = cuda.shared.array(0, float16)
        full = cuda.shared.array(stages, uint64)
        empty = cuda.shared.array(stages, uint64)
        base = 2 * wgmma.aligned_start(smem)
        t = cuda.threadIdx.x
        role = t // wgmma.WARPGROUP
        row0, col0 = grouped_tile(C.shape[0], C.shape[1], V5_BM, bn)
        steps = (K + V5_BK - 1) // V5_BK
        if t == 0:
            for s in range(stages):
                tma.init(full, s, 1)  # the producer's expect; then the bytes
                tma.init(empty, s, 2)  # one arrival from each multiplying warpgroup
        tma.fence_init()
        cuda.syncthreads()  # the last block-wide barrier: from here on the roles meet only at mbarriers
        if role == 0:
            release()
            if t == 0:
                produce(smem, base, full, empty, a_map, b_map, row0, col0, steps)
        else:
            claim()
            acc = cuda.local.array(acc_size, float32)
            consume(smem, base, full, empty, acc, role - 1, steps)
            store(C, row0 + wgmma.M_TILE * (role - 1), col0, acc)

    return tc_gemm_v7_kernel, stages * stage_bytes + wgmma.ATOM_BYTES


V7_KERNELS = {name: make_tc_gemm_v7(*config) for name, config in V7_CONFIGS.items()}
V7_BF16_KERNELS = {V7_DEFAULT: make_tc_gemm_v7(*V7_CONFIGS[V7_DEFAULT], "bf16")}
# what launch_tma picks from: (version, operands) → {config: (kernel, shared bytes)}, config → (bn, ...)
TMA_KERNELS = {("v6", "fp16"): V6_KERNELS, ("v6", "bf16"): V6_BF16_KERNELS,
               ("v7", "fp16"): V7_KERNELS, ("v7", "bf16"): V7_BF16_KERNELS}
TMA_CONFIGS = {"v6": (V6_CONFIGS, V6_DEFAULT, V5_THREADS), "v7": (V7_CONFIGS, V7_DEFAULT, V7_THREADS)}


def _check_wgmma_operands(A16, Bt16, C, operands: str = "fp16"):
    want = {"fp16": np.float16, "bf16": np.uint16}.get(operands)
    if want is None:
        raise ValueError(f"operands must be 'fp16' or 'bf16', not {operands!r}")
    for name, X in (("A16", A16), ("Bt16", Bt16)):
        if np.dtype(X.dtype) != want:
            raise ValueError(f"{name} must hold {operands} operands as {np.dtype(want).name}, not {np.dtype(X.dtype).name}")
    M, K = A16.shape
    N = Bt16.shape[0]
    if K % 8 or Bt16.shape[1] != K:
        raise ValueError(f"A16 [M, K] and Bt16 [N, K] need the same K, a multiple of 8 (16-byte copies); "
                         f"got A16 {tuple(A16.shape)} and Bt16 {tuple(Bt16.shape)}")
    if tuple(C.shape) != (M, N):
        raise ValueError(f"C must be [M, N] = {(M, N)}, not {tuple(C.shape)}")


def launch_tma(A16, Bt16, C, config: str | None = None, operands: str = "fp16", version: str = "v6"):
    """C [M, N] (fp32) = A16 [M, K] · Bt16 [N, K]ᵀ with version 6 or 7 (TMA) on device operands
    (fp16, or with ``operands="bf16"`` uint16 arrays of bf16 words; rows contiguous, K a multiple
    of 8); ``config`` None is the version's default."""
    if version not in TMA_CONFIGS:
        raise ValueError(f"version must be one of {tuple(TMA_CONFIGS)}, not {version!r}")
    _check_wgmma_operands(A16, Bt16, C, operands)
    configs, default, threads = TMA_CONFIGS[version]
    config = default if config is None else config
    kernels = TMA_KERNELS[version, operands]
    if config not in kernels:
        raise ValueError(f"unknown config {config!r} for {version} with {operands} operands; "
                         f"choose one of {tuple(kernels)}")
    kernel, shared = kernels[config]
    bn = configs[config][0]
    M, K = A16.shape
    grid = blocks(Bt16.shape[0], bn) * blocks(M, V5_BM)
    a_map, b_map = (tma.cached_map(X, (rows, tma.BOX_K)).argument for X, rows in ((A16, V5_BM), (Bt16, bn)))
    wgmma.launch(kernel, grid, threads, shared, a_map, b_map, C, K)


def launch_wgmma(A16, Bt16, C, config: str = V5_DEFAULT):
    """C [M, N] (fp32) = A16 [M, K] · Bt16 [N, K]ᵀ with version 5 on device operands (fp16, rows
    contiguous); K must be a multiple of 8: every copy moves a whole 16-byte chunk."""
    if config not in V5_KERNELS:
        raise ValueError(f"unknown config {config!r}; choose one of {tuple(V5_KERNELS)}")
    _check_wgmma_operands(A16, Bt16, C)
    kernel, shared = V5_KERNELS[config]
    bn = V5_CONFIGS[config][0]
    grid = blocks(Bt16.shape[0], bn) * blocks(A16.shape[0], V5_BM)
    wgmma.launch(kernel, grid, V5_THREADS, shared, A16, Bt16, C)


def _padded(a: np.ndarray) -> np.ndarray:
    rows, cols = (blocks(n, TILE) * TILE for n in a.shape)
    out = np.zeros((rows, cols), np.float16)
    out[:a.shape[0], :a.shape[1]] = a
    return out


def launch(version: str, A16, B16, C):
    """Launch GEMM ``version`` on device operands whose sizes are multiples of 16."""
    M, N = C.shape
    if version == "v1":
        tc_gemm_v1_kernel[(N // TILE, blocks(M // TILE, WARPS)), (32, WARPS)](A16, B16, C)
    elif version == "v2":
        tc_gemm_v2_kernel[(blocks(N, BN), blocks(M, BM)), V2_THREADS](A16, B16, C)
    else:
        kernel = tc_gemm_v3_kernel if version == "v3" else tc_gemm_v4_kernel
        kernel[(blocks(N, V3_BN), blocks(M, V3_BM)), V3_THREADS](A16, B16, C)


@cuda.jit
def crop_kernel(C16, C):
    """C = the top-left M×N corner of the padded product C16 (one thread per element of C)."""
    j, i = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        C[i, j] = C16[i, j]


def matmul_tc(A, B, *, version: str = "v2", out=None):
    """C = A·B (float32 result) with A and B rounded to fp16, on the tensor cores (emulated on
    the simulator); returns C [M, N] on the device. Any M, N, K: the operands are zero-padded
    to multiples of 16 and the product is cropped back."""
    if version not in VERSIONS + WGMMA_VERSIONS:
        raise ValueError(f"unknown version {version!r}; choose one of {VERSIONS + WGMMA_VERSIONS}")
    for name, M, layout in (("A", A, "[M, K]"), ("B", B, "[K, N]")):
        require(M, name, 2, dtype=None, layout=layout)
        if np.dtype(M.dtype).kind != "f":  # complex would lose its imaginary part in fp16
            raise ValueError(f"{name} {layout} must hold real floating-point numbers (rounded to fp16), "
                             f"not {np.dtype(M.dtype).name}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"inner dimensions do not match: A is {tuple(A.shape)} and B is {tuple(B.shape)}")
    M, N = A.shape[0], B.shape[1]
    C = output(out, (M, N), "out")
    if version in WGMMA_VERSIONS:
        Bt = np.ascontiguousarray(np.asarray(to_host(B), np.float16).T)
        K8 = blocks(A.shape[1], 8) * 8  # zero columns of K up to whole 16-byte chunks
        A16, Bt16 = (np.zeros((a.shape[0], K8), np.float16) for a in (A, Bt))
        A16[:, :A.shape[1]], Bt16[:, :A.shape[1]] = to_host(A), Bt
        if version == "v5":
            launch_wgmma(to_device(A16), to_device(Bt16), C)
        else:
            launch_tma(to_device(A16), to_device(Bt16), C, version=version)
        return C
    A16, B16 = _padded(np.asarray(to_host(A), np.float16)), _padded(np.asarray(to_host(B), np.float16))
    C16 = cuda.device_array((A16.shape[0], B16.shape[1]), np.float32)
    launch(version, to_device(A16), to_device(B16), C16)
    crop_kernel[(blocks(N, 16), blocks(M, 16)), (16, 16)](C16, C)
    return C


def reference(A, B) -> np.ndarray:
    """What the tensor cores compute, in float64: the fp16-rounded operands multiplied exactly."""
    return np.asarray(A, np.float16).astype(np.float64) @ np.asarray(B, np.float16).astype(np.float64)
