"""16.4-16.5: GEMM, C = A·B: the book's Numba ladder behind ``matmul`` (v1-v5 or "library" =
cuBLAS through CuPy), and the tensor-core ladder of 16.5 (tensorcore.py).
"""

from gpulib.gemm.api import VERSIONS, library_name, matmul

__all__ = ["VERSIONS", "library_name", "matmul"]
