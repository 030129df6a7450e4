"""16.6: what one training step launches, what each launch costs, and how much memory it holds.

    with Profiler() as prof:            # every kernel launch inside is recorded
        model.profiler = prof           # the model marks its operations: prof.op("conv1 forward")
        loss, grads = model.loss_and_grads(X, y)
    prof.kernels()    # one row per launch: op, kernel, grid, threads, GPU ms, pattern, section
    prof.ops()        # one row per operation: its GPU ms (kernels and library calls together)

The profiler is a watcher of gpulib.launch: every kernel launch and cuBLAS call passes through
it, between two CUDA events on the default stream (counted, not timed, on the simulator), after
a short spin kernel so that a launch shorter than Python's own work is still timed as the
kernel (16.6 explains the trap). ``memory=True`` samples the device memory in use after every
launch and operation, first freeing what Numba has queued, so the peak is that of the arrays
alive: what gpulib.playbook.memory estimates.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field

from gpulib import launch
from gpulib.arrays import require_bool
from gpulib.env import cuda, on_gpu
from gpulib.playbook.patterns import pattern_of

SPIN_US = 200  # longer than Python needs to launch a kernel and record two events


@cuda.jit
def spin_kernel(microseconds):
    """Keep the GPU busy for a while (one thread sleeping), so the work queued next runs back to back."""
    for _ in range(microseconds):
        cuda.nanosleep(1000)


@dataclass
class Launch:
    op: str
    kernel: str
    threads: int
    events: tuple | None = None  # (start, stop) CUDA events on a GPU
    ms: float | None = None


@dataclass
class Op:
    name: str
    wall_ms: float = 0.0
    ms: float | None = None
    launches: list = field(default_factory=list)


def used_bytes(flush: bool = True) -> int:
    """Device memory in use now (the driver's view); with ``flush``, after Numba's pending frees
    are done (Numba frees in batches: up to 10 arrays, or a share of the memory, wait in a queue)
    and CuPy's memory pool has returned its cached blocks."""
    require_bool(flush, "flush")
    if not on_gpu():
        raise RuntimeError("used_bytes needs a GPU: the simulator has no device memory to count")
    ctx = cuda.current_context()
    if flush:
        ctx.deallocations.clear()
        cupy = sys.modules.get("cupy")
        if cupy is not None:  # CuPy keeps freed blocks in its pool for reuse (cuBLAS's operands)
            cupy.get_default_memory_pool().free_all_blocks()
    info = ctx.get_memory_info()
    return int(info.total - info.free)


class Profiler(launch.Watcher):
    """Records every kernel launch (and gpulib's cuBLAS calls) while active; see the module docstring."""

    def __init__(self, memory: bool = False, flush: bool = True):
        """``memory``: sample the device memory in use; ``flush``: free Numba's queued
        deallocations before each sample (the arrays alive), or not (the memory as the run holds it)."""
        memory, flush = require_bool(memory, "memory"), require_bool(flush, "flush")
        self.memory = memory and on_gpu()  # (the simulator has no device memory to sample)
        self.flush = flush
        self.launches: list[Launch] = []
        self.op_list: list[Op] = []
        self.peak_bytes = 0
        self.base_bytes = 0
        self._current: Op | None = None

    # ------------------------------------------------------------ recording
    def _events(self):
        if not on_gpu():
            return None
        start, stop = cuda.event(), cuda.event()
        self._spin()
        start.record()
        return start, stop

    def _spin(self):
        with launch.unwatched():
            spin_kernel[1, 1](SPIN_US)

    def sample(self):
        """Sample the device memory in use now (``memory=True``), into ``peak_bytes``."""
        if self.memory:
            self.peak_bytes = max(self.peak_bytes, used_bytes(self.flush))

    def _record(self, kernel: str, threads: int, launch):
        op = self._current.name if self._current else "(outside an operation)"
        entry = Launch(op, kernel, threads)
        entry.events = self._events()
        result = launch()
        if entry.events:
            entry.events[1].record()
        self.launches.append(entry)
        if self._current:
            self._current.launches.append(entry)
        self.sample()
        return result

    @contextlib.contextmanager
    def op(self, name: str):
        """Mark an operation of the model: its kernels and library calls are timed together."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str naming the operation, not {name!r}")
        outer, self._current = self._current, Op(name)
        t0 = time.perf_counter()
        try:
            yield self._current
        finally:
            self._current.wall_ms = (time.perf_counter() - t0) * 1e3
            self.op_list.append(self._current)
            self.sample()
            self._current = outer

    # ------------------------------------------------------------ the hook (gpulib.launch)
    def launch(self, call: launch.Launch):
        return self._record(call.name, launch.threads_of(call.grid, call.block), call.go)

    def __enter__(self):
        if self.memory:
            cuda.synchronize()
            self.base_bytes = self.peak_bytes = used_bytes(True)
        self._watching = launch.watching(self)
        self._watching.__enter__()
        return self

    def __exit__(self, *exc):
        self._watching.__exit__(None, None, None)
        if on_gpu():
            cuda.synchronize()
            for item in self.launches:
                item.ms = cuda.event_elapsed_time(*item.events)
                item.events = None
            for op in self.op_list:
                op.ms = sum(k.ms for k in op.launches)
        return False

    # ------------------------------------------------------------ results
    def kernels(self) -> list[dict]:
        """One row per launch, in launch order."""
        rows = []
        for entry in self.launches:
            patterns, section = pattern_of(entry.kernel)
            rows.append(dict(op=entry.op, kernel=entry.kernel, threads=entry.threads, ms=entry.ms,
                             pattern=patterns, section=section))
        return rows

    def ops(self) -> list[dict]:
        """One row per operation: GPU ms (its launches' sum), wall ms on the host, its kernels' names."""
        return [dict(op=o.name, ms=o.ms, wall_ms=o.wall_ms, kernels=[k.kernel for k in o.launches])
                for o in self.op_list]

    @property
    def peak_above_base(self) -> int:
        """The most device memory in use while active, above what was in use when it began."""
        return self.peak_bytes - self.base_bytes


def kernel_table(rows: list[dict]) -> str:
    """The launches of ``Profiler.kernels()`` as text."""
    keys = ("op", "kernel", "threads", "ms", "pattern", "section")
    if not isinstance(rows, (list, tuple)) or any(not isinstance(r, dict) or any(k not in r for k in keys) for r in rows):
        raise ValueError(f"rows must be Profiler.kernels()'s list of dicts (with {keys}), not {rows!r:.60}")
    lines = [f"{'operation':<18} {'kernel':<30} {'threads':>9} {'GPU ms':>8}  pattern (section)"]
    for r in rows:
        ms = "-" if r["ms"] is None else f"{r['ms']:.4f}"
        lines.append(f"{r['op']:<18} {r['kernel']:<30} {r['threads']:>9} {ms:>8}  {r['pattern']} ({r['section']})")
    return "\n".join(lines)
