"""16.5: GEMM on the tensor cores, C [M, N] fp32 = A [M, K] · B with fp16 (or bf16) operands: the
ladder's one launcher, and ``matmul_tc`` for any sizes.

    launch(A, Bt, C, version="v6")      # device operands A [M, K], Bᵀ [N, K], every version
    C = matmul_tc(A, B, version="v2")   # NumPy or device A [M, K], B [K, N], padded as needed

Versions 1-4 are warp-level WMMA kernels (gemm/tc_wmma.py: from global memory, then block tiles
staged in shared memory, 16-byte copies, asynchronous copies); versions 5-9 use Hopper's
warpgroup MMA (gemm/tc_wgmma.py: a cp.async ring, TMA and mbarriers, a producer warpgroup, a
persistent kernel whose results leave through TMA stores, and that kernel with a producer
warpgroup). The persistent versions 8 and 9 also write C in the operands' 16-bit type (as cuBLAS
does for fp16 operands) when C is given so.
16.5's notebook says what each rung changes and what it buys. What must stay true: every
version takes the same operands, and every precondition is a ValueError before any launch
(``check_launch``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpulib.arrays import blocks, is_device_array, output, require, require_real, to_device, to_host
from gpulib.env import on_gpu
from gpulib.gemm.tc_wgmma import (  # noqa: F401  (the ladder's kernels and configs, reached from here)
    CONFIGS,
    KERNELS,
    OUT_ROWS,
    OUTPUTS,
    SIMULATED_SMS,
    V5_BM,
    V5_CONFIGS,
    V5_DEFAULT,
    V5_KERNELS,
    V5_THREADS,
    V6_CONFIGS,
    V6_DEFAULT,
    V6_KERNELS,
    V7_CONFIGS,
    V7_DEFAULT,
    V7_KERNELS,
    V7_THREADS,
    V8_CONFIGS,
    V8_DEFAULT,
    V8_KERNELS,
    V9_CONFIGS,
    V9_DEFAULT,
    V9_KERNELS,
    V9_THREADS,
    grouped_tile,
    make_tc_gemm_v5,
    make_tc_gemm_v6,
    make_tc_gemm_v7,
    make_tc_gemm_v8,
    make_tc_gemm_v9,
    tile_origin,
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
WGMMA_VERSIONS = ("v5", "v6", "v7", "v8", "v9")  # warpgroup MMA, B given as Bᵀ [N, K]


OPERANDS = {"fp16": np.float16, "bf16": np.uint16}  # bf16 operands as uint16 arrays of bf16 words
PERSISTENT = {"v8": V8_KERNELS, "v9": V9_KERNELS}  # the persistent versions: C in fp32 or the operands' type


def _require_operand(X, name: str, dtype, layout: str) -> None:
    if not is_device_array(X):
        raise ValueError(f"{name} {layout} must be a device array (matmul_tc takes NumPy arrays), not {type(X).__name__}")
    require(X, name, 2, dtype=dtype, layout=layout)  # 2-D, dtype, C-contiguous, not empty


def check_launch(A, Bt, C, *, version: str, config: str | None = None, operands: str = "fp16") -> str | None:
    """Everything ``launch`` requires, checked before anything is launched or compiled: ValueError
    naming the argument; returns the config that will run (None for versions 1-4)."""
    if version not in VERSIONS + WGMMA_VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS + WGMMA_VERSIONS}, not {version!r}")
    if operands not in OPERANDS:
        raise ValueError(f"operands must be one of {tuple(OPERANDS)}, not {operands!r}")
    if operands == "bf16" and version in VERSIONS:
        raise ValueError(f"operands='bf16' needs a wgmma version {WGMMA_VERSIONS}; the WMMA versions {VERSIONS} "
                         "multiply fp16 only")
    _require_operand(A, "A", OPERANDS[operands], "[M, K]")
    _require_operand(Bt, "Bt", OPERANDS[operands], "[N, K]")
    persistent = version in PERSISTENT
    sixteen = persistent and is_device_array(C) and np.dtype(C.dtype) == OPERANDS[operands]
    if persistent and not sixteen and is_device_array(C) and np.dtype(C.dtype) != np.float32:
        raise ValueError(f"C [M, N] must have dtype float32 or, for {version}, the operands' "
                         f"{np.dtype(OPERANDS[operands]).name}, "
                         f"not {np.dtype(C.dtype).name}")
    _require_operand(C, "C", OPERANDS[operands] if sixteen else np.float32, "[M, N]")
    (M, K), N = A.shape, Bt.shape[0]
    if Bt.shape[1] != K:
        raise ValueError(f"A [M, K] and Bt [N, K] need the same K; got A {tuple(A.shape)} and Bt {tuple(Bt.shape)}")
    if tuple(C.shape) != (M, N):
        raise ValueError(f"C must be [M, N] = {(M, N)} (A's rows, Bt's rows), not {tuple(C.shape)}")
    if version in VERSIONS:
        if M % TILE or N % TILE or K % TILE:
            raise ValueError(f"version {version} (WMMA) needs M, N and K multiples of {TILE} (whole 16x16x16 tiles); "
                             f"got M={M}, N={N}, K={K} (matmul_tc pads any size)")
        if config is not None:
            raise ValueError(f"version {version} has no configs; config must be None, not {config!r}")
        return None
    if K % 8:
        raise ValueError(f"version {version} needs K a multiple of 8 (every copy moves 16 bytes); got K={K}")
    configs, default, _ = CONFIGS[version]
    config = default if config is None else config
    if config not in configs:
        raise ValueError(f"config must be one of {tuple(configs)} for {version}, not {config!r}")
    if sixteen:
        if N % 8:
            raise ValueError(f"a 16-bit C needs N a multiple of 8 (the copy engine writes 16-byte rows); got N={N}")
        staged = PERSISTENT[version][operands, "16-bit"]
        if config not in staged:
            raise ValueError(f"config must be one of {tuple(staged)} for {version} with a 16-bit C "
                             f"(the others leave no shared memory to stage it), not {config!r}")
    reason = wgmma.unsupported_device()
    if reason:
        raise ValueError(f"version {version}: {reason}")
    return config


_B_ROWS: dict = {}  # versions 1-4: B [K, N] transposed from Bt, one buffer per shape


@cuda.jit
def transpose16_kernel(Bt, B):
    """B[k, n] = Bt[n, k] (fp16), one thread per element."""
    n, k = cuda.grid(2)
    if n < Bt.shape[0] and k < Bt.shape[1]:
        B[k, n] = Bt[n, k]


def launch(A, Bt, C, *, version: str, config: str | None = None, operands: str = "fp16") -> None:
    """C [M, N] (fp32) = A [M, K] · Btᵀ by any version of the ladder, all on the same device operands:
    A [M, K] and Bt = Bᵀ [N, K], C-contiguous fp16 (bf16 words as uint16 with ``operands="bf16"``,
    versions 5-9), C [M, N] float32 (v8, v9: or the operands' dtype, N a multiple of 8). Versions 1-4
    need M, N, K multiples of 16 and read B as [K, N]: Bt is transposed on the device first (into
    a buffer kept per shape); versions 5-9 need K a multiple of 8 and, on a GPU, compute
    capability 9.0; ``config`` picks their tile (None: the version's default). Every
    precondition is checked before any launch (``check_launch``)."""
    config = check_launch(A, Bt, C, version=version, config=config, operands=operands)
    (M, K), N = A.shape, Bt.shape[0]
    if version in VERSIONS:
        B = _B_ROWS.get((K, N))
        if B is None:
            B = _B_ROWS[K, N] = cuda.device_array((K, N), np.float16)
        transpose16_kernel[(blocks(N, 16), blocks(K, 16)), (16, 16)](Bt, B)
        _launch_wmma(version, A, B, C)
        return
    bn = CONFIGS[version][0][config][0]
    grid = blocks(N, bn) * blocks(M, V5_BM)
    if version in PERSISTENT:
        out = "fp32" if np.dtype(C.dtype) == np.float32 else "16-bit"
        kernel, shared = PERSISTENT[version][operands, out][config]
        a_map, b_map = (tma.cached_map(X, (rows, tma.BOX_K)).argument for X, rows in ((A, V5_BM), (Bt, bn)))
        out_rows = V5_BM if version == "v8" else OUT_ROWS  # v9: each multiplying warpgroup writes its own rows
        c_map = tma.cached_map(C, (out_rows, tma.BOX_K)).argument if out == "16-bit" else a_map
        wgmma.launch(kernel, min(grid, resident_blocks()), CONFIGS[version][2], shared, a_map, b_map, c_map, C, K)
        return
    kernel, shared = KERNELS[version, operands][config]
    if version == "v5":
        wgmma.launch(kernel, grid, V5_THREADS, shared, A, Bt, C)
    else:
        a_map, b_map = (tma.cached_map(X, (rows, tma.BOX_K)).argument for X, rows in ((A, V5_BM), (Bt, bn)))
        wgmma.launch(kernel, grid, CONFIGS[version][2], shared, a_map, b_map, C, K)


def resident_blocks() -> int:
    """v8's grid: one block per SM of this GPU (each holds a whole SM's shared memory); on the
    simulator, tc_wgmma.SIMULATED_SMS, so that each block works through several tiles."""
    if not on_gpu():
        return SIMULATED_SMS
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def _padded(a: np.ndarray, rows_multiple: int = TILE, cols_multiple: int = TILE) -> np.ndarray:
    rows, cols = blocks(a.shape[0], rows_multiple) * rows_multiple, blocks(a.shape[1], cols_multiple) * cols_multiple
    out = np.zeros((rows, cols), a.dtype)
    out[:a.shape[0], :a.shape[1]] = a
    return out


def _launch_wmma(version: str, A16, B16, C) -> None:
    """Versions 1-4 on A [M, K] and B [K, N] as their kernels read them (sizes multiples of 16)."""
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
    A16 = np.asarray(to_host(A), np.float16)
    Bt16 = np.ascontiguousarray(np.asarray(to_host(B), np.float16).T)
    if version in WGMMA_VERSIONS:  # zero columns of K up to whole 16-byte chunks; C's edges are written
        launch(to_device(_padded(A16, 1, 8)), to_device(_padded(Bt16, 1, 8)), C, version=version)
        return C
    A16, Bt16 = _padded(A16), _padded(Bt16)  # whole 16x16 tiles, then C cropped back
    C16 = cuda.device_array((A16.shape[0], Bt16.shape[0]), np.float32)
    launch(to_device(A16), to_device(Bt16), C16, version=version)
    crop_kernel[(blocks(N, 16), blocks(M, 16)), (16, 16)](C16, C)
    return C


def reference(A, B) -> np.ndarray:
    """What the tensor cores compute, in float64: the fp16-rounded operands multiplied exactly."""
    A, B = require_real(A, "A", "[M, K]"), require_real(B, "B", "[K, N]")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"inner dimensions do not match: A is {A.shape} and B is {B.shape}")
    return A.astype(np.float16).astype(np.float64) @ B.astype(np.float16).astype(np.float64)
