"""gpulib: the kernels, references, checks, timing and figures of the book "딥러닝과 CUDA".

Import it first, before ``numba.cuda``: it picks the real GPU when there is one and Numba's
CUDA simulator when there is not (``GPULIB_BACKEND=gpu|sim`` overrides), and every notebook
runs the same kernels on either. ``gpulib.report()`` says which backend was chosen and why.

Its layers, top to bottom (README.md, "What is where"; pyproject.toml's contracts keep every
import pointing down them): bench, figures, grading; playbook (16.6's tools); the models; the
layers; the convolution front door, auto-tuner and registry; the algorithms and kernels (conv,
cnn, mlp, reductions); gemm; tensorcore (instructions only); the base modules of this folder.
"""

# the backend is chosen (gpulib.env) before anything imports numba.cuda
from gpulib.env import BACKEND, BACKEND_CHOICE, cuda, device_name, on_gpu, on_simulator, report, setup_book, sized  # isort: skip
from gpulib.check import ValidationError, poisoned, validate
from gpulib.source import show
from gpulib.timing import benchmark

__all__ = [
    "BACKEND",
    "BACKEND_CHOICE",
    "ValidationError",
    "benchmark",
    "cuda",
    "device_name",
    "on_gpu",
    "on_simulator",
    "poisoned",
    "report",
    "setup_book",
    "show",
    "sized",
    "validate",
]
