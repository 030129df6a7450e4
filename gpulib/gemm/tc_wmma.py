"""16.5: the tensor-core GEMM ladder HGEMM's WMMA versions 1-4 (warp-level 16x16x16 fragments), C = A·B
with A [M, K] and B [K, N] in fp16 (sizes multiples of 16), C in fp32. Kernels only: the launcher and
what each version does are in gpulib/gemm/tensorcore.py."""

from __future__ import annotations

from numba import cuda, float32, types

from gpulib.tensorcore import wmma
from gpulib.tensorcore.wmma import AB_DTYPE, AB_FRAGMENT, ACC_FRAGMENT, SHARED_ALIGN, TILE, warp_mma, warp_store

float16 = types.float16

WARPS = 4  # version 1: warps per block, stacked along the rows of C


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
