"""``matmul``: one interface over the book's GEMM kernels and the library GEMM."""

from __future__ import annotations

import numpy as np

import gpulib
from gpulib.arrays import blocks, output, require, to_device
from gpulib.gemm import kernels as K

METHODS = ("v1", "v2", "v3", "library")


def library_name() -> str:
    """What method="library" runs here: cuBLAS (CuPy) on a GPU, NumPy's BLAS otherwise."""
    if gpulib.on_gpu():
        try:
            import cupy  # noqa: F401
        except ImportError:
            return "numpy (CuPy is not installed)"
        return "cublas"
    return "numpy"


def _library(A, B, C):
    if library_name() == "cublas":
        import cupy

        # zero-copy views of the Numba device arrays through __cuda_array_interface__;
        # cuBLAS is column-major, CuPy passes the operands so that the row-major product comes out
        cupy.matmul(cupy.asarray(A), cupy.asarray(B), out=cupy.asarray(C))
    else:
        host = lambda a: a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)  # noqa: E731
        C.copy_to_device(np.matmul(host(A), host(B)).astype(np.float32))
    return C


def matmul(A, B, method: str = "v3", out=None):
    """C = A·B for float32 A [M, K] and B [K, N]; returns C [M, N] on the device."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    require(A, "A", 2, layout="[M, K]")
    require(B, "B", 2, layout="[K, N]")
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"inner dimensions do not match: A is {tuple(A.shape)} and B is {tuple(B.shape)}; "
            f"A's columns ({A.shape[1]}) must equal B's rows ({B.shape[0]})"
        )
    M, N = A.shape[0], B.shape[1]
    C = output(out, (M, N), "out")
    A, B = to_device(A), to_device(B)
    if method == "library":
        return _library(A, B, C)
    if method == "v1":
        K.gemm_v1_kernel[(blocks(N, 16), blocks(M, 16)), (16, 16)](A, B, C)
    elif method == "v2":
        K.gemm_v2_kernel[(blocks(N, K.TILE), blocks(M, K.TILE)), (K.TILE, K.TILE)](A, B, C)
    else:
        shape = K.V3
        threads = (shape["BN"] // shape["TN"], shape["BM"] // shape["TM"])
        K.gemm_v3_kernel(**shape)[(blocks(N, shape["BN"]), blocks(M, shape["BM"])), threads](A, B, C)
    return C
