"""16.5b: the tensor-core GEMM ladder HGEMM's warpgroup versions 5-9 (Hopper's wgmma, cp.async or
TMA into a ring of swizzled shared-memory buffers; v7 and v9 with a producer warpgroup, v8 and v9
persistent), C [M, N] fp32 (v8, v9: or 16-bit) = A [M, K] · Bᵀ with Bᵀ given as [N, K]. Both
operands are read from shared memory, K-major: that is this book's choice, not the
instruction's rule. wgmma's f16 and bf16 forms also take an M- or N-major operand from shared
memory (the imm-trans-a and imm-trans-b flags) and may take A from registers; only its tf32, fp8
and int8 forms need K-major operands (PTX ISA, "wgmma.mma_async"). Taking Bᵀ keeps one layout,
one descriptor and one copy routine for A and B, and it is nn.Linear's weight as stored.
Kernels and their configurations only: the launcher is gpulib/gemm/tensorcore.py."""

from __future__ import annotations

from numba import cuda, float32, types, uint64

from gpulib.arrays import require_int
from gpulib.tensorcore import tma, wgmma

float16 = types.float16


V5_BM, V5_BK = 128, 64  # two warpgroups of 64 rows; one 128-byte swizzle row of K
V5_THREADS = 2 * wgmma.WARPGROUP
V5_CONFIGS = {"128x128, 4 stages": (128, 4), "128x128, 3 stages": (128, 3), "128x256, 3 stages": (256, 3)}
V5_DEFAULT = "128x128, 4 stages"


GROUP_M = 8  # tile rows that sweep the columns together (grouped_tile)


@cuda.jit(device=True)
def tile_origin(tile, M, N, bm, bn):
    """(row0, col0) of the bm x bn tile of C [M, N] numbered ``tile``, numbered so that groups of
    GROUP_M tile rows sweep the tile columns together: the tiles worked on at the same time share
    a few panels of A and of Bᵀ, which then stay in L2, instead of each row of tiles reading all of Bᵀ."""
    tiles_m = (M + bm - 1) // bm
    tiles_n = (N + bn - 1) // bn
    per_group = GROUP_M * tiles_n
    first = (tile // per_group) * GROUP_M
    size = min(tiles_m - first, GROUP_M)
    inside = tile % per_group
    return (first + inside % size) * bm, (inside // size) * bn


@cuda.jit(device=True)
def grouped_tile(M, N, bm, bn):
    """tile_origin of block blockIdx.x's tile: one block per tile."""
    return tile_origin(cuda.blockIdx.x, M, N, bm, bn)


MAX_DYNAMIC_SHARED = 227 * 1024  # bytes of shared memory a block may opt in to (compute capability 9.0)


def _check_config(bn, stages, operands, least_stages: int, staged_bytes: int = 0) -> None:
    """A wgmma GEMM's tile width, ring depth and operands, as the GPU requires them (on the simulator too)."""
    if isinstance(bn, bool) or bn not in wgmma.STORE:
        raise ValueError(f"bn must be one of {tuple(wgmma.STORE)} (the wgmma tile's N), not {bn!r}")
    stages = require_int(stages, "stages", least_stages)
    if operands not in ("fp16", "bf16"):
        raise ValueError(f"operands must be 'fp16' or 'bf16', not {operands!r}")
    shared = stages * (V5_BM * V5_BK * 2 + bn * V5_BK * 2) + staged_bytes
    if shared > MAX_DYNAMIC_SHARED:
        staged = f" and a staged {staged_bytes}-byte output tile" if staged_bytes else ""
        raise ValueError(f"stages={stages} with bn={bn}{staged} needs {shared} bytes of shared memory; a block may "
                         f"hold at most {MAX_DYNAMIC_SHARED}")


def make_tc_gemm_v5(bn: int, stages: int, operands: str = "fp16"):
    """Version 5 for a 128 x ``bn`` block tile (bn = 64, 128 or 256), a ring of ``stages`` (3 or 4)
    shared buffers of A's and Bᵀ's 64-deep tiles and fp16 or bf16 operands (the copies move
    16-bit words as they are); returns (kernel, shared bytes)."""
    _check_config(bn, stages, operands, 3)  # a ring of 3 or more: one tile being multiplied, one ahead, one landing
    multiply, store = wgmma.MULTIPLY_TILE[operands, bn], wgmma.STORE[bn]
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


def _tma_request_at(a_bytes: int, stage_bytes: int):
    @cuda.jit(device=True)
    def request_at(smem, base, bars, s, a_map, b_map, row0, col0, k0):
        """(One thread) announce a stage's bytes on barrier ``s`` and ask TMA for A[row0:+128,
        k0:+64] and Bᵀ[col0:+bn, k0:+64] into buffer ``s``."""
        tma.expect(bars, s, stage_bytes)
        tma.load(smem, base + s * stage_bytes, a_map, row0, k0, bars, s)
        tma.load(smem, base + s * stage_bytes + a_bytes, b_map, col0, k0, bars, s)
    return request_at


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
    _check_config(bn, stages, operands, 2)
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
            tma.acquire(a_map)  # the maps were copied from the host: fence before TMA reads them
            tma.acquire(b_map)
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
    _check_config(bn, stages, operands, 2)
    registers = require_int(registers, "registers", 24)
    if registers > 255:
        raise ValueError(f"registers must be at most 255 a thread, not {registers}")
    for name, value, table in (("producer_registers", producer_registers, wgmma.RELEASE),
                               ("consumer_registers", consumer_registers, wgmma.CLAIM)):
        if isinstance(value, bool) or value not in table:
            raise ValueError(f"{name} must be one of {tuple(table)} (setmaxnreg counts), not {value!r}")
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
        tma.wait(full, 0, 0)  # the first tile, outside the loop: it starts acc from zero
        wgmma.fence()
        multiply(acc, smem, base + group * wgmma.M_TILE * 128, base + a_bytes, 0)
        wgmma.commit()
        for step in range(1, steps):
            s = step % stages
            tma.wait(full, s, (step // stages) % 2)
            wgmma.fence()
            stage = base + s * stage_bytes
            multiply(acc, smem, stage + group * wgmma.M_TILE * 128, stage + a_bytes, 1)
            wgmma.commit()
            wgmma.wait_one()  # the multiplies of tile step - 1 are done: its buffer is free
            if wgmma.thread_in_warpgroup() == 0:
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
            tma.acquire(a_map)  # thread 0 is the producer: the maps before TMA reads them
            tma.acquire(b_map)
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

V8_CONFIGS = {  # bn, stages; a staged 16-bit output tile takes bn / 64 boxes of 16 KiB besides
    "128x256, 3 stages": (256, 3),  # 144 KiB of ring + 64 KiB staged
    "128x256, 4 stages": (256, 4),  # fp32 C only: 192 KiB of ring leaves no room to stage
    "128x128, 4 stages": (128, 4),
    "128x128, 6 stages": (128, 6),  # 192 KiB of ring + 32 KiB staged
}
V8_DEFAULT = "128x256, 3 stages"
OUTPUTS = ("fp32", "16-bit")  # C as float32, or in the operands' own type (fp16, or bf16 words)
SIMULATED_SMS = 2  # v8's grid on the simulator: two blocks, each working through several tiles


def _v8_shared_bytes(bn: int, stages: int, out: str) -> int:
    """Dynamic shared memory of v8 with this tile, ring and output (the atom's alignment included)."""
    staged = (bn // 64) * wgmma.BOX_BYTES if out == "16-bit" else 0
    return stages * (V5_BM * V5_BK * 2 + bn * V5_BK * 2) + staged + wgmma.ATOM_BYTES


def make_tc_gemm_v8(bn: int, stages: int, operands: str = "fp16", out: str = "fp32"):
    """Version 8 for a 128 x ``bn`` block tile, ``stages`` buffers, fp16 or bf16 operands and C in
    fp32 or (``out="16-bit"``) the operands' type: persistent, one block an SM works through the
    tiles blockIdx.x, blockIdx.x + gridDim.x, ... (tile_origin's grouped order), with one ring of
    buffers for all of them, so the next tile's first boxes land while this one's results go
    out; fp32 results leave in 8-byte stores, 16-bit ones through shared memory and TMA stores
    that run on while the next tile is multiplied. Returns (kernel, shared bytes)."""
    if out not in OUTPUTS:
        raise ValueError(f"out must be one of {OUTPUTS}, not {out!r}")
    staged = out == "16-bit"
    _check_config(bn, stages, operands, 2)
    if staged:  # the tile's 16-bit results beside the ring
        _check_config(bn, stages, operands, 2, (bn // 64) * wgmma.BOX_BYTES)
    multiply = wgmma.MULTIPLY_TILE[operands, bn]
    store_pairs, stage_out = wgmma.EPILOGUE[operands, bn]
    a_bytes = V5_BM * V5_BK * 2
    stage_bytes = a_bytes + bn * V5_BK * 2
    out_offset = stages * stage_bytes  # the staged tile: after the ring, 1024-byte aligned like it
    boxes = bn // 64
    acc_size = bn // 2
    request_at = _tma_request_at(a_bytes, stage_bytes)

    @cuda.jit(device=True)
    def request(smem, base, bars, a_map, b_map, M, N, steps, f, at):
        """(One thread) the f-th 64-deep stage of this block's run of tiles into buffer f mod
        stages, then ``at`` moved on to the next: ``at`` = (tile of its own, k-step, row0, col0)
        of stage f. Kept up to date, not divided out of f: a 64-bit division by the run-time
        ``steps`` (and tile_origin's by M and N) costs hundreds of cycles, and the whole first
        warpgroup waits for this thread at its next wgmma, so it would cost every k-step."""
        request_at(smem, base, bars, f % stages, a_map, b_map, at[2], at[3], at[1] * V5_BK)
        at[1] += 1
        if at[1] == steps:  # the next tile of this block: once per tile
            at[0] += 1
            at[1] = 0
            at[2], at[3] = tile_origin(cuda.blockIdx.x + at[0] * cuda.gridDim.x, M, N, V5_BM, bn)

    @tma.kernel
    def tc_gemm_v8_kernel(a_map, b_map, c_map, C, K):
        """Block b owns tiles b, b + gridDim.x, ... of C; warpgroup g their rows 64g .. 64g + 63.
        ``c_map`` is C's tensor map when C is 16-bit (unread for fp32 C)."""
        smem = cuda.shared.array(0, float16)
        bars = cuda.shared.array(stages, uint64)
        base = 2 * wgmma.aligned_start(smem)
        acc = cuda.local.array(acc_size, float32)
        t = cuda.threadIdx.x
        group = t // wgmma.WARPGROUP
        M, N = C.shape
        steps = (K + V5_BK - 1) // V5_BK
        tiles = ((M + V5_BM - 1) // V5_BM) * ((N + bn - 1) // bn)
        mine = max(tiles - cuda.blockIdx.x + cuda.gridDim.x - 1, 0) // cuda.gridDim.x
        total = mine * steps  # the stages of all this block's tiles, in one stream
        paired = (C.strides[0] // 4) % 2 == 0  # fp32 rows start at multiples of 8 bytes
        if t == 0:
            for s in range(stages):
                tma.init(bars, s, 1)
            tma.acquire(a_map)
            tma.acquire(b_map)
            if staged:
                tma.acquire(c_map)
        tma.fence_init()
        cuda.syncthreads()
        at = cuda.local.array(4, types.int64)  # (thread 0) where its next request is
        at[0], at[1] = 0, 0
        at[2], at[3] = tile_origin(cuda.blockIdx.x, M, N, V5_BM, bn)
        if t == 0:
            for f in range(min(stages - 1, total)):
                request(smem, base, bars, a_map, b_map, M, N, steps, f, at)
        for i in range(mine):
            row0, col0 = tile_origin(cuda.blockIdx.x + i * cuda.gridDim.x, M, N, V5_BM, bn)
            for k in range(steps):
                f = i * steps + k
                s = f % stages
                tma.wait(bars, s, (f // stages) % 2)
                wgmma.fence()
                stage = base + s * stage_bytes
                multiply(acc, smem, stage + group * wgmma.M_TILE * 128, stage + a_bytes, min(k, 1))  # k = 0: from zero
                wgmma.commit()
                wgmma.wait_one()  # this warpgroup's multiplies of stage f - 1 are done
                cuda.syncthreads()  # ... and every warpgroup's: that buffer may be refilled
                if t == 0 and f + stages - 1 < total:  # may be the next tile's: it lands during the epilogue
                    request(smem, base, bars, a_map, b_map, M, N, steps, f + stages - 1, at)
            wgmma.wait_all()  # the tile is summed: out with it
            if staged:
                if t == 0:
                    tma.store_wait_read()  # the previous tile's boxes have left the staged tile
                cuda.syncthreads()
                stage_out(smem, base + out_offset, wgmma.M_TILE * group, acc)
                wgmma.fence_async_proxy()  # these writes, visible to the copy engine ...
                cuda.syncthreads()  # ... every thread's
                if t == 0:
                    for j in range(boxes):
                        tma.store(smem, base + out_offset + j * wgmma.BOX_BYTES, c_map, row0, col0 + 64 * j)
                    tma.store_commit()
            else:
                store_pairs(C, row0 + wgmma.M_TILE * group, col0, acc, paired)
        if staged and t == 0:
            tma.store_wait()  # the last boxes written before the block (and its shared memory) goes

    return tc_gemm_v8_kernel, _v8_shared_bytes(bn, stages, out)


def _persistent_table(make, operands: str, out: str) -> dict:
    """A persistent version's configs (v8's, which v9 shares) that fit this output's shared
    memory, each (kernel, shared bytes) from ``make``."""
    return {name: make(bn, stages, operands, out) for name, (bn, stages) in V8_CONFIGS.items()
            if _v8_shared_bytes(bn, stages, out) <= MAX_DYNAMIC_SHARED}


V8_KERNELS = {(operands, out): _persistent_table(make_tc_gemm_v8, operands, out)
              for operands in ("fp16", "bf16") for out in OUTPUTS}

V9_CONFIGS = V8_CONFIGS  # the same tiles and rings as v8: only the roles differ
V9_DEFAULT = V8_DEFAULT
V9_THREADS = 3 * wgmma.WARPGROUP
V9_REGISTERS = (168, 40, 232)  # at launch, then the producer's and the multipliers' (as v7: 40 + 2 x 232 = 3 x 168)
OUT_ROWS = wgmma.M_TILE  # v9's 16-bit C leaves in boxes of 64 rows: each multiplying warpgroup its own


@cuda.jit(device=True)
def next_buffer(s, phase, stages):
    """The ring position after buffer ``s`` in phase ``phase`` (a counter, not a division)."""
    s += 1
    if s == stages:
        return 0, phase ^ 1
    return s, phase


def make_tc_gemm_v9(bn: int, stages: int, operands: str = "fp16", out: str = "fp32"):
    """Version 9: v8's persistent tiles and epilogues with v7's roles. Warpgroup 0 (one thread of
    it) fetches every stage of every tile of the block into the ring, waiting only for a buffer
    to be empty; warpgroups 1 and 2 multiply and write the results, and they meet the producer
    only at mbarriers. While they write one tile's results, the producer is already filling the
    ring with the next tile's stages. Returns (kernel, shared bytes)."""
    if out not in OUTPUTS:
        raise ValueError(f"out must be one of {OUTPUTS}, not {out!r}")
    staged = out == "16-bit"
    _check_config(bn, stages, operands, 2)
    if staged:  # the tile's 16-bit results beside the ring
        _check_config(bn, stages, operands, 2, (bn // 64) * wgmma.BOX_BYTES)
    multiply = wgmma.MULTIPLY_TILE[operands, bn]
    store_pairs, stage_out = wgmma.EPILOGUE[operands, bn]
    registers, producer_registers, consumer_registers = V9_REGISTERS
    release, claim = wgmma.RELEASE[producer_registers], wgmma.CLAIM[consumer_registers]
    a_bytes = V5_BM * V5_BK * 2
    stage_bytes = a_bytes + bn * V5_BK * 2
    out_offset = stages * stage_bytes
    half = OUT_ROWS * 128  # bytes of one warpgroup's 64 rows in each 128-row staged box
    boxes = bn // 64
    acc_size = bn // 2
    request_at = _tma_request_at(a_bytes, stage_bytes)

    @cuda.jit(device=True)
    def produce(smem, base, full, empty, a_map, b_map, M, N, steps, mine):
        """(One thread) every stage of this block's tiles in turn: wait until its buffer is
        empty (the two multiplying warpgroups are done with what it held), then ask TMA for it."""
        s, phase = 0, 0
        f = 0
        for i in range(mine):
            row0, col0 = tile_origin(cuda.blockIdx.x + i * cuda.gridDim.x, M, N, V5_BM, bn)
            for k in range(steps):
                if f >= stages:  # the buffer's previous stage, f - stages, must be done with
                    tma.wait(empty, s, phase ^ 1)
                request_at(smem, base, full, s, a_map, b_map, row0, col0, k * V5_BK)
                f += 1
                s, phase = next_buffer(s, phase, stages)

    @cuda.jit(device=True)
    def consume(smem, base, full, empty, acc, group, steps, s, phase):
        """(A multiplying warpgroup) one tile's stages from ring position (s, phase): the first
        outside the loop, from zero (a first multiply chosen inside the loop leaves ptxas an
        accumulator defined in flight, and it serializes every wgmma); each buffer given back
        (one arrival per warpgroup) once its multiplies are done. Returns the next position."""
        lane = wgmma.thread_in_warpgroup()
        tma.wait(full, s, phase)
        wgmma.fence()
        stage = base + s * stage_bytes
        multiply(acc, smem, stage + group * wgmma.M_TILE * 128, stage + a_bytes, 0)
        wgmma.commit()
        done = s
        s, phase = next_buffer(s, phase, stages)
        for k in range(1, steps):
            tma.wait(full, s, phase)
            wgmma.fence()
            stage = base + s * stage_bytes
            multiply(acc, smem, stage + group * wgmma.M_TILE * 128, stage + a_bytes, 1)
            wgmma.commit()
            wgmma.wait_one()  # the multiplies of the stage before are done: its buffer is free
            if lane == 0:
                tma.arrive(empty, done)
            done = s
            s, phase = next_buffer(s, phase, stages)
        wgmma.wait_all()
        if lane == 0:
            tma.arrive(empty, done)
        return s, phase

    @tma.kernel(max_registers=registers)
    def tc_gemm_v9_kernel(a_map, b_map, c_map, C, K):
        """Block b owns tiles b, b + gridDim.x, ... of C. Warpgroup 0 fetches; warpgroup 1 + g
        multiplies and writes rows 64g .. 64g + 63 of each. ``c_map`` (a 16-bit C's tensor map,
        64-row boxes) is unread for fp32 C."""
        smem = cuda.shared.array(0, float16)
        full = cuda.shared.array(stages, uint64)
        empty = cuda.shared.array(stages, uint64)
        met = cuda.shared.array(2, uint64)  # (16-bit C) each multiplying warpgroup's own barrier
        base = 2 * wgmma.aligned_start(smem)
        t = cuda.threadIdx.x
        role = t // wgmma.WARPGROUP
        M, N = C.shape
        steps = (K + V5_BK - 1) // V5_BK
        tiles = ((M + V5_BM - 1) // V5_BM) * ((N + bn - 1) // bn)
        mine = max(tiles - cuda.blockIdx.x + cuda.gridDim.x - 1, 0) // cuda.gridDim.x
        if t == 0:
            for s in range(stages):
                tma.init(full, s, 1)  # the producer's expect; then the bytes
                tma.init(empty, s, 2)  # one arrival from each multiplying warpgroup
            for g in range(2):
                tma.init(met, g, wgmma.WARPGROUP)
            tma.acquire(a_map)
            tma.acquire(b_map)
            if staged:
                tma.acquire(c_map)
        tma.fence_init()
        cuda.syncthreads()  # the last block-wide barrier
        if role == 0:
            release()
            if t == 0:
                produce(smem, base, full, empty, a_map, b_map, M, N, steps, mine)
        else:
            claim()
            group = role - 1
            lane = wgmma.thread_in_warpgroup()
            paired = (C.strides[0] // 4) % 2 == 0
            acc = cuda.local.array(acc_size, float32)
            s, phase = 0, 0
            for i in range(mine):
                row0, col0 = tile_origin(cuda.blockIdx.x + i * cuda.gridDim.x, M, N, V5_BM, bn)
                s, phase = consume(smem, base, full, empty, acc, group, steps, s, phase)
                if staged:
                    mine_out = base + out_offset + group * half  # this warpgroup's rows of each box
                    if lane == 0:
                        tma.store_wait_read()  # its previous boxes have left the staged rows
                    tma.arrive(met, group)
                    tma.wait(met, group, 0)  # (two phases a tile: this one even, the next odd)
                    stage_out(smem, base + out_offset, wgmma.M_TILE * group, acc)
                    wgmma.fence_async_proxy()  # the writes, visible to the copy engine ...
                    tma.arrive(met, group)
                    tma.wait(met, group, 1)  # ... every thread's of the warpgroup
                    if lane == 0:
                        for j in range(boxes):
                            tma.store(smem, mine_out + j * wgmma.BOX_BYTES, c_map,
                                      row0 + wgmma.M_TILE * group, col0 + 64 * j)
                        tma.store_commit()
                else:
                    store_pairs(C, row0 + wgmma.M_TILE * group, col0, acc, paired)
            if staged and lane == 0:
                tma.store_wait()

    return tc_gemm_v9_kernel, _v8_shared_bytes(bn, stages, out)


V9_KERNELS = {(operands, out): _persistent_table(make_tc_gemm_v9, operands, out)
              for operands in ("fp16", "bf16") for out in OUTPUTS}

# every version and config with either operand type: (version, operands) → {config: (kernel, shared bytes)};
# bf16 operands are uint16 arrays of bf16 words (gpulib.precision.bf16_bits)
KERNELS = {
    ("v5", "fp16"): V5_KERNELS,
    ("v5", "bf16"): {name: make_tc_gemm_v5(*config, "bf16") for name, config in V5_CONFIGS.items()},
    ("v6", "fp16"): V6_KERNELS,
    ("v6", "bf16"): {name: make_tc_gemm_v6(*config, "bf16") for name, config in V6_CONFIGS.items()},
    ("v7", "fp16"): V7_KERNELS,
    ("v7", "bf16"): {name: make_tc_gemm_v7(*config, "bf16") for name, config in V7_CONFIGS.items()},
    ("v8", "fp16"): V8_KERNELS["fp16", "fp32"],
    ("v8", "bf16"): V8_KERNELS["bf16", "fp32"],
    ("v9", "fp16"): V9_KERNELS["fp16", "fp32"],
    ("v9", "bf16"): V9_KERNELS["bf16", "fp32"],
}
# version → (its configs, the default, threads per block)
CONFIGS = {"v5": (V5_CONFIGS, V5_DEFAULT, V5_THREADS), "v6": (V6_CONFIGS, V6_DEFAULT, V5_THREADS),
           "v7": (V7_CONFIGS, V7_DEFAULT, V7_THREADS), "v8": (V8_CONFIGS, V8_DEFAULT, V5_THREADS),
           "v9": (V9_CONFIGS, V9_DEFAULT, V9_THREADS)}
