"""gpulib: the kernels, references, checks, timing and widgets of the book "딥러닝과 CUDA".

Import it first, before ``numba.cuda``: it picks the real GPU when there is one and Numba's
CUDA simulator when there is not (``GPULIB_BACKEND=gpu|sim`` overrides), and every notebook
runs the same kernels on either. ``gpulib.report()`` says which backend was chosen and why.

Where things live (one folder per section of the chapter):
    gpulib/reference.py   float64 NumPy reference of every operation (the "trusted library")
    gpulib/check.py       poisoned outputs and ``validate`` against a reference
    gpulib/timing.py      CUDA-event timing (median of many runs)
    gpulib/source.py      ``show``: print the real source of any gpulib kernel
    gpulib/data.py        the digits data set and an MNIST IDX reader
    gpulib/plotting.py    matplotlib set-up (a Korean font)
    gpulib/mlp/           16.1: dense layers, backpropagation and training as Numba kernels
    gpulib/cnn/           16.2: convolution backward, ReLU, pooling, a small CNN
    gpulib/conv/          16.3-16.5: direct, im2col, implicit GEMM, Winograd, FFT, auto-tuner
    gpulib/gemm/          16.4: GEMM kernels (naive, shared tiles, register-blocked) and cuBLAS
    gpulib/trace.py       16.3: memory-traffic tracer (per-thread counts, races)
    gpulib/tensorcore/    16.5: WMMA from Numba (inline PTX / emulation), tensor-core GEMM and conv
    gpulib/precision.py   16.5: fp32 / tf32 / fp16 / bf16 emulated, loss scaling
"""

from gpulib import _backend

BACKEND_CHOICE = _backend.choose()
BACKEND = BACKEND_CHOICE.name  # "gpu" or "sim"; fixed for the life of the process

from numba import cuda  # noqa: E402  (must come after the choice above)

from gpulib.check import ValidationError, poisoned, validate  # noqa: E402
from gpulib.source import show  # noqa: E402
from gpulib.timing import benchmark  # noqa: E402
from gpulib.env import on_gpu, on_simulator, report, setup_book, sized  # noqa: E402

__all__ = [
    "BACKEND",
    "ValidationError",
    "benchmark",
    "cuda",
    "on_gpu",
    "on_simulator",
    "poisoned",
    "report",
    "setup_book",
    "show",
    "sized",
    "validate",
]
