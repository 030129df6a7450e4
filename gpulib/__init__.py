"""gpulib: the kernels, references, checks, timing and figures of the book "딥러닝과 CUDA".

Import it first, before ``numba.cuda``: it picks the real GPU when there is one and Numba's
CUDA simulator when there is not (``GPULIB_BACKEND=gpu|sim`` overrides), and every notebook
runs the same kernels on either. ``gpulib.report()`` says which backend was chosen and why.

Where things live (a folder per section of the chapter, then one per kind of tool):
    gpulib/mlp/           16.1: dense layers, backpropagation and training as Numba kernels
    gpulib/cnn/           16.2: convolution backward, ReLU, pooling, a small CNN
    gpulib/conv/          16.3-16.5: the convolution kernels (direct, im2col, implicit GEMM,
                          Winograd, FFT), their shape rules, the algorithm registry, the auto-tuner
    gpulib/gemm/          16.4: GEMM kernels (naive, shared tiles, register-blocked) and cuBLAS
    gpulib/tensorcore/    16.5: WMMA from Numba (inline PTX / emulation), tensor-core GEMM and conv
    gpulib/playbook/       16.6: the whole book in one model (BookCNN), a kernel profiler, a memory
                          estimator, the roofline, tree reductions (softmax, dW, db)
    gpulib/conv/cuda_c/   16.3-16.4 in CUDA C (direct conv, im2col), compiled by CuPy on a GPU
    gpulib/precision.py   16.5: fp32 / tf32 / fp16 / bf16 emulated, loss scaling
    gpulib/bench/         measuring: the benchmark layers, checked timing rows, one module per
                          script in benchmarks/
    gpulib/figures/       drawing: the notebooks' explorers (widgets) and figures
    gpulib/grading/       the checks of the classroom assignments (assignments/): one module
                          per section on core.py (launches with a time limit, comparisons
                          that name the mistake, structural checks on the tracer's record)
    gpulib/reference.py   float64 NumPy reference of every operation (the "trusted library")
    gpulib/check.py       poisoned outputs and ``validate`` against a reference
    gpulib/trace.py       16.3: memory-traffic tracer (per-thread counts, races)
    gpulib/timing.py      CUDA-event timing (median of many runs)
    gpulib/env.py         the backend choice and report, ``sized``
    gpulib/arrays.py      input checks and device transfers of every wrapper
    gpulib/source.py      ``show``: print the real source of any gpulib kernel
    gpulib/data.py        the digits data set and an MNIST IDX reader
"""

# the backend is chosen (gpulib.env) before anything imports numba.cuda
from gpulib.env import BACKEND, BACKEND_CHOICE, cuda, on_gpu, on_simulator, report, setup_book, sized  # isort: skip
from gpulib.check import ValidationError, poisoned, validate
from gpulib.source import show
from gpulib.timing import benchmark

__all__ = [
    "BACKEND",
    "BACKEND_CHOICE",
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
