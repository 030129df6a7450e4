"""16.3 (and later 16.4/16.5): convolution kernels.

    direct.py   the direct convolution, versions 1 (one thread per output) to 3 (shared tiles,
                several output channels per thread)
"""

from gpulib.conv.direct import VERSIONS, conv2d

__all__ = ["VERSIONS", "conv2d"]
