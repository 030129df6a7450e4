"""16.4: why the chapter calls cublasSgemm with its operands "swapped".

cuBLAS follows Fortran BLAS: a matrix is column-major, element (i, j) of an m×n matrix with
leading dimension ld sits at offset i + j·ld. Our arrays are row-major. The same buffer read
the other way round is the transpose, so a row-major X_col [C·R·S, N·H'·W'] handed to cuBLAS
is, to cuBLAS, the column-major matrix X_colᵀ [N·H'·W', C·R·S].

The chapter's call ``cublasSgemm(N, N, m=H'·W', n=K, k=C·R·S, X_col, lda=H'·W', W_mat,
ldb=C·R·S, Y_mat, ldc=H'·W')`` therefore computes, in cuBLAS's column-major view,
Y_matᵀ = X_colᵀ · W_matᵀ, and Y_matᵀ stored column-major is exactly Y_mat = W_mat · X_col
row-major: no transpose is ever materialised. ``sgemm`` below is a NumPy stand-in with
cuBLAS's argument list and memory semantics, so the call can be run and checked anywhere.
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import require_int


def _column_major(buffer: np.ndarray, rows: int, cols: int, ld: int, names=("A", "lda")) -> np.ndarray:
    """The rows×cols column-major matrix with leading dimension ``ld`` inside a flat buffer."""
    if ld < max(1, rows):
        raise ValueError(f"{names[1]}: leading dimension {ld} is smaller than the {rows} rows")
    if buffer.size < ld * (cols - 1) + rows:
        raise ValueError(f"{names[0]}: a buffer of {buffer.size} elements cannot hold a {rows}x{cols} matrix "
                         f"with {names[1]}={ld}")
    return np.lib.stride_tricks.as_strided(buffer, shape=(rows, cols),
                                           strides=(buffer.itemsize, ld * buffer.itemsize))


def sgemm(transa: str, transb: str, m: int, n: int, k: int, alpha: float, A, lda: int, B, ldb: int,
          beta: float, C, ldc: int) -> None:
    """C ← α·op(A)·op(B) + β·C on flat float32 buffers, column-major, like cublasSgemm.

    op(A) is m×k, op(B) is k×n, C is m×n; "N" leaves a matrix as it is, "T" transposes it.
    """
    for name, op in (("transa", transa), ("transb", transb)):
        if op not in ("N", "T"):
            raise ValueError(f"{name} must be 'N' (as stored) or 'T' (transposed), not {op!r}")
    for name, buf in (("A", A), ("B", B), ("C", C)):
        if not isinstance(buf, np.ndarray) or buf.ndim != 1 or buf.dtype != np.float32 or not buf.flags.c_contiguous:
            raise ValueError(f"{name} must be a flat, contiguous float32 NumPy buffer (use .ravel()), not "
                             f"{type(buf).__name__} {getattr(buf, 'dtype', '')} {getattr(buf, 'shape', '')}")
    m, n, k = require_int(m, "m", 1), require_int(n, "n", 1), require_int(k, "k", 1)
    lda, ldb, ldc = require_int(lda, "lda", 1), require_int(ldb, "ldb", 1), require_int(ldc, "ldc", 1)
    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not np.isfinite(value):
            raise ValueError(f"{name} must be a finite real number, not {value!r}")
    opA = _column_major(A, m, k, lda) if transa == "N" else _column_major(A, k, m, lda).T
    opB = _column_major(B, k, n, ldb, ("B", "ldb")) if transb == "N" else _column_major(B, n, k, ldb, ("B", "ldb")).T
    out = _column_major(C, m, n, ldc, ("C", "ldc"))
    result = alpha * (opA.astype(np.float64) @ opB) + (beta * out if beta else 0.0)
    out[...] = result.astype(np.float32)


def conv_gemm_the_chapters_way(X_col: np.ndarray, W_mat: np.ndarray) -> np.ndarray:
    """Y_mat [K, N·H'·W'] (row-major) from the chapter's cublasSgemm argument order."""
    from gpulib.arrays import require

    require(X_col, "X_col", 2, layout="[C·R·S, N·H'·W']")
    require(W_mat, "W_mat", 2, layout="[K, C·R·S]")
    CRS, NP = X_col.shape
    K = W_mat.shape[0]
    if W_mat.shape[1] != CRS:
        raise ValueError(f"inner dimensions do not match: W_mat is {W_mat.shape} and X_col is {X_col.shape} "
                         f"(W_mat's columns and X_col's rows are both C·R·S)")
    Y_mat = np.zeros((K, NP), np.float32)
    sgemm("N", "N", NP, K, CRS, 1.0, np.ascontiguousarray(X_col).ravel(), NP,
          np.ascontiguousarray(W_mat).ravel(), CRS, 0.0, Y_mat.ravel(), NP)
    return Y_mat
