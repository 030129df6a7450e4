"""Pick the CUDA backend (real GPU or Numba's simulator) before ``numba.cuda`` is imported.

Numba fixes its CUDA backend the first time ``numba.cuda`` is imported, so this module
must run first; ``gpulib/__init__.py`` imports it before anything else. It never imports
``numba.cuda`` itself until the choice has been written into Numba's configuration.

Order of decision:
1. ``GPULIB_BACKEND=gpu`` or ``GPULIB_BACKEND=sim`` in the environment wins; Numba's own
   ``NUMBA_ENABLE_CUDASIM=1`` counts as ``sim``. ``GPULIB_BACKEND=ptx`` is the grader's
   compiler (``gpulib.grading.cleanroom.compile``): the real CUDA target, no device needed.
2. Otherwise the GPU is used when a CUDA driver loads, reports at least one device, and
   NVVM (the compiler Numba needs) can be found; the simulator otherwise.
3. If ``numba.cuda`` was already imported, its backend cannot change any more: gpulib keeps
   it and warns.
"""

from __future__ import annotations

import ctypes
import os
import sys
import warnings
from dataclasses import dataclass

ENV_VAR = "GPULIB_BACKEND"


class BackendWarning(UserWarning):
    """numba.cuda was imported before gpulib, so gpulib could not choose the backend."""


@dataclass(frozen=True)
class Choice:
    name: str  # "gpu" or "sim"
    reason: str
    compile_only: bool = False  # GPULIB_BACKEND=ptx: Numba's CUDA target without a device (the grader's compiler)


def _driver_device_count() -> tuple[int, str]:
    """Ask the CUDA driver directly (ctypes) how many devices it sees; (0, why) if none."""
    for lib in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            cu = ctypes.CDLL(lib)
            break
        except OSError:
            continue
    else:
        return 0, "no CUDA driver library (libcuda) could be loaded"
    status = cu.cuInit(0)
    if status != 0:
        return 0, f"the CUDA driver loaded but cuInit failed (CUresult {status})"
    count = ctypes.c_int(0)
    status = cu.cuDeviceGetCount(ctypes.byref(count))
    if status != 0:
        return 0, f"cuDeviceGetCount failed (CUresult {status})"
    if count.value == 0:
        return 0, "the CUDA driver reports no device"
    return count.value, f"the CUDA driver reports {count.value} device(s)"


def _nvvm_found() -> tuple[bool, str]:
    """Numba compiles kernels with NVVM; look for it the way numba-cuda does."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return False, "cuda-pathfinder (a numba-cuda dependency) is not installed"
    try:
        lib = load_nvidia_dynamic_lib("nvvm")
    except Exception as exc:  # DynamicLibNotFoundError and friends
        return False, f"NVVM was not found ({type(exc).__name__})"
    return True, f"NVVM at {lib.abs_path}"


nvvm_found = _nvvm_found  # public: the grader's compiler asks it too (gpulib.grading.cleanroom.compile)


def _detect() -> Choice:
    count, why = _driver_device_count()
    if count == 0:
        return Choice("sim", why)
    ok, nvvm_why = _nvvm_found()
    if not ok:
        return Choice("sim", f"{why}, but {nvvm_why}")
    return Choice("gpu", f"{why}; {nvvm_why}")


def _already_imported_backend() -> str:
    cuda = sys.modules["numba.cuda"]
    return "sim" if "simulator" in type(cuda.to_device).__module__ + cuda.to_device.__module__ else "gpu"


def choose() -> Choice:
    """Decide the backend and write it into Numba's configuration (without importing numba.cuda)."""
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced not in ("", "gpu", "sim", "ptx"):  # checked first, even when numba.cuda was imported already
        raise ValueError(f"{ENV_VAR} must be 'gpu' or 'sim' (or 'ptx', compile only), not {forced!r}")
    if "numba.cuda" in sys.modules:
        name = _already_imported_backend()
        warnings.warn(
            f"numba.cuda was imported before gpulib, so its backend is already fixed ({name}); "
            "gpulib uses it as it is. Import gpulib first to let it choose.",
            BackendWarning,
            stacklevel=3,
        )
        return Choice(name, "numba.cuda was imported before gpulib; its backend was kept")

    if forced == "ptx":
        choice = Choice("gpu", f"{ENV_VAR}=ptx was set: kernels are compiled for compute capability 9.0, never run",
                        compile_only=True)
    elif forced == "sim":
        choice = Choice("sim", f"{ENV_VAR}=sim was set")
    elif forced == "gpu":
        count, why = _driver_device_count()
        ok, nvvm_why = _nvvm_found()
        if count == 0 or not ok:
            raise RuntimeError(
                f"{ENV_VAR}=gpu was set, but no usable GPU: {why}; {nvvm_why}. "
                f"Unset {ENV_VAR} to fall back to the simulator."
            )
        choice = Choice("gpu", f"{ENV_VAR}=gpu was set; {why}")
    elif os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() == "1":
        choice = Choice("sim", "NUMBA_ENABLE_CUDASIM=1 was set")
    else:
        choice = _detect()

    sim = "1" if choice.name == "sim" else "0"
    os.environ["NUMBA_ENABLE_CUDASIM"] = sim
    # The book launches small grids on purpose (a 64-neuron layer); Numba's warning that they
    # under-fill the GPU would bury every output. Set the variable to 1 to see it again.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    if "numba" in sys.modules:  # numba read its environment already; set the live value
        sys.modules["numba"].config.ENABLE_CUDASIM = int(sim)
    return choice
