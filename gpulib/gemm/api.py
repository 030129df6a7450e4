"""16.4: ``matmul``, one interface over the book's GEMM kernels and the library GEMM."""

from __future__ import annotations

import numpy as np

from gpulib import launch
from gpulib.arrays import (
    batch_of_one,
    blocks,
    is_device_array,
    output,
    require,
    require_bool,
    require_int,
    to_device,
    to_host,
    transposed,
)
from gpulib.env import on_gpu, sized
from gpulib.gemm import kernels

VERSIONS = ("v1", "v2", "v3", "v4", "v5", "v6", "auto", "library")


def library_name() -> str:
    """What version="library" runs here: cuBLAS (CuPy) on a GPU, NumPy's BLAS otherwise."""
    if on_gpu():
        try:
            import cupy  # noqa: F401
        except ImportError:
            return "numpy (CuPy is not installed)"
        return "cublas"
    return "numpy"


def check_operands(A, B, C, batched: bool = False) -> None:
    """Device float32 A [M, K], B [K, N] and C [M, N] (each a batch [batch, ...] with ``batched``), of
    agreeing sizes; A and B may be transposed views (unit stride along one axis), C is C-contiguous.
    ValueError naming the operand, before any launch."""
    ndim = 3 if batched else 2
    lead = "batch, " if batched else ""
    for name, X, layout in (("C", C, f"[{lead}M, N]"), ("A", A, f"[{lead}M, K]"), ("B", B, f"[{lead}K, N]")):
        if not is_device_array(X):
            raise ValueError(f"{name} {layout} must be a device array (matmul takes NumPy arrays), not {type(X).__name__}")
        if X is not C and len(X.shape) != ndim:
            raise ValueError(f"{name} {layout} must be {ndim}-D like C, but has shape {tuple(X.shape)}")
        require(X, name, ndim, layout=layout, contiguous=X is C)  # float32, not empty; C also C-contiguous
        strides = tuple(X.strides)
        if X is not C and 4 not in strides[-2:]:  # a float32 element apart along rows or columns
            raise ValueError(f"{name} {layout} must have unit stride along one of its last two axes (C-order "
                             f"or a transposed view), not strides {strides}")
    a, b, c = tuple(A.shape), tuple(B.shape), tuple(C.shape)  # (the simulator's shapes refuse negative indices)
    if a[-1] != b[-2]:
        raise ValueError(f"A {a} and B {b}: A's columns (K) must equal B's rows")
    if batched and not a[0] == b[0] == c[0]:
        raise ValueError(f"A, B and C must hold the same batch, not {a[0]}, {b[0]} and {c[0]}")
    if c != a[:-1] + b[-1:]:
        raise ValueError(f"C must have shape {a[:-1] + b[-1:]} (A's rows, B's columns), not {c}")


def library_matmul(A, B, C):
    """C = A·B by the library: cuBLAS through CuPy on a GPU, NumPy without one; the watchers of
    gpulib.launch (16.6's profiler and recorder) see it as one launch."""
    check_operands(A, B, C)
    name = "cuBLAS sgemm" if library_name() == "cublas" else "numpy matmul"
    return launch.library_call(name, A.shape[0] * B.shape[1], (A, B, C), _library_matmul)


def _library_matmul(A, B, C):
    if library_name() == "cublas":
        import cupy

        # zero-copy views of the Numba device arrays through __cuda_array_interface__;
        # cuBLAS is column-major, CuPy passes the operands so that the row-major product comes out
        cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=cupy.asarray(C))
    else:
        C.copy_to_device(np.matmul(to_host(A), to_host(B)).astype(np.float32))
    return C


def v3_shape(rows: int | None = None) -> dict:
    """Version 3's tile shape here: 128×128 blocks on a GPU (64×64 for a C of at most 64 rows,
    such as a conv layer's W_mat·X_col with K ≤ 64, where a 128-row tile leaves half its
    threads idle: 0.62 ms instead of 0.40 on the H200 for the 16.3 layer), 16×16 on the simulator."""
    if rows is not None:
        require_int(rows, "rows", 1)
    gpu = kernels.V3_SMALL if rows is not None and rows <= kernels.V3_SMALL["BM"] else kernels.V3
    return sized(gpu=gpu, sim=kernels.V3_SIM)


def _launch_tiled(version: str, A, B, C, shape: dict) -> None:
    """Launch a register-blocked version (3 to 6) for the tile ``shape``: (BN/TN) × (BM/TM)
    threads per block, one block per BM×BN tile of C (and per product of a batch, when C is 3-D)."""
    kernel = kernels.tiled_kernel(version, shape)
    threads = kernels.block_threads(shape)
    rows, cols = tuple(C.shape)[-2:]  # (the simulator's shapes refuse negative indices)
    grid = (blocks(cols, shape["BN"]), blocks(rows, shape["BM"]))
    if len(C.shape) == 3:  # a batch of products along blockIdx.z
        grid += (C.shape[0],)
    kernel[grid, threads](A, B, C)


def launch_v3(A, B, C, shape: dict | None = None):
    """Launch version 3 with a tile ``shape`` (dict of BM, BN, BK, TM, TN); by default the one
    ``v3_shape`` picks for C's rows."""
    check_operands(A, B, C)
    shape = kernels.check_tile(shape, "shape") if shape is not None else v3_shape(C.shape[0])
    _launch_tiled("v3", A, B, C, shape)


def launch_v4(A, B, C, shape: dict | None = None):
    """Launch version 4 with a tile ``shape`` (dict of BM, BN, BK, TM, TN; default ``kernels.V4``,
    16×16 on the simulator). Version 4 always prefetches, so a PREFETCH key is ignored."""
    check_operands(A, B, C)
    shape = kernels.check_tile(shape, "shape") if shape is not None else sized(gpu=kernels.V4, sim=kernels.V4_SIM)
    _launch_tiled("v4", A, B, C, shape)


def launch_v5(A, B, C, shape: dict | None = None):
    """Launch version 5 with a tile ``shape`` (as ``launch_v4``; TM and TN multiples of 4;
    default ``kernels.V5``, 16×16 with 4×4 per thread on the simulator). A, B and C are 2-D
    (one product) or 3-D (a batch: A [batch, M, K], B [batch, K, N], C [batch, M, N])."""
    check_operands(A, B, C, batched=len(getattr(C, "shape", ())) == 3)
    shape = kernels.check_tile(shape, "shape") if shape is not None else sized(gpu=kernels.V5, sim=kernels.V5_SIM)
    if len(C.shape) == 2:
        A, B, C = batch_of_one(A), batch_of_one(B), batch_of_one(C)
    _launch_tiled("v5", A, B, C, shape)


def launch_v6(A, B, C, shape: dict | None = None):
    """Launch version 6 with a tile ``shape`` (as ``launch_v5``; BK a multiple of 8 and the warp
    tile dividing the block tile; default ``kernels.V6``, ``kernels.V6_SIM`` on the simulator).
    A, B and C are 2-D or 3-D as for ``launch_v5``."""
    check_operands(A, B, C, batched=len(getattr(C, "shape", ())) == 3)
    shape = kernels.check_tile(shape, "shape") if shape is not None else sized(gpu=kernels.V6, sim=kernels.V6_SIM)
    if len(C.shape) == 2:
        A, B, C = batch_of_one(A), batch_of_one(B), batch_of_one(C)
    _launch_tiled("v6", A, B, C, shape)


def matmul(A, B, *, version: str = "v3", out=None, trans_a: bool = False, trans_b: bool = False,
           shape: dict | None = None):
    """C = op(A)·op(B) for float32 matrices; returns C [M, N] on the device.

    ``version`` is one of the book's kernels ("v1" to "v6"), "auto" (the version and tile
    gpulib.gemm.autotune measured fastest for this shape, tuned at its first call) or "library"
    (cuBLAS through CuPy on a GPU, NumPy without one). op(A) is A [M, K], or Aᵀ when ``trans_a`` (then A is
    stored as [K, M]); the same for B. Transposes are views, never copies. ``shape`` sets
    version 3's to 6's tile (see ``launch_v3`` to ``launch_v6``).
    """
    if version not in VERSIONS:
        raise ValueError(f"unknown version {version!r}; choose one of {VERSIONS}")
    trans_a, trans_b = require_bool(trans_a, "trans_a"), require_bool(trans_b, "trans_b")
    if shape is not None:
        kernels.check_tile(shape, "shape")
        if version == "auto":
            raise ValueError("shape: version='auto' chooses the tile itself; pass a version from v3 to v6 to set one")
    require(A, "A", 2, layout="[K, M] (trans_a)" if trans_a else "[M, K]")
    require(B, "B", 2, layout="[N, K] (trans_b)" if trans_b else "[K, N]")
    A, B = to_device(A), to_device(B)
    if trans_a:
        A = transposed(A)
    if trans_b:
        B = transposed(B)
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"inner dimensions do not match: A is {tuple(A.shape)} and B is {tuple(B.shape)}; "
            f"A's columns ({A.shape[1]}) must equal B's rows ({B.shape[0]})"
        )
    M, N = A.shape[0], B.shape[1]
    C = output(out, (M, N), "out")
    if version == "library":
        return library_matmul(A, B, C)
    if version == "v1":
        kernels.gemm_v1_kernel[(blocks(N, 16), blocks(M, 16)), (16, 16)](A, B, C)
    elif version == "v2":
        T = kernels.TILE
        kernels.gemm_v2_kernel[(blocks(N, T), blocks(M, T)), (T, T)](A, B, C)
    elif version == "v3":
        launch_v3(A, B, C, shape)
    elif version == "v4":
        launch_v4(A, B, C, shape)
    elif version == "v5":
        launch_v5(A, B, C, shape)
    elif version == "v6":
        launch_v6(A, B, C, shape)
    else:
        from gpulib.gemm import autotune  # (autotune launches through this module)

        autotune.launch_chosen(A, B, C)
    return C
