"""Timing kernels with CUDA events: warm-up, L2 flushed between runs, median of many runs.

On the simulator kernels run as Python code, so a time would describe Python, not a GPU;
``benchmark`` then returns a ``Timing`` that says so instead of carrying numbers.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from gpulib.arrays import require_bool, require_int, require_positive
from gpulib.env import cuda, on_simulator

_FLUSH_BYTES = 256 * 2**20  # several times the largest L2 of current GPUs (H200: 60 MB)
_flush_buffer = None


@dataclass
class Timing:
    """Times of one operation in milliseconds; ``valid`` is False on the simulator."""

    label: str
    times_ms: list[float] = field(default_factory=list)
    valid: bool = True

    @property
    def median_ms(self) -> float:
        if not self.valid:
            raise RuntimeError("no timing on the simulator: it runs kernels as Python code")
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        if not self.valid:
            raise RuntimeError("no timing on the simulator: it runs kernels as Python code")
        return min(self.times_ms)

    def tflops(self, flop: float) -> float:
        """Arithmetic rate for an operation of ``flop`` floating-point operations."""
        flop = require_positive(flop, "flop", note=" of floating-point operations")
        return flop / (self.median_ms * 1e-3) / 1e12

    def __str__(self) -> str:
        if not self.valid:
            return f"{self.label}: not timed - the simulator's times say nothing about a GPU"
        return f"{self.label}: median {self.median_ms:.3f} ms over {len(self.times_ms)} runs"


_fill_kernel = None


def _flush_l2() -> None:
    """Overwrite a buffer larger than L2 so the next run starts with a cold cache."""
    global _flush_buffer, _fill_kernel
    if _flush_buffer is None:
        _flush_buffer = cuda.device_array(_FLUSH_BYTES // 4, dtype=np.float32)

        @cuda.jit
        def fill(a, value):
            i = cuda.grid(1)
            if i < a.size:
                a[i] = value

        _fill_kernel = fill
    n = _flush_buffer.size
    _fill_kernel[(n + 255) // 256, 256](_flush_buffer, 0.0)


def benchmark(fn, *args, warmup: int = 3, repeat: int = 20, flush_l2: bool = True,
              label: str | None = None) -> Timing:
    """Time ``fn(*args)`` (which launches GPU work) with CUDA events; median of ``repeat``."""
    if not callable(fn):
        raise ValueError(f"fn must be a function to time, not {type(fn).__name__}")
    warmup, repeat = require_int(warmup, "warmup", 0), require_int(repeat, "repeat", 1)
    require_bool(flush_l2, "flush_l2")
    if label is not None and not isinstance(label, str):
        raise ValueError(f"label must be a str or None, not {type(label).__name__}")
    label = label or getattr(fn, "__name__", "operation")
    if on_simulator():
        return Timing(label, valid=False)
    for _ in range(warmup):
        fn(*args)
    cuda.synchronize()
    times = []
    start, stop = cuda.event(), cuda.event()
    for _ in range(repeat):
        if flush_l2:
            _flush_l2()
        start.record()
        fn(*args)
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop))
    return Timing(label, times)
