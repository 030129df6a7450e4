"""Memory-traffic tracer (16.3): run a gpulib kernel on the simulator and count every access.

    t = trace(kernel, grid, block, X, W, b, Y, 1, 1, names=("X", "W", "b", "Y"))
    t.summary()                      # reads and writes per array, per thread, per element
    t.element_reads("X")             # how often each element of X was read (same shape as X)
    t.distinct_readers("X")          # how many different threads read each element
    t.races                          # shared-memory accesses with no barrier in between
    t.tiling_problems()              # e.g. "no shared-memory reads: the kernel is not tiled"

The kernel runs on Numba's CUDA simulator whatever the backend of the process, with every
NumPy argument wrapped so that each read and write is recorded with the thread that made
it. Shared arrays are recorded too, start filled with NaN in every block (so a read of an
element nobody wrote shows up in the output), and every barrier is counted, which is how a
race is found: a thread reading a shared element another thread wrote since the last
barrier (read after write), or overwriting one another thread read since then (write after
read). Keep launches small: the simulator runs each thread as a Python thread.
"""

from __future__ import annotations

import linecache
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np


@dataclass
class Race:
    """One shared-memory access that needed a barrier and had none."""

    array: str
    index: tuple
    block: tuple
    kind: str  # "read after write" or "write after read"
    first_thread: tuple  # (threadIdx) of the earlier access
    second_thread: tuple  # (threadIdx) of the later access

    def __str__(self) -> str:
        return (f"{self.kind} on shared '{self.array}'{list(self.index)} in block {self.block}: "
                f"thread {self.first_thread} then thread {self.second_thread} with no syncthreads between")


class _Recorder:
    """Counts of one array (global) or of one shared array summed over all blocks."""

    def __init__(self, name: str, kind: str, shape, total_threads: int, track_readers: bool):
        self.name, self.kind, self.shape = name, kind, tuple(shape)
        size = int(np.prod(self.shape)) if self.shape else 1
        self.reads_by_thread = np.zeros(total_threads, np.int64)
        self.writes_by_thread = np.zeros(total_threads, np.int64)
        self.reads_by_element = np.zeros(size, np.int64)
        self.writes_by_element = np.zeros(size, np.int64)
        self.readers = [set() for _ in range(size)] if track_readers else None
        self.block_reads: dict[int, np.ndarray] = {}  # block id -> reads of each element


class _TracedArray:
    """Stands in for an array inside the kernel; records each access, then performs it."""

    def __init__(self, tracer: "Trace", recorder: _Recorder, data: np.ndarray, block=None):
        self._tracer, self._rec, self._data, self._block = tracer, recorder, data, block
        self.shape, self.ndim, self.size, self.dtype = data.shape, data.ndim, data.size, data.dtype
        if block is not None:  # shared: remember the last access of each element, for races
            n = data.size
            self._last_write = np.full(n, -1, np.int64)  # epoch of the last write
            self._last_writer = np.full(n, -1, np.int64)
            self._last_read = np.full(n, -1, np.int64)
            self._last_reader = np.full(n, -1, np.int64)

    def _flat(self, index) -> int:
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) != self._data.ndim:
            raise IndexError(f"{self._rec.name}: {len(index)} indices for a {self._data.ndim}-D array")
        for i, (k, n) in enumerate(zip(index, self._data.shape)):
            if not isinstance(k, (int, np.integer)):
                raise TypeError(f"{self._rec.name}: index {k!r} is not an integer")
            if not 0 <= k < n:
                raise IndexError(f"{self._rec.name}{list(index)}: index {k} is out of bounds for "
                                 f"axis {i} of size {n}")
        return int(np.ravel_multi_index(tuple(int(k) for k in index), self._data.shape))

    def __getitem__(self, index):
        flat = self._flat(index)
        self._tracer._access(self, flat, write=False)
        return self._data.flat[flat]

    def __setitem__(self, index, value):
        flat = self._flat(index)
        self._tracer._access(self, flat, write=True)
        self._data.flat[flat] = value


class Trace:
    """The record of one traced launch; see the module docstring."""

    def __init__(self, grid, block):
        self.grid, self.block = grid, block
        self.threads_per_block = int(np.prod(block))
        self.total_threads = int(np.prod(grid)) * self.threads_per_block
        self.arrays: dict[str, _Recorder] = {}
        self.races: list[Race] = []
        self.race_count = 0
        self.race_arrays: set[str] = set()  # every shared array that had a race
        self.barriers = 0
        self._epoch = np.zeros(self.total_threads, np.int64)  # barriers each thread has passed
        self._lock = threading.RLock()
        self._shared: dict = {}

    # -- bookkeeping called from the kernel's threads
    def _thread(self):
        t = threading.current_thread()
        b, i = t.blockIdx, t.threadIdx
        gx, gy, _ = self.grid
        block_id = b.x + gx * (b.y + gy * b.z)
        return block_id * self.threads_per_block + t.thread_id, (b.x, b.y, b.z), (i.x, i.y, i.z)

    def _access(self, arr: _TracedArray, flat: int, write: bool) -> None:
        with self._lock:
            tid, _, _ = self._thread()
            rec = arr._rec
            if write:
                rec.writes_by_thread[tid] += 1
                rec.writes_by_element[flat] += 1
            else:
                rec.reads_by_thread[tid] += 1
                rec.reads_by_element[flat] += 1
                if rec.readers is not None:
                    rec.readers[flat].add(tid)
                    block_id = tid // self.threads_per_block
                    if block_id not in rec.block_reads:
                        rec.block_reads[block_id] = np.zeros(rec.reads_by_element.size, np.int64)
                    rec.block_reads[block_id][flat] += 1
            if arr._block is not None:
                self._check_race(arr, flat, tid, write)

    def _check_race(self, arr: _TracedArray, flat: int, tid: int, write: bool) -> None:
        epoch = self._epoch[tid]
        if write:
            reader = arr._last_reader[flat]
            if arr._last_read[flat] == epoch and reader not in (-1, tid):
                self._race(arr, flat, "write after read", reader, tid)
            arr._last_write[flat], arr._last_writer[flat] = epoch, tid
        else:
            writer = arr._last_writer[flat]
            if arr._last_write[flat] == epoch and writer not in (-1, tid):
                self._race(arr, flat, "read after write", writer, tid)
            arr._last_read[flat], arr._last_reader[flat] = epoch, tid

    def _race(self, arr, flat, kind, first, second):
        self.race_count += 1
        self.race_arrays.add(arr._rec.name)
        if len(self.races) < 20:
            index = tuple(int(i) for i in np.unravel_index(flat, arr.shape))
            self.races.append(Race(arr._rec.name, index, arr._block, kind,
                                   self._thread_idx(first), self._thread_idx(second)))

    def _thread_idx(self, tid: int) -> tuple:
        local = int(tid) % self.threads_per_block
        bx, by, _ = self.block
        return (local % bx, (local // bx) % by, local // (bx * by))

    def _barrier(self) -> None:
        with self._lock:
            tid, _, _ = self._thread()
            self._epoch[tid] += 1
            self.barriers += 1

    def _shared_array(self, shape, dtype, frame):
        """A per-block shared array named after the variable it is assigned to."""
        key = (frame.f_code.co_filename, frame.f_lineno)
        _, block, _ = self._thread()
        with self._lock:
            if (key, block) not in self._shared:
                match = re.match(r"\s*(\w+)\s*=", linecache.getline(*key))
                name = match.group(1) if match else f"shared@{key[1]}"
                shape = tuple(np.atleast_1d(shape))
                if name not in self.arrays:
                    self.arrays[name] = _Recorder(name, "shared", shape, self.total_threads, False)
                data = np.full(shape, np.nan, dtype=np.dtype(str(dtype)) if not isinstance(dtype, np.dtype) else dtype)
                self._shared[(key, block)] = _TracedArray(self, self.arrays[name], data, block)
            return self._shared[(key, block)]

    # -- results
    def element_reads(self, name: str) -> np.ndarray:
        rec = self.arrays[name]
        return rec.reads_by_element.reshape(rec.shape)

    def element_writes(self, name: str) -> np.ndarray:
        rec = self.arrays[name]
        return rec.writes_by_element.reshape(rec.shape)

    def block_element_reads(self, name: str, block) -> np.ndarray:
        """Reads of each element of a global array by the threads of one block (bx, by, bz)."""
        rec = self.arrays[name]
        bx, by, bz = tuple(block) + (0,) * (3 - len(tuple(block)))
        block_id = bx + self.grid[0] * (by + self.grid[1] * bz)
        counts = rec.block_reads.get(block_id, np.zeros(rec.reads_by_element.size, np.int64))
        return counts.reshape(rec.shape)

    def block_reads(self, name: str, block) -> int:
        """How many reads of ``name`` the threads of one block made (global or shared)."""
        bx, by, bz = tuple(block) + (0,) * (3 - len(tuple(block)))
        block_id = bx + self.grid[0] * (by + self.grid[1] * bz)
        first = block_id * self.threads_per_block
        return int(self.arrays[name].reads_by_thread[first:first + self.threads_per_block].sum())

    def distinct_readers(self, name: str) -> np.ndarray:
        """How many different threads read each element of a global array."""
        rec = self.arrays[name]
        if rec.readers is None:
            raise ValueError(f"'{name}' is shared memory; distinct readers are kept for global arrays")
        return np.array([len(s) for s in rec.readers]).reshape(rec.shape)

    def reads_per_thread(self, name: str) -> np.ndarray:
        return self.arrays[name].reads_by_thread

    def global_reads(self) -> int:
        return int(sum(r.reads_by_element.sum() for r in self.arrays.values() if r.kind == "global"))

    def shared_reads(self) -> int:
        return int(sum(r.reads_by_element.sum() for r in self.arrays.values() if r.kind == "shared"))

    def tiling_problems(self) -> list[str]:
        """What is wrong with a kernel meant to be tiled (empty list: nothing found)."""
        shared = [r for r in self.arrays.values() if r.kind == "shared"]
        problems = []
        if not shared:
            problems.append("no shared memory is allocated: the kernel is not tiled")
        elif self.shared_reads() == 0:
            problems.append("shared memory is written but never read: the kernel is not tiled "
                            "(every thread still reads global memory)")
        for r in shared:
            if r.reads_by_element.sum() and not r.writes_by_element.sum():
                problems.append(f"shared '{r.name}' is read but never written")
        if self.race_count:
            problems.append(f"{self.race_count} race(s) on shared memory, e.g. {self.races[0]}")
        return problems

    def summary(self) -> str:
        """A table: per array, reads and writes in total, per active thread, per element."""
        active = int(np.count_nonzero(sum(r.reads_by_thread + r.writes_by_thread
                                          for r in self.arrays.values())))
        lines = [f"grid {self.grid} x block {self.block} = {self.total_threads} threads, "
                 f"{active} touched memory, {self.barriers // max(1, self.total_threads)} barrier(s) per thread",
                 f"{'array':<8} {'memory':<7} {'reads':>9} {'writes':>8} {'reads/thread':>13} "
                 f"{'max reads/element':>18} {'max readers/element':>20}"]
        for r in self.arrays.values():
            per_thread = r.reads_by_thread.sum() / max(active, 1)
            readers = max((len(s) for s in r.readers), default=0) if r.readers is not None else "-"
            lines.append(f"{r.name:<8} {r.kind:<7} {r.reads_by_element.sum():>9} {r.writes_by_element.sum():>8} "
                         f"{per_thread:>13.1f} {r.reads_by_element.max():>18} {readers!s:>20}")
        if self.race_count:
            lines.append(f"RACES: {self.race_count}, first: {self.races[0]}")
        return "\n".join(lines)


@contextmanager
def _instrumented_simulator(tracer: Trace):
    """Route the simulator's shared arrays and barriers through ``tracer`` for one launch."""
    import sys

    from numba.cuda.simulator import kernelapi

    class Shared:
        def __init__(self, inner):
            self._inner = inner

        def array(self, shape, dtype, alignment=None):
            return tracer._shared_array(shape, dtype, sys._getframe(1))

    original_shared = kernelapi.FakeCUDAModule.shared
    original_sync = kernelapi.FakeCUDAModule.syncthreads

    def syncthreads(self):
        tracer._barrier()
        original_sync(self)

    kernelapi.FakeCUDAModule.shared = property(lambda self: Shared(self._shared))
    kernelapi.FakeCUDAModule.syncthreads = syncthreads
    try:
        yield
    finally:
        kernelapi.FakeCUDAModule.shared = original_shared
        kernelapi.FakeCUDAModule.syncthreads = original_sync


@contextmanager
def _python_device_functions(fn):
    """On a GPU backend, let the kernel call its device functions as plain Python."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    globs = fn.__globals__
    swapped = {}
    for key, value in list(globs.items()):
        options = getattr(value, "targetoptions", None)
        if options is not None and options.get("device") and hasattr(value, "py_func"):
            swapped[key] = value
            globs[key] = FakeCUDAKernel(value.py_func, device=True)
    try:
        yield
    finally:
        globs.update(swapped)


def trace(kernel, grid, block, *args, names=None) -> Trace:
    """Run ``kernel[grid, block](*args)`` on the simulator, recording every memory access.

    NumPy arguments are traced (named by ``names``, else a0, a1, ...) and written in place;
    other arguments (scalars) pass through. ``kernel`` is a @cuda.jit kernel or its function.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    grid = tuple(grid) + (1,) * (3 - len(tuple(grid))) if isinstance(grid, tuple) else (grid, 1, 1)
    block = tuple(block) + (1,) * (3 - len(tuple(block))) if isinstance(block, tuple) else (block, 1, 1)
    for what, dims in (("grid", grid), ("block", block)):
        if len(dims) != 3 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
            raise ValueError(f"{what} must be up to three positive integers, not {dims}: a launch of no "
                             f"{'blocks' if what == 'grid' else 'threads'} traces nothing")
    for i, arg in enumerate(args):
        if hasattr(arg, "copy_to_host") or hasattr(arg, "__cuda_array_interface__"):
            raise ValueError(f"argument {i} is a device array: the tracer records NumPy arrays only (it runs "
                             f"the kernel on the simulator); pass arg.copy_to_host()")
    fn = getattr(kernel, "py_func", kernel)
    tracer = Trace(grid, block)
    names = list(names or [])
    wrapped = []
    for i, arg in enumerate(args):
        if isinstance(arg, np.ndarray):
            name = names[i] if i < len(names) else f"a{i}"
            rec = _Recorder(name, "global", arg.shape, tracer.total_threads, track_readers=True)
            tracer.arrays[name] = rec
            wrapped.append(_TracedArray(tracer, rec, arg))
        else:
            wrapped.append(arg)
    with _instrumented_simulator(tracer), _python_device_functions(fn):
        FakeCUDAKernel(fn, device=False)[grid, block](*wrapped)
    return tracer
