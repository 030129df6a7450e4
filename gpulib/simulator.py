"""How Numba's CUDA simulator schedules a block's threads here (every section's simulator runs).

``install()`` runs the threads of a kernel whose code names no barrier one after another in one
Python thread (CUDA promises no order among a block's threads, so this is one execution a GPU
may produce; about 4 to 5 times faster), keeps the barriers of the kernels that have them in
the threads themselves (each sleeps on an event of its own until the last live thread arrives;
no thread polls the others), and accepts ``alignment=`` on
shared and local arrays. It also holds what the rest of gpulib needs of the simulator's
insides (launch interception, device-array views, the tracer's routing). What must stay true:
this module and gpulib/launch.py are the only ones that name Numba's private parts; a barrier
reached in a kernel run sequentially is an error, never a wrong answer.
"""

from __future__ import annotations

import contextlib
import sys
import types
from functools import lru_cache

import numpy as np

BARRIER_NAMES = frozenset({"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or",
                           "this_grid", "cg"})

# the modules whose NumPy calls make the arrays of cuda.shared.array and cuda.local.array here
ON_CHIP_ARRAY_MODULES = ("gpulib.simulator", "numba.cuda.simulator.kernelapi")

LIBRARIES = frozenset({"numpy", "numba", "numba_cuda", "math", "builtins", "functools"})


def _code_names(code: types.CodeType) -> set:
    names, codes = set(), [code]
    while codes:
        c = codes.pop()
        names |= set(c.co_names) | set(c.co_freevars)
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]  # nested functions
    return names


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def needs_threads(fn, _seen: set | None = None) -> bool:
    """True when the Python function of a kernel, or a function it calls, names a barrier.

    Followed: the globals and closure variables the code names (device functions, plain
    functions, kernel factories' closures) and the attributes it takes from modules it names.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    seen = set() if _seen is None else _seen
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    names = _code_names(code)
    if names & BARRIER_NAMES:
        return True
    referenced = [fn.__globals__[n] for n in names if n in fn.__globals__]
    referenced += [_cell_value(cell) for cell in (fn.__closure__ or ())]
    for module in [r for r in referenced if isinstance(r, types.ModuleType)]:
        referenced += [getattr(module, n) for n in names if hasattr(module, n)]
    for value in referenced:
        inner = value.fn if isinstance(value, FakeCUDAKernel) else getattr(value, "py_func", value)
        if not isinstance(inner, types.FunctionType) or inner.__module__.split(".")[0] in LIBRARIES:
            continue  # NumPy's or Numba's own Python code holds no kernel barrier
        if needs_threads(inner, seen):
            return True
    return False


@lru_cache(maxsize=None)
def _kernel_needs_threads(fn) -> bool:
    return needs_threads(fn)


def install() -> None:
    """Make the simulator run the threads of barrier-free kernels one after another (idempotent)."""
    from numba.cuda.simulator import kernel as simulator
    from numba.cuda.simulator.kernelapi import Dim3

    if hasattr(simulator.BlockManager.run, "threaded_run"):
        return  # installed already

    class SequentialBlock(simulator.BlockThread):
        """All the threads of one block, in turn, in this one Python thread."""

        def __init__(self, manager, grid_point, args):
            bx, by, _ = manager._block_dim

            def every_thread():
                for point in np.ndindex(*manager._block_dim):
                    self.threadIdx = Dim3(*point)
                    self.thread_id = point[0] + bx * (point[1] + by * point[2])
                    manager._f(*args)

            super().__init__(every_thread, manager, grid_point, (0, 0, 0), manager._debug)

        def syncthreads(self):
            raise RuntimeError("a barrier in a kernel whose threads the simulator runs one after another "
                               "(gpulib.simulator found no barrier in its code)")

        syncthreads_count = syncthreads_and = syncthreads_or = lambda self, value: self.syncthreads()

    def run(self, grid_point, *args):
        if _kernel_needs_threads(self._f):
            return _threaded_run(self, grid_point, *args)
        block = SequentialBlock(self, grid_point, args)
        block.start()
        block.join()
        if block.exception:
            raise block.exception[0].with_traceback(block.exception[1])

    run.threaded_run = _threaded_run  # the mark that install() has run
    simulator.BlockManager.run = run
    _accept_alignment()


def intercept_launches(watch):
    """Every kernel launch from Python (not a device function, not a call inside a kernel) goes
    to ``watch(kernel, args, go)``, which must return ``go()``; returns what undoes it."""
    from numba.cuda.simulator import kernel as simulator

    call = simulator.FakeCUDAKernel.__call__

    def watched(kernel, *args):
        if kernel._device or simulator._kernel_context:
            return call(kernel, *args)
        return watch(kernel, args, lambda: call(kernel, *args))

    simulator.FakeCUDAKernel.__call__ = watched
    return lambda: setattr(simulator.FakeCUDAKernel, "__call__", call)


class _BlockBarrier:
    """Emulation: one block's __syncthreads(), released by the last live thread to arrive (a
    thread that has returned no longer counts). Each thread sleeps on an event of its own, so
    a release wakes them all at once instead of one after another through a shared lock; no
    thread polls (waking a Python thread is what a block of 256 threads spends its time on)."""

    def __init__(self, threads: int):
        import threading

        self.lock = threading.Lock()
        self.live, self.waiting = threads, []
        self.failed = None  # the first thread that raised
        self.done = threading.Event()  # every thread has returned, or one raised

    def wait(self, thread) -> None:
        with self.lock:
            if self.failed is None:
                self.waiting.append(thread)
                if len(self.waiting) == self.live:
                    self._release()
        # in slices: a thread stopped from outside (the grading watchdog's KernelTimeout) sees it
        # between two of them, and a block whose thread has raised lets no thread wait on
        while self.failed is None and not thread.syncthreads_event.wait(0.1):
            pass
        thread.syncthreads_event.clear()
        if self.failed is not None:
            raise RuntimeError("abort flag set on syncthreads: another thread of the block raised")

    def _release(self) -> None:  # (holding the lock)
        waiting, self.waiting = self.waiting, []
        for thread in waiting:
            thread.syncthreads_event.set()

    def leave(self, thread) -> None:
        with self.lock:
            self.live -= 1
            if thread.exception and self.failed is None:
                self.failed = thread
                self._release()  # the others stop at their barrier
                self.done.set()
            elif self.waiting and len(self.waiting) == self.live:
                self._release()
            if self.live == 0:
                self.done.set()


def _threaded_run(manager, grid_point, *args) -> None:
    """The simulator's BlockManager.run (one Python thread per CUDA thread; a barrier releases
    its threads once every live thread waits at it; the first exception stops them all), with
    the barrier kept by the threads themselves (_BlockBarrier) rather than by polling them."""
    from numba.cuda.simulator.kernel import BlockThread

    barrier = _BlockBarrier(int(np.prod(manager._block_dim)))

    class Thread(BlockThread):
        def run(self):
            try:
                super().run()  # an exception is kept in self.exception
            finally:
                barrier.leave(self)

        def syncthreads(self):
            barrier.wait(self)

    threads = [Thread(lambda: manager._f(*args), manager, grid_point, point, manager._debug)
               for point in np.ndindex(*manager._block_dim)]
    for thread in threads:
        thread.start()
    barrier.done.wait()
    if barrier.failed is not None:
        raise barrier.failed.exception[0].with_traceback(barrier.failed.exception[1])


def _accept_alignment() -> None:
    """Let ``cuda.shared.array(..., alignment=16)`` run here: the simulator refuses the argument,
    but NumPy's arrays are already 16-byte aligned and no kernel can observe a shared-memory
    address in Python, so dropping it changes nothing a kernel computes (after checking it is a
    power of two, as the GPU compiler does)."""
    import sys

    from numba.cuda import types as numba_types
    from numba.cuda.np import numpy_support
    from numba.cuda.simulator import kernelapi

    def checked(alignment):
        if alignment is not None and (int(alignment) < 1 or int(alignment) & (int(alignment) - 1)):
            raise ValueError(f"alignment must be a power of two, not {alignment}")

    local_array = kernelapi.FakeCUDALocal.array

    def local(self, shape, dtype, alignment=None):
        checked(alignment)
        return local_array(self, shape, dtype)

    def shared(self, shape, dtype, alignment=None):
        """As the simulator's own: one array per block for each line of source that declares one
        (the line found from the caller's frame), all the threads of the block sharing it."""
        checked(alignment)
        if isinstance(dtype, numba_types.Type):
            dtype = numpy_support.as_dtype(dtype)
        if shape == 0:  # dynamic shared memory: one buffer for all
            return np.frombuffer(self._dynshared.data, dtype=dtype, count=self._dynshared_size // dtype.itemsize)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        res = self._allocations.get(caller)
        if res is None:  # setdefault is one step under the GIL: threads arriving together get one array
            res = self._allocations.setdefault(caller, np.empty(shape, dtype))
        return res

    kernelapi.FakeCUDALocal.array = local
    kernelapi.FakeCUDAShared.array = shared


# -- what the rest of gpulib needs of the simulator's insides (nowhere else are they named)


def device_view(a, transform):
    """A simulator device array whose NumPy array is ``transform(a's array)`` (a view: the same memory)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return FakeCUDAArray(transform(a._ary))


def block_thread_type() -> type:
    """The class of the simulator's threads (one per CUDA thread of a block)."""
    from numba.cuda.simulator.kernel import BlockThread

    return BlockThread


def fake_kernel(fn, device: bool = False):
    """``fn`` as a simulator kernel (or device function), whichever backend Numba runs."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return FakeCUDAKernel(fn, device=device)


@contextlib.contextmanager
def routed(shared_array, atomic, barrier):
    """Inside the block, a kernel's ``cuda.shared.array(shape, dtype)`` calls ``shared_array(shape,
    dtype, frame)`` (the declaring frame), ``cuda.atomic.<op>`` calls ``atomic(op, the simulator's
    own)`` for the function to use, and ``cuda.syncthreads()`` calls ``barrier()`` first."""
    from numba.cuda.simulator import kernelapi

    class Shared:
        def __init__(self, inner):
            self._inner = inner

        def array(self, shape, dtype, alignment=None):
            return shared_array(shape, dtype, sys._getframe(1))

    class Atomic:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, op):
            return atomic(op, getattr(self._inner, op))

    module = kernelapi.FakeCUDAModule
    original = module.shared, module.atomic, module.syncthreads

    def syncthreads(self):
        barrier()
        original[2](self)

    module.shared = property(lambda self: Shared(self._shared))
    module.atomic = property(lambda self: Atomic(self._atomic))
    module.syncthreads = syncthreads
    try:
        yield
    finally:
        module.shared, module.atomic, module.syncthreads = original
