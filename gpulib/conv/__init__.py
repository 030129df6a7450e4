"""16.3 (and later 16.4/16.5): convolution kernels.

    direct.py   the direct convolution: version 1 (one thread per output) and version 2
                (shared-memory tiles, several output channels per block)
"""

from gpulib.conv.direct import VERSIONS, conv2d

__all__ = ["VERSIONS", "conv2d"]
