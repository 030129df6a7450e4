"""16.3-16.4 in CUDA C, for courses taught in it: the direct convolution and im2col as .cu
files of the book's own writing (gpulib/conv/cuda_c_src/), compiled at run time by CuPy's
RawModule (NVRTC) on a GPU and checked against the Numba kernels.

    source(name)                          the text of cuda_c_src/<name>.cu ("direct_conv", "im2col")
    show(name)                            print it (the simulator cannot run CUDA C: it is shown there)
    conv2d_direct_c(X, W, b, padding, stride, out=None)
    im2col_c(X, R, S, padding, stride, out=None, fixed_sizes=False)

Arrays may be Numba device arrays or NumPy arrays; CuPy reads Numba's device memory in place
through ``__cuda_array_interface__``. Without a GPU and CuPy the launchers raise RuntimeError.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from gpulib.arrays import MAX_GRID_Z, blocks, output, require, require_int, to_device
from gpulib.env import on_gpu
from gpulib.shapes import bias_or_zeros, check_conv_inputs

SOURCE_DIR = Path(__file__).resolve().parent / "cuda_c_src"
NAMES = ("direct_conv", "im2col")
BLOCK = 256


def source(name: str) -> str:
    """The CUDA C source of one of ``NAMES``."""
    if name not in NAMES:
        raise ValueError(f"name must be one of the CUDA C sources {NAMES}, not {name!r}")
    return (SOURCE_DIR / f"{name}.cu").read_text()


def show(name: str) -> None:
    print(source(name))


def _cupy():
    if not on_gpu():
        raise RuntimeError("CUDA C runs only on a GPU: the simulator runs Python, not compiled kernels "
                           "(gpulib.conv.cuda_c.show prints the source instead)")
    try:
        import cupy
    except ImportError as err:
        raise RuntimeError("compiling CUDA C at run time needs CuPy (pip install 'gpulib[gpu]')") from err
    return cupy


@lru_cache(maxsize=None)
def _module(name: str, name_expressions: tuple = ()):
    cupy = _cupy()
    return cupy.RawModule(code=source(name), options=("-std=c++17",), name_expressions=name_expressions or None)


def conv2d_direct_c(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Y = conv(X, W) + b by cuda_c_src/direct_conv.cu, one thread per output."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    cupy = _cupy()
    _, C, R, S = W.shape
    H, Wd = X.shape[2], X.shape[3]
    Y = output(out, (N, K, Ho, Wo), "out")
    X, W, bias = (cupy.asarray(to_device(a)) for a in (X, W, bias_or_zeros(b, K)))
    kernel = _module("direct_conv").get_function("conv2d_direct")
    args = (X, W, bias, cupy.asarray(Y), *map(np.int32, (N, C, H, Wd, K, R, S, Ho, Wo, padding, stride)))
    kernel((blocks(Wo, 16), blocks(Ho, 16), min(N * K, MAX_GRID_Z)), (16, 16), args)
    return Y


def im2col_c(X, R: int, S: int, padding: int = 0, stride: int = 1, *, out=None, fixed_sizes: bool = False):
    """X_col [C·R·S, N·H'·W'] by cuda_c_src/im2col.cu: sizes as arguments (im2col_runtime) or, with
    ``fixed_sizes``, as template constants of a kernel compiled for this shape (im2col_fixed)."""
    require(X, "X", 4, layout="[N, C, H, W]")
    R, S = require_int(R, "R", 1), require_int(S, "S", 1)
    N, _, Ho, Wo = check_conv_inputs(X, np.empty((1, X.shape[1], R, S), np.float32), None, padding, stride)
    cupy = _cupy()
    _, C, H, Wd = X.shape
    columns = N * Ho * Wo
    X_col = output(out, (C * R * S, columns), "out")
    grid, args = (blocks(columns, BLOCK), C * R * S), (cupy.asarray(to_device(X)), cupy.asarray(X_col))
    if fixed_sizes:
        expression = f"im2col_fixed<{C},{H},{Wd},{R},{S},{Ho},{Wo},{padding},{stride}>"
        kernel = _module("im2col", (expression,)).get_function(expression)
        kernel(grid, (BLOCK,), (*args, np.int64(columns)))
    else:
        kernel = _module("im2col").get_function("im2col_runtime")
        kernel(grid, (BLOCK,), (*args, *map(np.int32, (C, H, Wd, R, S, Ho, Wo, padding, stride)), np.int64(columns)))
    return X_col
