"""How Numba's CUDA simulator schedules a block's threads here (every section's simulator runs).

``install()`` runs the threads of a kernel whose code names no barrier one after another in one
Python thread (CUDA promises no order among a block's threads, so this is one execution a GPU
may produce; about 4 to 5 times faster than a Python thread each). The block of a kernel with
barriers also runs in one Python thread, its CUDA threads as greenlets (coroutines) that take
turns: each runs until it waits at a barrier (or in ``wait_until``, the emulated mbarrier and
warpgroup waits) and the barrier lets them go on once every live thread is there; about 2.5
times faster than the Python thread per CUDA thread the simulator starts, and a wait that no
thread can end is an error at once, not a hang. ``install()`` also accepts ``alignment=`` on
shared and local arrays. It also holds what the rest of gpulib needs of the simulator's
insides (launch interception, device-array views, the tracer's routing). What must stay true:
this module and gpulib/launch.py are the only ones that name Numba's private parts; a barrier
reached in a kernel run sequentially is an error, never a wrong answer.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import types
from functools import lru_cache

import numpy as np

BARRIER_NAMES = frozenset({"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or",
                           "this_grid", "cg", "wait_until"})  # wait_until: the emulated waits on other threads

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


_AT_BARRIER = object()  # what a thread waiting at __syncthreads() waits for


def wait_until(ready, what) -> None:
    """Emulation: wait, in a kernel's thread, for the other threads of its block to make
    ``ready()`` true (an mbarrier phase, a warpgroup's multiply). The block's other threads run
    meanwhile; when none of them can run any more and ``ready()`` is still false, the wait is a
    RuntimeError(``what``): on a GPU it would never end. ``what`` is the message, or a function
    that makes it (only a wait that fails needs one)."""
    if ready():
        return
    thread = threading.current_thread()
    if not hasattr(thread, "wait_in_block"):  # a block run one thread after another: nobody else can
        raise RuntimeError(f"{_message(what)} (the simulator ran this block's threads one after another, "
                           "finding no barrier in the kernel's code)")
    thread.wait_in_block(ready, what)


def _message(what) -> str:
    return what() if callable(what) else what


@lru_cache(maxsize=None)
def _cooperative_block_type() -> type:
    from greenlet import getcurrent, greenlet
    from numba.cuda.simulator.kernel import BlockThread
    from numba.cuda.simulator.kernelapi import Dim3

    class CooperativeBlock(BlockThread):
        """One block of a kernel with barriers: one Python thread in which each CUDA thread is a
        greenlet (a coroutine with its own stack). A thread runs until it waits (a barrier, or
        ``wait_until``) or returns; then the next one runs. A barrier lets its threads go on
        once every thread still alive waits at it (a thread that has returned no longer
        counts); the first exception stops the block, and names the thread that raised it.
        Nothing here waits on the operating system: a switch to a greenlet and back costs about
        a microsecond, where waking a Python thread per CUDA thread at every barrier cost the
        block most of its time."""

        def __init__(self, manager, grid_point, args):
            super().__init__(self._schedule, manager, grid_point, (0, 0, 0), manager._debug)
            self._kernel_args, self._scheduler, self._waits_for = args, None, None

        def _enter(self, point, width, height):
            """What ``cuda.threadIdx`` (and the tracer, and an error's message) read: this thread's."""
            self.threadIdx = Dim3(*point)
            self.thread_id = point[0] + width * (point[1] + height * point[2])
            self._waits_for = None

        def _schedule(self):
            manager, args = self._manager, self._kernel_args
            width, height, _ = manager._block_dim
            points = list(np.ndindex(*manager._block_dim))
            self._scheduler = getcurrent()
            threads = [greenlet(lambda: manager._f(*args)) for _ in points]
            for thread in threads:  # each starts in this thread's context (NumPy's error state: debug=True's)
                thread.gr_context = contextvars.copy_context()
            waits = [None] * len(points)  # None (may run), _AT_BARRIER, or (ready, what)
            live = list(range(len(points)))
            try:
                while live:
                    ran, still = False, []
                    for i in live:
                        wait = waits[i]
                        if wait is _AT_BARRIER or (wait is not None and not wait[0]()):
                            still.append(i)
                            continue
                        self._enter(points[i], width, height)
                        threads[i].switch()  # until it waits (what it waits for is set) or returns
                        waits[i], ran = self._waits_for, True
                        if not threads[i].dead:
                            still.append(i)
                    live = still
                    if live and all(waits[i] is _AT_BARRIER for i in live):
                        for i in live:
                            waits[i] = None  # the barrier is passed
                    elif live and not ran:  # every thread waits, and no barrier is complete: stuck
                        i = next(i for i in live if waits[i] is not _AT_BARRIER)
                        self._enter(points[i], width, height)
                        threads[i].throw(RuntimeError(_message(waits[i][1])))  # raised where it waits
                        waits[i] = self._waits_for  # (a kernel that caught it waits again, or has returned)
                        if threads[i].dead:
                            live.remove(i)
            finally:
                for thread in threads:  # the others, stopped where they wait (a greenlet left
                    if thread and not thread.dead:  # suspended would be unwound later, elsewhere)
                        try:
                            thread.throw()
                        except BaseException:
                            pass

        def _wait(self, what):
            self._waits_for = what
            self._scheduler.switch()

        def syncthreads(self):
            self._wait(_AT_BARRIER)

        def wait_in_block(self, ready, what):
            self._wait((ready, what))

    return CooperativeBlock


def _threaded_run(manager, grid_point, *args) -> None:
    """The simulator's BlockManager.run for a kernel with barriers: the block's CUDA threads as
    greenlets of one Python thread (``CooperativeBlock``), not a Python thread each."""
    block = _cooperative_block_type()(manager, grid_point, args)
    block.start()
    block.join()
    if block.exception:
        raise block.exception[0].with_traceback(block.exception[1])


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
