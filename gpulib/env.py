"""What the book runs on: the backend choice, its report, and the sizes that shrink on the simulator.

The choice is made here, once, when this module is first imported (``gpulib/__init__.py``
imports it before anything else): ``_backend.choose`` writes it into Numba's configuration
before ``numba.cuda`` is imported. Every other gpulib module asks this one (``on_gpu``,
``sized``), never the package itself.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from gpulib import _backend

BACKEND_CHOICE = _backend.choose()
BACKEND = BACKEND_CHOICE.name  # "gpu" or "sim"; fixed for the life of the process

from numba import cuda  # noqa: E402  (must come after the choice above)

if BACKEND == "sim":
    from gpulib import simulator

    simulator.install()  # barrier-free kernels run their threads one after another


def on_gpu() -> bool:
    """True when kernels run on a real NVIDIA GPU."""
    return BACKEND == "gpu"


def on_simulator() -> bool:
    """True when kernels run on Numba's CUDA simulator (Python on the CPU)."""
    return BACKEND == "sim"


def number_setting(name: str, default: float, integer: bool = False) -> float:
    """The environment variable ``name`` as a positive number (``default`` when unset or empty):
    ValueError naming the variable for anything else ("abc", "-1", "0", "nan")."""
    import math
    import os

    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive {'integer' if integer else 'number'}, not {text!r}")
    return value


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
    if not on_gpu() or BACKEND_CHOICE.compile_only:
        return None
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def report() -> None:
    """Print the backend, why it was chosen, the device, and the versions that matter."""
    if BACKEND_CHOICE.compile_only:
        print("gpulib backend: compile only - kernels compiled for compute capability 9.0, never run")
    elif on_gpu():
        dev = cuda.get_current_device()
        cc = ".".join(map(str, dev.compute_capability))
        print(f"gpulib backend: GPU - {device_name()} (compute capability {cc})")
    else:
        print("gpulib backend: simulator - Numba's CUDA simulator on the CPU")
    print(f"  why: {BACKEND_CHOICE.reason}")
    print(
        f"  numba {_version('numba')}, numba-cuda {_version('numba-cuda')}, "
        f"numpy {_version('numpy')}"
    )
    if on_simulator():
        print(
            "  kernels run in Python here (a barrier-free block's threads one after another): "
            "sizes are reduced and timings mean nothing"
        )


def setup_book() -> None:
    """The first call of every notebook: Korean labels in figures, then the backend report."""
    from gpulib.style import use_korean_font

    if not use_korean_font():
        print("note: koreanize-matplotlib is not installed, so Korean labels in figures may not render")
    report()
