"""16.3-16.5: convolution kernels, one module per algorithm, and what chooses among them.

    shapes.py          the shape rules all of them share: output size, input checks, the bias
    direct.py          16.3, the direct convolution: version 1 (one thread per output) and
                       version 2 (shared-memory tiles, several output channels per block)
    im2col.py          16.4, convolution as GEMM: im2col / col2im, im2col + GEMM, backward
    implicit_gemm.py   16.4, the GEMM without X_col (on-the-fly and precomputed indices)
    winograd.py        16.5, Winograd F(2x2, 3x3), fused and non-fused
    fft.py             16.5, FFT convolution (FFTs from CuPy / NumPy, spectral product in Numba)
    algorithms.py      16.4-16.5, the one registry of algorithms: ``ALGORITHMS[name]`` with its
                       cuDNN name, ``run``, ``supports``, ``workspace`` and ``multiplications``;
                       ``conv2d(X, W, b, padding, stride, algorithm=name)`` runs any of them
    autotune.py        16.5, check, time and rank every algorithm for a layer; cached choice

Every convolution takes ``(X, W, b=None, padding=0, stride=1, *, out=None, ...)`` with X [N, C,
H, W], W [K, C, R, S], b [K], and returns Y [N, K, H', W'] on the device. The tensor-core
convolution is in gpulib/conv/tensorcore.py; measuring is in gpulib/bench/, drawing in
gpulib/figures/. This package imports nothing at its own import: import the module you need.
"""
