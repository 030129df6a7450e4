"""16.4: the book's own GEMM kernels, C = A·B (A [M, K], B [K, N], C [M, N], float32, row-major).

    version 1  one thread per element of C, from global memory
    version 2  shared-memory tiles (TILE×TILE)
    version 3  register blocking: a BM×BN block tile, TM×TN outputs per thread
    version 4  version 3 with two shared buffers per tile and unsigned 32-bit offsets
    version 5  version 4 with 128-bit shared-memory loads of runs of four
    version 6  version 5 with warp tiling and its k steps written out (no loop for ptxas to keep)

All of them handle any M, N, K (loads outside read as zero, stores are guarded); 16.4's notebook
says what each step buys. What must stay true: every version writes every element of C once.
"""

from functools import lru_cache

from numba import cuda, float32, uint32

from gpulib.env import on_gpu

TILE = 16
V3 = dict(BM=128, BN=128, BK=8, TM=8, TN=8, PREFETCH=True)  # version 3's default: 16×16 threads, fastest on the H200
V3_SMALL = dict(BM=64, BN=64, BK=8, TM=4, TN=4, PREFETCH=True)  # for C of at most 64 rows
# the simulator runs every thread in Python: a small tile wastes less work on small matrices
V3_SIM = dict(BM=16, BN=16, BK=4, TM=2, TN=2, PREFETCH=True)
V4 = dict(BM=128, BN=128, BK=8, TM=8, TN=8)  # 16×16 threads, 8×8 outputs each: fastest on the H200
V4_SIM = dict(BM=16, BN=16, BK=4, TM=2, TN=2)
V5 = dict(BM=128, BN=128, BK=8, TM=8, TN=8)
V5_SIM = dict(BM=16, BN=16, BK=4, TM=4, TN=4)  # runs of four need TM, TN ≥ 4


@cuda.jit
def gemm_v1_kernel(A, B, C):
    """One thread per C[i, j] = Σ_k A[i, k]·B[k, j]."""
    j, i = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


@cuda.jit
def gemm_v2_kernel(A, B, C):
    """Shared-memory tiles of TILE×TILE: each block walks K in steps of TILE."""
    a_tile = cuda.shared.array((TILE, TILE), float32)
    b_tile = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    i = cuda.blockIdx.y * TILE + ty
    j = cuda.blockIdx.x * TILE + tx
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        a_tile[ty, tx] = A[i, k0 + tx] if i < M and k0 + tx < K else float32(0.0)
        b_tile[ty, tx] = B[k0 + ty, j] if k0 + ty < K and j < N else float32(0.0)
        cuda.syncthreads()  # both tiles complete before anyone multiplies
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()  # everyone done before the next step overwrites the tiles
    if i < M and j < N:
        C[i, j] = acc


TILE_KEYS = ("BM", "BN", "BK", "TM", "TN")
OPTIONAL_KEYS = ("PREFETCH", "REGISTERS")


def check_tile(tile: dict, name: str = "tile") -> dict:
    """A block-tile dict (BM, BN, BK, TM, TN as positive integers, TM dividing BM and TN
    dividing BN; PREFETCH optional, for version 3; REGISTERS optional, for versions 5 and 6: the
    cap on registers a thread, 0 for none, by default the most that lets two blocks share an SM):
    ValueError naming what is wrong, else the tile itself."""
    if not isinstance(tile, dict):
        raise ValueError(f"{name} must be a dict of {', '.join(TILE_KEYS)}, not {type(tile).__name__}")
    missing = [k for k in TILE_KEYS if k not in tile]
    unknown = [k for k in tile if k not in TILE_KEYS + OPTIONAL_KEYS]
    if missing or unknown:
        raise ValueError(f"{name} needs the keys {', '.join(TILE_KEYS)} (and PREFETCH or REGISTERS, optional): "
                         + (f"missing {missing}" if missing else "") + (f" unknown {unknown}" if unknown else ""))
    for key in TILE_KEYS:
        value = tile[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}[{key!r}] must be a positive integer, not {value!r}")
    cap = tile.get("REGISTERS", 0)
    if isinstance(cap, bool) or not isinstance(cap, int) or not (cap == 0 or 16 <= cap <= 255):
        raise ValueError(f"{name}['REGISTERS'] must be 0 (no cap) or a cap from 16 to 255 registers a thread, not {cap!r}")
    if tile["BM"] % tile["TM"] or tile["BN"] % tile["TN"]:
        raise ValueError(f"{name}: TM must divide BM and TN must divide BN, not BM={tile['BM']}, TM={tile['TM']}, "
                         f"BN={tile['BN']}, TN={tile['TN']}")
    threads = (tile["BM"] // tile["TM"]) * (tile["BN"] // tile["TN"])
    if threads > MAX_THREADS:  # a GPU's limit, checked on the simulator too
        raise ValueError(f"{name} gives (BM/TM)·(BN/TN) = {threads} threads a block; a block holds at most {MAX_THREADS}")
    shared = 2 * 4 * tile["BK"] * (tile["BM"] + 4 + tile["BN"])  # two A and B tiles of float32 (prefetching)
    if shared > MAX_STATIC_SHARED:
        raise ValueError(f"{name} needs {shared} bytes of shared memory a block (2·4·BK·(BM + 4 + BN)); static "
                         f"shared memory holds at most {MAX_STATIC_SHARED}")
    return tile


MAX_THREADS = 1024  # threads per block (CUDA Programming Guide, compute capability 9.0)
MAX_STATIC_SHARED = 48 * 1024  # bytes of statically allocated shared memory per block


@lru_cache(maxsize=None)
def gemm_v3_kernel(BM: int = 128, BN: int = 128, BK: int = 8, TM: int = 8, TN: int = 8,
                   PREFETCH: bool = True):
    """Version 3 for a BM×BN block tile, BK-deep steps and TM×TN outputs per thread.

    Launch with (BN // TN) × (BM // TM) threads per block (16×16 = 256 with the default V3). Thread
    (tx, ty) owns rows ty, ty + BM/TM, ty + 2·BM/TM, ... and columns tx, tx + BN/TN, ...:
    spread out, so a warp's reads of the B tile hit 16 different banks and its stores to C are
    runs of consecutive addresses. The A tile has 4 floats of padding per row so that the
    transposing store into it does not make every thread of a warp hit the same bank.

    PREFETCH: each thread loads its share of the *next* A and B tiles from global memory into
    registers before it multiplies the current tiles, so the ~500-cycle wait for global
    memory overlaps the arithmetic instead of preceding it (software pipelining).
    """
    THREADS_X, THREADS_Y = BN // TN, BM // TM
    THREADS = THREADS_X * THREADS_Y
    if (BM * BK) % THREADS or (BK * BN) % THREADS:
        raise ValueError(f"{THREADS} threads cannot share a {BM}x{BK} and a {BK}x{BN} tile evenly")
    A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS  # tile elements per thread
    A_ROW = BM + 4  # a_tile's row length: 4 floats of padding
    A_SIZE, B_SIZE = BK * A_ROW, BK * BN

    @cuda.jit(device=True)
    def fetch(A, B, a_next, b_next, row0, col0, k0, flat):
        """This thread's share of the A tile (rows row0.., columns k0..) and B tile, into registers."""
        M, K = A.shape
        N = B.shape[1]
        for i in range(A_LOADS):
            e = flat + i * THREADS
            gi, gk = row0 + e // BK, k0 + e % BK  # neighbouring threads read along a row of A
            # unsigned indices: in bounds, so no negative-index check (as in the k loop below)
            a_next[i] = A[uint32(gi), uint32(gk)] if gi < M and gk < K else float32(0.0)
        for i in range(B_LOADS):
            e = flat + i * THREADS
            gk, gj = k0 + e // BN, col0 + e % BN
            b_next[i] = B[uint32(gk), uint32(gj)] if gk < K and gj < N else float32(0.0)

    @cuda.jit
    def gemm_v3(A, B, C):
        a_flat = cuda.shared.array(A_SIZE, float32)  # A tile transposed: [k, m] at k·A_ROW + m
        b_flat = cuda.shared.array(B_SIZE, float32)  # B tile: [k, n] at k·BN + n
        acc = cuda.local.array((TM, TN), float32)  # the thread's TM×TN outputs, in registers
        a_reg = cuda.local.array(TM, float32)
        b_reg = cuda.local.array(TN, float32)
        a_next = cuda.local.array(A_LOADS, float32)  # tile elements on their way from global memory
        b_next = cuda.local.array(B_LOADS, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        flat = ty * THREADS_X + tx
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        M, K = A.shape
        N = B.shape[1]
        for m in range(TM):
            for n in range(TN):
                acc[m, n] = float32(0.0)
        if PREFETCH:
            fetch(A, B, a_next, b_next, row0, col0, 0, flat)
        for k0 in range(0, K, BK):
            if not PREFETCH:
                fetch(A, B, a_next, b_next, row0, col0, k0, flat)
            for i in range(A_LOADS):  # registers → shared tiles
                e = flat + i * THREADS
                a_flat[(e % BK) * A_ROW + e // BK] = a_next[i]
            for i in range(B_LOADS):
                e = flat + i * THREADS
                b_flat[e] = b_next[i]
            cuda.syncthreads()
            if PREFETCH and k0 + BK < K:  # start the next tiles' loads; they land during the math
                fetch(A, B, a_next, b_next, row0, col0, k0 + BK, flat)
            for k in range(BK):
                # Row k of each tile, as an unsigned 32-bit offset. Numba indexes with signed
                # 64-bit integers and guards every access against negative indices; with an
                # unsigned base plus a constant, each load below compiles to one shared-memory
                # load with an immediate offset (see the PTX: ld.shared.f32 [%rd + 64]).
                a_k = uint32(k * A_ROW + ty)
                b_k = uint32(k * BN + tx)
                for m in range(TM):
                    a_reg[m] = a_flat[a_k + uint32(m * THREADS_Y)]
                for n in range(TN):
                    b_reg[n] = b_flat[b_k + uint32(n * THREADS_X)]
                for m in range(TM):  # TM×TN multiply-adds from TM + TN shared-memory reads
                    for n in range(TN):
                        acc[m, n] += a_reg[m] * b_reg[n]
            cuda.syncthreads()
        for m in range(TM):
            for n in range(TN):
                i, j = row0 + ty + m * THREADS_Y, col0 + tx + n * THREADS_X
                if i < M and j < N:
                    C[i, j] = acc[m, n]

    return gemm_v3


def block_threads(tile: dict) -> tuple[int, int]:
    """(x, y) threads per block of a register-blocked version (3, 4 or 5) for ``tile``:
    BN/TN × BM/TM, each thread computing a TM×TN patch of the block's BM×BN tile."""
    check_tile(tile)
    return tile["BN"] // tile["TN"], tile["BM"] // tile["TM"]


@lru_cache(maxsize=None)
def tile_movers(BM: int, BN: int, BK: int, TM: int, TN: int):
    """The device functions versions 4 and 5 move their tiles with, for a BM×BN×BK tile and
    (BN/TN)·(BM/TM) threads: ``fetch`` (this thread's share of the next A and B tiles, from
    global memory into registers; zero outside the matrices) and ``publish`` (the registers
    into shared buffer 0 or 1, A transposed, its rows padded to BM + 4 as in version 3)."""
    THREADS = (BN // TN) * (BM // TM)
    if (BM * BK) % THREADS or (BK * BN) % THREADS:
        raise ValueError(f"{THREADS} threads cannot share a {BM}x{BK} and a {BK}x{BN} tile evenly")
    A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS
    A_ROW = BM + 4
    A_SIZE, B_SIZE = BK * A_ROW, BK * BN

    @cuda.jit(device=True)
    def fetch(A, B, a_next, b_next, row0, col0, k0, flat):
        """This thread's share of the next A and B tiles, from global memory into registers."""
        M, K = A.shape
        N = B.shape[1]
        for i in range(A_LOADS):
            e = uint32(flat + i * THREADS)
            gi, gk = uint32(row0 + e // BK), uint32(k0 + e % BK)
            a_next[i] = A[gi, gk] if gi < M and gk < K else float32(0.0)
        for i in range(B_LOADS):
            e = uint32(flat + i * THREADS)
            gk, gj = uint32(k0 + e // BN), uint32(col0 + e % BN)
            b_next[i] = B[gk, gj] if gk < K and gj < N else float32(0.0)

    @cuda.jit(device=True)
    def publish(a_flat, b_flat, a_next, b_next, buffer, flat):
        """The registers' tiles into shared buffer ``buffer`` (0 or 1), A transposed."""
        a_base, b_base = uint32(buffer * A_SIZE), uint32(buffer * B_SIZE)
        for i in range(A_LOADS):
            e = uint32(flat + i * THREADS)
            a_flat[a_base + uint32((e % BK) * A_ROW + e // BK)] = a_next[i]
        for i in range(B_LOADS):
            e = uint32(flat + i * THREADS)
            b_flat[b_base + e] = b_next[i]

    return fetch, publish


@lru_cache(maxsize=None)
def gemm_v4_kernel(BM: int = 128, BN: int = 128, BK: int = 8, TM: int = 8, TN: int = 8):
    """Version 4 for a BM×BN block tile: version 3's register blocking and register prefetch,
    with double-buffered shared tiles (one barrier per BK step) and unsigned offsets.

    Step i multiplies from buffer i % 2 while the tiles of step i + 1, already in registers,
    go into buffer (i + 1) % 2 after the multiply; the barrier at the end of step i then both
    publishes the new tiles and guarantees that nobody still reads the buffer that step i + 2
    will overwrite. Launch with (BN // TN) × (BM // TM) threads per block.
    """
    fetch, publish = tile_movers(BM, BN, BK, TM, TN)  # (refuses a tile the threads cannot share evenly)
    THREADS_X, THREADS_Y = BN // TN, BM // TM
    THREADS = THREADS_X * THREADS_Y
    A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS
    A_ROW = BM + 4  # padding against bank conflicts in the transposing store, as in version 3
    A_SIZE, B_SIZE = BK * A_ROW, BK * BN
    A_BUFFERS, B_BUFFERS = 2 * A_SIZE, 2 * B_SIZE  # shared array sizes must be constants

    @cuda.jit
    def gemm_v4(A, B, C):
        a_flat = cuda.shared.array(A_BUFFERS, float32)  # two A tiles, transposed: [k, m]
        b_flat = cuda.shared.array(B_BUFFERS, float32)  # two B tiles: [k, n]
        acc = cuda.local.array((TM, TN), float32)
        a_reg = cuda.local.array(TM, float32)
        b_reg = cuda.local.array(TN, float32)
        a_next = cuda.local.array(A_LOADS, float32)
        b_next = cuda.local.array(B_LOADS, float32)
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        flat = uint32(ty * THREADS_X + tx)
        row0 = uint32(cuda.blockIdx.y * BM)
        col0 = uint32(cuda.blockIdx.x * BN)
        M, K = A.shape
        N = B.shape[1]
        for m in range(TM):
            for n in range(TN):
                acc[m, n] = float32(0.0)
        fetch(A, B, a_next, b_next, row0, col0, 0, flat)
        publish(a_flat, b_flat, a_next, b_next, 0, flat)
        cuda.syncthreads()
        steps = (K + BK - 1) // BK
        for step in range(steps):
            buffer = uint32(step % 2)
            more = step + 1 < steps
            if more:  # the next tiles' loads are in flight during the multiply below
                fetch(A, B, a_next, b_next, row0, col0, uint32((step + 1) * BK), flat)
            a_buf, b_buf = uint32(buffer * A_SIZE + ty), uint32(buffer * B_SIZE + tx)
            for k in range(BK):
                a_k = uint32(a_buf + k * A_ROW)
                b_k = uint32(b_buf + k * BN)
                for m in range(TM):
                    a_reg[m] = a_flat[a_k + uint32(m * THREADS_Y)]
                for n in range(TN):
                    b_reg[n] = b_flat[b_k + uint32(n * THREADS_X)]
                for m in range(TM):
                    for n in range(TN):
                        acc[m, n] += a_reg[m] * b_reg[n]
            if more:
                publish(a_flat, b_flat, a_next, b_next, 1 - buffer, flat)
            cuda.syncthreads()  # the one barrier of the step
        for m in range(TM):
            for n in range(TN):
                i, j = row0 + ty + uint32(m * THREADS_Y), col0 + tx + uint32(n * THREADS_X)
                if i < M and j < N:
                    C[i, j] = acc[m, n]

    return gemm_v4


REGISTERS_PER_SM = 65536  # every NVIDIA GPU from Volta to Hopper (gpulib.bench.measure uses it too)


@lru_cache(maxsize=None)
def gemm_v5_kernel(BM: int = 128, BN: int = 128, BK: int = 8, TM: int = 8, TN: int = 8,
                   max_registers: int | None = None):
    """Version 5: version 4 with each thread's rows and columns in runs of four, so that the
    four values of a run come from shared memory in one 128-bit load instead of four 32-bit ones.

    Thread (tx, ty) owns the rows 4·ty + i + g·4·(BM/TM) and the columns 4·tx + i + g·4·(BN/TN)
    for i < 4 and g < TM/4 (TN/4): runs of four neighbours, the runs spread over the tile as in
    version 3. The shared tiles are declared 16-byte aligned and every run starts at a multiple
    of four floats, so the compiler may fuse the four loads of a run into one ``ld.shared.v4.f32``
    (LDS.128): per k step a thread issues (TM + TN)/4 shared loads instead of TM + TN, for TM·TN
    multiply-adds. Numba has no vector load of its own; the alignment and the constant offsets
    are what let the compiler prove the fusion safe (the benchmark counts the loads in the SASS).
    A block whose tiles lie wholly inside A and B (all but the edge blocks, when BK divides K)
    loads them without a bounds test per element. It multiplies a batch of products at once:
    A [batch, M, K], B [batch, K, N], C [batch, M, N], product z in the blocks with
    blockIdx.z = z (Winograd's 36 products in 16.5 are one launch); one product is a batch of one.
    TM and TN must be multiples of 4; launch with (BN // TN) × (BM // TM) threads per block.

    ``max_registers`` caps the registers per thread; None: the most that lets two blocks share
    an SM (128 for 256 threads; uncapped, the default tile took 135 and one block per SM ran
    slower than version 4 on the H200), 0: no cap.
    """
    if TM % 4 or TN % 4:
        raise ValueError(f"version 5 reads runs of 4 values: TM and TN must be multiples of 4, not TM={TM}, TN={TN}")
    _, publish = tile_movers(BM, BN, BK, TM, TN)  # the shared-memory side is version 4's
    THREADS_X, THREADS_Y = BN // TN, BM // TM
    THREADS = THREADS_X * THREADS_Y
    A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS
    A_ROW = BM + 4  # padding as in version 3; a multiple of 4, so every row stays 16-byte aligned
    A_SIZE, B_SIZE = BK * A_ROW, BK * BN
    A_BUFFERS, B_BUFFERS = 2 * A_SIZE, 2 * B_SIZE
    A_GAP, B_GAP = 4 * THREADS_Y, 4 * THREADS_X  # from one run of a thread to its next
    if max_registers is None:
        max_registers = min(255, REGISTERS_PER_SM // (2 * THREADS) // 8 * 8)

    @cuda.jit(device=True)
    def fetch(A, B, z, a_next, b_next, row0, col0, k0, flat):
        """This thread's share of product z's next A and B tiles, into registers (zero outside)."""
        M, K = A.shape[1], A.shape[2]
        N = B.shape[2]
        for i in range(A_LOADS):
            e = uint32(flat + i * THREADS)
            gi, gk = uint32(row0 + e // BK), uint32(k0 + e % BK)
            a_next[i] = A[z, gi, gk] if gi < M and gk < K else float32(0.0)
        for i in range(B_LOADS):
            e = uint32(flat + i * THREADS)
            gk, gj = uint32(k0 + e // BN), uint32(col0 + e % BN)
            b_next[i] = B[z, gk, gj] if gk < K and gj < N else float32(0.0)

    @cuda.jit(device=True)
    def fetch_inside(A, B, z, a_next, b_next, row0, col0, k0, flat):
        """``fetch`` for a block whose tiles lie wholly inside A and B: no bounds tests."""
        for i in range(A_LOADS):
            e = uint32(flat + i * THREADS)
            a_next[i] = A[z, uint32(row0 + e // BK), uint32(k0 + e % BK)]
        for i in range(B_LOADS):
            e = uint32(flat + i * THREADS)
            b_next[i] = B[z, uint32(k0 + e // BN), uint32(col0 + e % BN)]

    # the simulator has no registers to cap
    @cuda.jit(**({"max_registers": max_registers} if max_registers and on_gpu() else {}))
    def gemm_v5(A, B, C):
        a_flat = cuda.shared.array(A_BUFFERS, float32, alignment=16)  # two A tiles, transposed: [k, m]
        b_flat = cuda.shared.array(B_BUFFERS, float32, alignment=16)  # two B tiles: [k, n]
        acc = cuda.local.array((TM, TN), float32)
        a_reg = cuda.local.array(TM, float32)
        b_reg = cuda.local.array(TN, float32)
        a_next = cuda.local.array(A_LOADS, float32)
        b_next = cuda.local.array(B_LOADS, float32)
        tx, ty = uint32(cuda.threadIdx.x), uint32(cuda.threadIdx.y)
        flat = uint32(ty * THREADS_X + tx)
        row0 = uint32(cuda.blockIdx.y * BM)
        col0 = uint32(cuda.blockIdx.x * BN)
        z = uint32(cuda.blockIdx.z)  # which product of the batch
        M, K = A.shape[1], A.shape[2]
        N = B.shape[2]
        for m in range(TM):
            for n in range(TN):
                acc[m, n] = float32(0.0)
        fetch(A, B, z, a_next, b_next, row0, col0, 0, flat)
        publish(a_flat, b_flat, a_next, b_next, 0, flat)
        cuda.syncthreads()
        steps = (K + BK - 1) // BK
        inside = row0 + BM <= M and col0 + BN <= N and K % BK == 0  # the same for the whole block
        for step in range(steps):
            buffer = uint32(step % 2)
            more = step + 1 < steps
            if more and inside:
                fetch_inside(A, B, z, a_next, b_next, row0, col0, uint32((step + 1) * BK), flat)
            elif more:
                fetch(A, B, z, a_next, b_next, row0, col0, uint32((step + 1) * BK), flat)
            a_buf, b_buf = uint32(buffer * A_SIZE + 4 * ty), uint32(buffer * B_SIZE + 4 * tx)
            for k in range(BK):
                a_k = uint32(a_buf + k * A_ROW)  # a multiple of 4: the start of a 16-byte run
                b_k = uint32(b_buf + k * BN)
                for g in range(TM // 4):
                    for i in range(4):  # four neighbours: one 128-bit load
                        a_reg[4 * g + i] = a_flat[a_k + uint32(g * A_GAP + i)]
                for g in range(TN // 4):
                    for i in range(4):
                        b_reg[4 * g + i] = b_flat[b_k + uint32(g * B_GAP + i)]
                for m in range(TM):
                    for n in range(TN):
                        acc[m, n] += a_reg[m] * b_reg[n]
            if more:
                publish(a_flat, b_flat, a_next, b_next, 1 - buffer, flat)
            cuda.syncthreads()
        for m in range(TM):
            for n in range(TN):
                i = row0 + uint32(4 * ty + (m // 4) * A_GAP + m % 4)
                j = col0 + uint32(4 * tx + (n // 4) * B_GAP + n % 4)
                if i < M and j < N:
                    C[z, i, j] = acc[m, n]

    return gemm_v5


V6 = dict(BM=128, BN=128, BK=8, TM=8, TN=8)
V6_SIM = dict(BM=32, BN=64, BK=8, TM=8, TN=8)  # one warp: a 32×64 warp tile
LANE_COLUMNS = 8  # a warp's 32 lanes as 4 rows × 8 columns of threads


@lru_cache(maxsize=None)
def gemm_v6_kernel(BM: int = 128, BN: int = 128, BK: int = 8, TM: int = 8, TN: int = 8,
                   max_registers: int | None = None):
    """Version 6: version 5 with warp tiling. Each warp owns a WM×WN patch of the block tile
    (WM = 4·(TM/4)·4, WN = 4·(TN/4)·8: 32×64 for 8×8 per thread), its lanes laid out as 4 rows ×
    8 columns of threads, each lane with (TM/4)×(TN/4) runs of 4×4 outputs spaced 16 rows and 32
    columns apart inside the warp's patch.

    Why: in version 5 a warp is two rows of 16 threads, so its 128-bit loads of the B tile cover
    16 distinct runs of four floats (256 bytes) a k step; here a warp reads 8 runs of B (128
    bytes) and 4 of A, lanes that read the same run sharing it (a broadcast), and the rows and
    columns one warp touches stay in a 32x64 patch. Whether that saves shared-memory wavefronts
    on Hopper is for a profiler to say (Nsight Compute's shared wavefront counts); 16.4's
    benchmark measures the speed. The eight k steps of a BK tile are written out (CUTLASS's
    GEMM unrolls its warp-level k loop the same way): LLVM kept version 5's k loop rolled. The
    global loads, the two shared buffers and the barrier per BK step are version 5's. Launch
    with (BN // TN) × (BM // TM) threads per block, one or more whole warps, WM dividing BM and WN
    dividing BN. A, B, C are batches as in v5.
    """
    if TM % 4 or TN % 4:
        raise ValueError(f"version 6 reads runs of 4 values: TM and TN must be multiples of 4, not TM={TM}, TN={TN}")
    if BK % 8:
        raise ValueError(f"version 6 writes its k steps out eight at a time: BK must be a multiple of 8, not {BK}")
    LC = LANE_COLUMNS
    LR = 32 // LC
    WM, WN = (TM // 4) * 4 * LR, (TN // 4) * 4 * LC  # one warp's patch of the block tile
    if BM % WM or BN % WN:
        raise ValueError(f"version 6's warp tile is {WM}x{WN} for {TM}x{TN} per thread: it must divide the "
                         f"block tile, not BM={BM}, BN={BN}")
    WARPS_N = BN // WN
    _, publish = tile_movers(BM, BN, BK, TM, TN)
    THREADS_X = BN // TN
    THREADS = THREADS_X * (BM // TM)
    A_LOADS, B_LOADS = BM * BK // THREADS, BK * BN // THREADS
    A_ROW = BM + 4
    A_SIZE, B_SIZE = BK * A_ROW, BK * BN
    A_BUFFERS, B_BUFFERS = 2 * A_SIZE, 2 * B_SIZE
    A_GAP, B_GAP = 4 * LR, 4 * LC  # from one run of a lane to its next, inside the warp's patch
    if max_registers is None:
        max_registers = min(255, REGISTERS_PER_SM // (2 * THREADS) // 8 * 8)

    @cuda.jit(device=True)
    def fetch(A, B, z, a_next, b_next, row0, col0, k0, flat):
        M, K = A.shape[1], A.shape[2]
        N = B.shape[2]
        for i in range(A_LOADS):
            e = uint32(flat + i * THREADS)
            gi, gk = uint32(row0 + e // BK), uint32(k0 + e % BK)
            a_next[i] = A[z, gi, gk] if gi < M and gk < K else float32(0.0)
        for i in range(B_LOADS):
            e = uint32(flat + i * THREADS)
            gk, gj = uint32(k0 + e // BN), uint32(col0 + e % BN)
            b_next[i] = B[z, gk, gj] if gk < K and gj < N else float32(0.0)

    @cuda.jit(device=True)
    def fetch_inside(A, B, z, a_next, b_next, row0, col0, k0, flat):
        for i in range(A_LOADS):
            e = uint32(flat + i * THREADS)
            a_next[i] = A[z, uint32(row0 + e // BK), uint32(k0 + e % BK)]
        for i in range(B_LOADS):
            e = uint32(flat + i * THREADS)
            b_next[i] = B[z, uint32(k0 + e // BN), uint32(col0 + e % BN)]

    @cuda.jit(device=True, inline="always")
    def k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k):
        """One k of the tile: this lane's TM values of A's column k and TN of B's row k, in
        runs of four (128-bit shared loads), and their TM×TN products added to ``acc``."""
        a_k = uint32(a_buf + k * A_ROW)
        b_k = uint32(b_buf + k * BN)
        for g in range(TM // 4):
            for i in range(4):
                a_reg[4 * g + i] = a_flat[a_k + uint32(g * A_GAP + i)]
        for g in range(TN // 4):
            for i in range(4):
                b_reg[4 * g + i] = b_flat[b_k + uint32(g * B_GAP + i)]
        for m in range(TM):
            for n in range(TN):
                acc[m, n] += a_reg[m] * b_reg[n]

    @cuda.jit(**({"max_registers": max_registers} if max_registers and on_gpu() else {}))
    def gemm_v6(A, B, C):
        a_flat = cuda.shared.array(A_BUFFERS, float32, alignment=16)
        b_flat = cuda.shared.array(B_BUFFERS, float32, alignment=16)
        acc = cuda.local.array((TM, TN), float32)
        a_reg = cuda.local.array(TM, float32)
        b_reg = cuda.local.array(TN, float32)
        a_next = cuda.local.array(A_LOADS, float32)
        b_next = cuda.local.array(B_LOADS, float32)
        flat = uint32(cuda.threadIdx.y * THREADS_X + cuda.threadIdx.x)
        warp, lane = flat // uint32(32), flat % uint32(32)
        m0 = uint32((warp // WARPS_N) * WM + 4 * (lane // LC))  # this lane's first row in the block tile
        n0 = uint32((warp % WARPS_N) * WN + 4 * (lane % LC))  # and its first column
        row0 = uint32(cuda.blockIdx.y * BM)
        col0 = uint32(cuda.blockIdx.x * BN)
        z = uint32(cuda.blockIdx.z)
        M, K = A.shape[1], A.shape[2]
        N = B.shape[2]
        for m in range(TM):
            for n in range(TN):
                acc[m, n] = float32(0.0)
        fetch(A, B, z, a_next, b_next, row0, col0, 0, flat)
        publish(a_flat, b_flat, a_next, b_next, 0, flat)
        cuda.syncthreads()
        steps = (K + BK - 1) // BK
        inside = row0 + BM <= M and col0 + BN <= N and K % BK == 0
        for step in range(steps):
            buffer = uint32(step % 2)
            more = step + 1 < steps
            if more and inside:
                fetch_inside(A, B, z, a_next, b_next, row0, col0, uint32((step + 1) * BK), flat)
            elif more:
                fetch(A, B, z, a_next, b_next, row0, col0, uint32((step + 1) * BK), flat)
            a_buf, b_buf = uint32(buffer * A_SIZE + m0), uint32(buffer * B_SIZE + n0)
            for k in range(0, BK, 8):  # eight k steps written out: LLVM keeps a loop this long rolled
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k)
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k + 1)
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k + 2)
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k + 3)
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k + 4)
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k + 5)
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k + 6)
                k_step(a_flat, b_flat, acc, a_reg, b_reg, a_buf, b_buf, k + 7)
            if more:
                publish(a_flat, b_flat, a_next, b_next, 1 - buffer, flat)
            cuda.syncthreads()
        for m in range(TM):
            for n in range(TN):
                i = row0 + m0 + uint32((m // 4) * A_GAP + m % 4)
                j = col0 + n0 + uint32((n // 4) * B_GAP + n % 4)
                if i < M and j < N:
                    C[z, i, j] = acc[m, n]

    return gemm_v6


FACTORIES = {"v3": gemm_v3_kernel, "v4": gemm_v4_kernel, "v5": gemm_v5_kernel, "v6": gemm_v6_kernel}


def tiled_kernel(version: str, tile: dict):
    """The compiled-on-first-launch kernel of a register-blocked version ("v3" to "v6") for
    ``tile``: version 3 takes its PREFETCH key, version 4 ignores it (it always prefetches),
    versions 5 and 6 take REGISTERS as their cap; a cap for version 3 or 4 is refused."""
    if version not in FACTORIES:
        raise ValueError(f"version must be one of {tuple(FACTORIES)} (the register-blocked ones), not {version!r}")
    check_tile(tile, "shape")
    args = {k: tile[k] for k in TILE_KEYS}
    if "REGISTERS" in tile:
        if version in ("v3", "v4"):
            raise ValueError(f"shape['REGISTERS'] caps the registers of versions 5 and 6; version {version[1]} takes "
                             f"no cap, so shape must not have it (got {tile['REGISTERS']!r})")
        args["max_registers"] = tile["REGISTERS"]
    if version == "v3" and "PREFETCH" in tile:
        args["PREFETCH"] = tile["PREFETCH"]
    return FACTORIES[version](**args)
