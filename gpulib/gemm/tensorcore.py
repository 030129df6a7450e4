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
from numba import cuda

from gpulib.arrays import blocks, output, require, to_device, to_host
from gpulib.gemm.tc_wgmma import (  # noqa: F401  (the ladder's kernels, reached from here)
    GROUP_M,
    TMA_CONFIGS,
    TMA_KERNELS,
    V5_BM,
    V5_CONFIGS,
    V5_DEFAULT,
    V5_KERNELS,
    V5_THREADS,
    V6_BF16_KERNELS,
    V6_CONFIGS,
    V6_DEFAULT,
    V6_KERNELS,
    V7_BF16_KERNELS,
    V7_CONFIGS,
    V7_DEFAULT,
    V7_KERNELS,
    V7_THREADS,
    grouped_tile,
    make_tc_gemm_v5,
    make_tc_gemm_v6,
    make_tc_gemm_v7,
)
from gpulib.gemm.tc_wmma import (  # noqa: F401
    BM,
    BN,
    V2_THREADS,
    V3_BK,
    V3_BM,
    V3_BN,
    V3_THREADS,
    WARPS,
    tc_gemm_v1_kernel,
    tc_gemm_v2_kernel,
    tc_gemm_v3_kernel,
    tc_gemm_v4_kernel,
)
from gpulib.tensorcore import tma, wgmma
from gpulib.tensorcore.wmma import TILE

VERSIONS = ("v1", "v2", "v3", "v4")  # WMMA (warp-level), B given as [K, N]
WGMMA_VERSIONS = ("v5", "v6", "v7")  # warpgroup MMA, B given as Bᵀ [N, K]


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
