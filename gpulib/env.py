"""What the book runs on: the backend report and the sizes that shrink on the simulator."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import gpulib


def on_gpu() -> bool:
    """True when kernels run on a real NVIDIA GPU."""
    return gpulib.BACKEND == "gpu"


def on_simulator() -> bool:
    """True when kernels run on Numba's CUDA simulator (Python threads on the CPU)."""
    return gpulib.BACKEND == "sim"


def sized(gpu, sim):
    """The value for this backend: the full size on a GPU, a smaller one on the simulator."""
    return gpu if on_gpu() else sim


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def device_name() -> str | None:
    """The GPU's name, or None on the simulator (its device has no name)."""
    if not on_gpu():
        return None
    name = gpulib.cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def report() -> None:
    """Print the backend, why it was chosen, the device, and the versions that matter."""
    choice = gpulib.BACKEND_CHOICE
    if on_gpu():
        dev = gpulib.cuda.get_current_device()
        cc = ".".join(map(str, dev.compute_capability))
        print(f"gpulib backend: GPU - {device_name()} (compute capability {cc})")
    else:
        print("gpulib backend: simulator - Numba's CUDA simulator on the CPU")
    print(f"  why: {choice.reason}")
    print(
        f"  numba {_version('numba')}, numba-cuda {_version('numba-cuda')}, "
        f"numpy {_version('numpy')}"
    )
    if on_simulator():
        print("  every thread is a Python thread here: sizes are reduced and timings mean nothing")


def setup_book() -> None:
    """The first call of every notebook: Korean labels in figures, then the backend report."""
    from gpulib.plotting import use_korean_font

    if not use_korean_font():
        print("note: koreanize-matplotlib is not installed, so Korean labels in figures may not render")
    report()
