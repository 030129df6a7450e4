"""16.4: GEMM, C = A·B, three ways behind one interface (``matmul``):

    kernels.py  the book's own Numba kernels: v1 naive, v2 shared tiles, v3 register-blocked,
                v4 double-buffered shared tiles and unsigned offsets, v5 128-bit shared loads
                and batches of products
    api.py      ``matmul(A, B, version=...)``: "v1" to "v5", or "library" = cuBLAS
                through CuPy on a GPU (zero-copy from Numba device arrays), NumPy without one
"""

from gpulib.gemm.api import VERSIONS, library_name, matmul

__all__ = ["VERSIONS", "library_name", "matmul"]
