"""16.3-16.5: convolution kernels.

    direct.py   16.3, the direct convolution: version 1 (one thread per output) and version 2
                (shared-memory tiles, several output channels per block)
    im2col.py          16.4, convolution as GEMM: im2col / col2im, im2col + GEMM, backward
    implicit_gemm.py   16.4, the GEMM without X_col (on-the-fly and precomputed indices)
    winograd.py        16.5, Winograd F(2x2, 3x3), fused and non-fused
    fft.py             16.5, FFT convolution (FFTs from CuPy / NumPy, spectral product in Numba)
    autotune.py        16.5, check, time and rank every algorithm for a layer; cached choice
    cudnn_engines.py   16.5, cuDNN's own plans for a layer (cuDNN frontend, when installed)
    algorithm_figure.py  16.5, the six algorithms drawn, with their multiplications and memory
    bench.py    16.3 speed against cuDNN;  widget.py  16.3 tiling explorer
    gemm_bench.py      16.4 speed and memory;  im2col_widget.py  16.4 figure 16.2
"""

from gpulib.conv.direct import VERSIONS, conv2d

__all__ = ["VERSIONS", "conv2d"]
