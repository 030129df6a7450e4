"""16.6: the kernels that probe the GPU's own limits (roofline.py's measured roofs): an FMA loop for
the fp32 pipes, a copy for HBM, a fill for writes alone. Kernels only: gpulib/bench/book_model.py
times them."""

from __future__ import annotations

import numpy as np
from numba import cuda


@cuda.jit
def fma_kernel(out, iterations):
    """Eight independent FMA chains per thread: the fp32 pipes never wait on a result."""
    i = cuda.grid(1)
    x = np.float32(i) * np.float32(1e-9)  # eight different chains, so none can be merged with another
    a0, a1, a2, a3 = x, x + np.float32(1), x + np.float32(2), x + np.float32(3)
    a4, a5, a6, a7 = x + np.float32(4), x + np.float32(5), x + np.float32(6), x + np.float32(7)
    m, c = np.float32(0.999999), np.float32(1e-7)
    for _ in range(iterations):  # cuda.fma: one fused multiply-add instruction, 2 FLOP
        a0 = cuda.fma(a0, m, c)
        a1 = cuda.fma(a1, m, c)
        a2 = cuda.fma(a2, m, c)
        a3 = cuda.fma(a3, m, c)
        a4 = cuda.fma(a4, m, c)
        a5 = cuda.fma(a5, m, c)
        a6 = cuda.fma(a6, m, c)
        a7 = cuda.fma(a7, m, c)
    out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7


@cuda.jit
def copy_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = src[i]


@cuda.jit
def fill_kernel(a, value):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = value
