"""Launching kernels: the one hook every launch passes through, and the bound launch.

    with launch.watching(watcher):        # 16.6's profiler and recorder are watchers
        ...                               # every kernel launch and library call reaches it
    bound = BoundLaunch(kernel, grid, block, shared_bytes)
    bound(X, Y, 3)                        # later calls with the same layout skip Numba's typing

What must stay true: this module (Numba's dispatcher, driver, device arrays and compiler) and
gpulib/simulator.py (the simulator's kernels and arrays) are the only ones that touch Numba's
private names; it imports nothing of gpulib but env and the simulator.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from gpulib.env import on_gpu


@dataclass
class Launch:
    """One launch as a watcher sees it: ``go()`` runs it (through the watchers further in),
    ``again()`` launches the same thing anew from the top (what a recording replays)."""

    name: str
    grid: object
    block: object
    args: tuple
    go: Callable
    again: Callable
    kind: str = "kernel"  # or "library"


class Watcher:
    """What ``watching`` calls; every method may be left as it is here."""

    def launch(self, call: Launch):
        """Around every kernel launch and library call: must return ``call.go()``."""
        return call.go()

    def prepared(self, name: str, prepared: tuple) -> None:
        """On a GPU: what reached cuda.core for a kernel launch, (stream, config, kernel, values)."""


_WATCHERS: list[Watcher] = []
_NAMES: list[str] = []  # the kernel whose launch is on its way to cuda.core
_UNDO: list[Callable] = []


def _through(call: Launch, at: int = 0):
    """``call`` through the watchers from the ``at``-th inwards, then the launch itself."""
    if at >= len(_WATCHERS):
        return call.go()
    return _WATCHERS[at].launch(replace(call, go=lambda: _through(call, at + 1)))


def _install() -> None:
    if on_gpu():
        from numba.cuda import dispatcher

        configured, core = dispatcher._LaunchConfiguration.__call__, dispatcher.launch

        def watched_launch(config, *args):
            name = config.dispatcher.py_func.__name__
            _NAMES.append(name)
            try:
                return _through(Launch(name, config.griddim, config.blockdim, args,
                                       lambda: configured(config, *args), lambda: config(*args)))
            finally:
                _NAMES.pop()

        def watched_core(stream, config, kernel, *values):
            for watcher in list(_WATCHERS):
                watcher.prepared(_NAMES[-1] if _NAMES else "kernel", (stream, config, kernel, values))
            return core(stream, config, kernel, *values)

        dispatcher._LaunchConfiguration.__call__ = watched_launch
        dispatcher.launch = watched_core
        _UNDO.append(lambda: setattr(dispatcher._LaunchConfiguration, "__call__", configured))
        _UNDO.append(lambda: setattr(dispatcher, "launch", core))
    else:
        from gpulib import simulator

        def watched_sim(kernel, args, go):
            grid, block, shared = kernel.grid_dim, kernel.block_dim, kernel.dynshared_size  # configured in place
            return _through(Launch(kernel.fn.__name__, grid, block, args, go,
                                   lambda: kernel[grid, block, 0, shared](*args)))

        _UNDO.append(simulator.intercept_launches(watched_sim))


@contextlib.contextmanager
def watching(watcher: Watcher):
    """Every kernel launch and library call inside the block passes through ``watcher`` (watchers
    nest: the first one entered is outermost)."""
    if not _WATCHERS:
        _install()
    _WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        _WATCHERS.remove(watcher)
        if not _WATCHERS:
            while _UNDO:
                _UNDO.pop()()


@contextlib.contextmanager
def unwatched():
    """No watcher sees what launches inside the block (a profiler's own waiting kernel)."""
    saved = list(_WATCHERS)
    _WATCHERS.clear()
    try:
        yield
    finally:
        _WATCHERS.extend(saved)


def library_call(name: str, threads: int, args: tuple, fn: Callable):
    """``fn(*args)``, a library's call (cuBLAS), seen by the watchers as a launch of ``name``."""
    if not _WATCHERS:
        return fn(*args)
    return _through(Launch(name, (1, 1, 1), (threads, 1, 1), args, lambda: fn(*args),
                           lambda: library_call(name, threads, args, fn), "library"))


def replay_prepared(prepared: tuple) -> None:
    """Launch again what a watcher's ``prepared`` saw (GPU): the arguments already converted."""
    from numba.cuda import dispatcher

    stream, config, kernel, values = prepared
    dispatcher.launch(stream, config, kernel, *values)


def threads_of(grid, block) -> int:
    """The number of threads a launch of ``grid`` x ``block`` starts."""
    def total(dims):
        n = 1
        for d in dims if isinstance(dims, tuple) else (dims,):
            n *= int(d)
        return n

    return total(grid) * total(block)


class BoundLaunch:
    """``kernel[grid, block]`` bound once per layout of its arguments: later calls skip Numba's
    typing and argument conversion.

        launch = BoundLaunch(kernel, grid, block)
        launch(X, Y, 3)        # the first call is an ordinary launch, recorded
        launch(X2, Y2, 5)      # same shapes, strides and dtypes: the recorded call with
                               # the arrays' addresses and the scalars put in its slots

    A call with another layout binds afresh; a NumPy argument (which Numba would copy over and
    back) is launched the ordinary way; on the simulator every call is an ordinary launch.
    ``shared`` bytes of dynamic shared memory beyond the default 48 KiB are allowed to the
    compiled kernel first (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)."""

    def __init__(self, kernel, grid, block, shared: int = 0):
        self.kernel, self.grid, self.block, self.shared = kernel, grid, block, shared
        self.name = kernel.py_func.__name__
        self._layout = None
        self._bound = None  # (stream, config, kernel, argument list, slots)
        self._opted_in: set = set()

    @staticmethod
    def _layout_of(args):
        out = []
        for a in args:
            if hasattr(a, "__cuda_array_interface__") and hasattr(a, "gpu_data"):
                out.append((tuple(a.shape), tuple(a.strides), a.dtype))
            elif isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool):
                out.append(type(a))
            else:
                return None  # something this binder does not handle: launch it the ordinary way
        return tuple(out)

    def _allow_shared(self, args) -> None:
        if self.shared <= 48 * 1024:
            return
        from numba.cuda.cudadrv.driver import binding, driver

        compiled = self.kernel.compile(tuple(self.kernel.typeof_pyval(a) for a in args))
        if id(compiled) in self._opted_in:
            return
        function = compiled._codelibrary.get_cufunc()
        attribute = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.cuKernelSetAttribute(attribute, self.shared, function.handle, function.device.id)
        self._opted_in.add(id(compiled))

    def _bind(self, args, layout):
        from numba.cuda import dispatcher

        calls = []
        core = dispatcher.launch
        dispatcher.launch = lambda *a: (calls.append(a), core(*a))[1]
        try:
            self.kernel[self.grid, self.block, 0, self.shared](*args)
        finally:
            dispatcher.launch = core
        places, at = [], 0  # where each argument's value (an array's data pointer) sits in the list
        for kind in layout:
            if isinstance(kind, tuple):  # meminfo, parent, size, itemsize, data, shape..., strides...
                places.append((at + 4, True))
                at += 5 + 2 * len(kind[0])
            else:
                places.append((at, False))
                at += 1
        # this kernel's call: a watcher around the launch may launch something of its own
        mine = [call for call in calls if len(call) == 3 + at]
        if len(mine) != 1:
            self._layout = self._bound = None  # not the argument list this binder expects
            return
        stream, config, cukernel, *values = mine[0]
        slots = [(place, None if is_array else type(values[place])) for place, is_array in places]
        self._layout, self._bound = layout, (stream, config, cukernel, values, slots)

    def bound_for(self, args) -> bool:
        """True when a call with ``args`` takes the bound path (no Numba launch, no compiling)."""
        return on_gpu() and self._layout is not None and self._layout_of(args) == self._layout

    def __call__(self, *args):
        if not on_gpu():
            self.kernel[self.grid, self.block, 0, self.shared](*args)
            return
        layout = self._layout_of(args)
        if layout is None or layout != self._layout:
            self._allow_shared(args)
        if layout is None:
            self.kernel[self.grid, self.block, 0, self.shared](*args)
        elif layout != self._layout:
            self._bind(args, layout)
        else:
            stream, config, cukernel, values, slots = self._bound
            values = list(values)
            for a, (at, convert) in zip(args, slots):
                values[at] = a.gpu_data.device_ctypes_pointer.value if convert is None else convert(a)
            self._launch_prepared(args, stream, config, cukernel, values)

    def _launch_prepared(self, args, stream, config, cukernel, values) -> None:
        from numba.cuda import dispatcher

        def go():
            _NAMES.append(self.name)
            try:
                dispatcher.launch(stream, config, cukernel, *values)  # looked up now: watchers see it
            finally:
                _NAMES.pop()

        if _WATCHERS:
            _through(Launch(self.name, self.grid, self.block, args, go, lambda: self(*args)))
        else:
            go()


# -- Numba's device arrays and compiler, where gpulib needs more than the public API


def strided_view(a, shape: tuple, strides: tuple):
    """A view of a Numba device array (on a GPU) with another shape and strides, the same memory."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    return DeviceNDArray(tuple(shape), tuple(strides), a.dtype, gpu_data=a.gpu_data)


class _CompileOnlyDevice:
    def __init__(self, cc: tuple):
        self.compute_capability = cc
        self.name = f"compute capability {cc[0]}.{cc[1]} (compile only)"


def compile_only(cc: tuple) -> None:
    """Numba's CUDA target without a driver or a GPU: NVVM only (no NVRTC), compiling for ``cc``
    (the clean room's check that a kernel is one: gpulib/grading/cleanroom/compile.py)."""
    import numba.cuda.cuda_paths as cuda_paths
    import numba.cuda.cudadrv.nvrtc as nvrtc
    import numba.cuda.dispatcher as dispatcher

    cuda_paths._get_nvrtc_path = lambda: None
    nvrtc.get_arch_option = lambda major, minor: f"compute_{major}{minor}"
    dispatcher.get_current_device = lambda: _CompileOnlyDevice(cc)
