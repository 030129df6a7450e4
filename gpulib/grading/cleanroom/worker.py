"""The untrusted side of the clean room: ``python -m gpulib.grading.cleanroom.worker`` (in a sandbox).

It screens the solution cells, runs them in a namespace of their own (the setup cell's names
minus the grader's: no ``reference``, no ``gpulib``, the grading module reduced to its launch
helpers; builtins without ``open``, ``getattr``, ``eval``...; imports limited to
``screen.ALLOWED_IMPORTS``), then answers the judge's requests: launch a kernel on fresh inputs,
trace it, call a function, read an attribute. Everything it answers is data (outputs, the
tracer's record, what a call observed); the verdict is the judge's.

Its protocol pipe is a private copy of the standard output it was started with; a solution's
``print`` goes to standard error.
"""

from __future__ import annotations

import builtins
import linecache
import os
import sys
import traceback

import numpy as np

from gpulib.grading.cleanroom import channel, screen

FORBIDDEN_MODULE_PREFIXES = ("gpulib.grading", "gpulib.reference", "gpulib.trace", "gpulib.env", "gpulib._backend",
                             "gpulib.simulator", "gpulib.source", "gpulib.bench")
ALLOWED_MODULES = ("numpy", "math", "cmath", "gpulib.tensorcore.wmma")


_ALLOWED_PACKAGES = {name.split(".")[0] for name in screen.ALLOWED_IMPORTS if not name.startswith("gpulib")}


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    """The import statement of a solution's namespace. NumPy's C code imports its own submodules
    through it too (``ndarray.all`` does), so a package's submodules pass where the package does."""
    if level or (name not in screen.ALLOWED_IMPORTS and name.split(".")[0] not in _ALLOWED_PACKAGES):
        raise ImportError(f"'{name}'은(는) 풀이에서 가져올 수 없다 (쓸 수 있는 모듈: {', '.join(sorted(screen.ALLOWED_IMPORTS))})")
    return builtins.__import__(name, globals, locals, fromlist, level)


def student_builtins() -> dict:
    allowed = {k: v for k, v in vars(builtins).items() if k not in screen.FORBIDDEN_BUILTINS}
    allowed["__import__"] = _guarded_import
    allowed["__build_class__"] = builtins.__build_class__
    return allowed


class GraderError(Exception):
    """Not the student's fault: the grading machine lacks something (NVVM, say). The judge
    reports it to the instructor instead of taking points."""


class Facade:
    """A grading module as a solution sees it: its constants and launch-configuration helpers."""

    __slots__ = ("_names",)

    def __init__(self, module):
        names = {k: v for k, v in vars(module).items()
                 if not k.startswith("_") and (k.isupper() or (callable(v) and (k.endswith("_grid") or k.startswith("run_"))))}
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name):
        names = object.__getattribute__(self, "_names")
        if name in names:
            return names[name]
        raise AttributeError(f"채점 모듈의 '{name}'은(는) 풀이에서 쓸 수 없다")

    def __setattr__(self, name, value):
        raise AttributeError("채점 모듈은 바꿀 수 없다")


class Worker:
    def __init__(self):
        self.ns: dict = {}
        self.objects: dict[int, object] = {}

    # -- handles
    def handle(self, obj) -> int:
        key = id(obj)
        self.objects[key] = obj
        return key

    @staticmethod
    def kind(obj) -> str:
        options = getattr(obj, "targetoptions", None)
        if options is not None and hasattr(obj, "py_func"):
            return "device_function" if options.get("device") else "kernel"
        fake_device = getattr(obj, "_device", None)
        if type(obj).__name__ == "FakeCUDAKernel":
            return "device_function" if fake_device else "kernel"
        if isinstance(obj, type):
            return "class"
        if callable(obj):
            return "function"
        return "value"

    def plain(self, value, depth=0):
        """``value`` as data the judge can rebuild, or ("handle", id, kind) for anything else."""
        from gpulib.arrays import is_device_array, to_host

        if depth > 20:
            raise ValueError("too deeply nested")
        if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
            return value
        if isinstance(value, np.generic):
            return value if value.dtype.kind != "O" else ("handle", self.handle(value), "value")
        if isinstance(value, np.ndarray):
            return np.array(value) if value.dtype.kind != "O" else ("handle", self.handle(value), "value")
        if is_device_array(value):
            return to_host(value)
        if type(value) in (tuple, list):
            items = [self.plain(v, depth + 1) for v in value]
            return ("tuple", tuple(items)) if type(value) is tuple else ("list", items)
        if type(value) is dict and all(isinstance(k, (str, int)) for k in value):
            return ("dict", {k: self.plain(v, depth + 1) for k, v in value.items()})
        return ("handle", self.handle(value), self.kind(value))

    # -- loading the solutions
    def _student_namespace(self, setup: dict) -> dict:
        ns = {"__builtins__": student_builtins(), "__name__": "__solution__"}
        for name, value in setup.items():
            if name.startswith("_"):
                continue
            if isinstance(value, type(np)):
                module = value.__name__
                if module.startswith("gpulib.grading."):
                    ns[name] = Facade(value)
                elif module.startswith("numba") or module in ALLOWED_MODULES:
                    ns[name] = value
                continue
            owner = getattr(value, "__module__", None) or ""
            if isinstance(owner, str) and owner.startswith(FORBIDDEN_MODULE_PREFIXES):
                continue
            ns[name] = value
        return ns

    def load(self, setup_source: str, solutions: list) -> dict:
        setup_ns: dict = {"__name__": "__setup__"}
        exec(compile(setup_source, "<setup>", "exec"), setup_ns)
        self.ns = self._student_namespace(setup_ns)
        cells = {}
        for grade_id, source in solutions:
            refused = [str(r) for r in screen.screen(source)]
            cell = {"refused": refused, "error": None, "names": {}}
            if not refused:
                filename = f"<solution {grade_id}>"
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                try:
                    exec(compile(source, filename, "exec"), self.ns)
                except BaseException as exc:  # noqa: BLE001  (the student's code: any failure is theirs)
                    cell["error"] = (type(exc).__name__, f"{type(exc).__name__}: {exc}")
            for name in screen.defined_names(source):
                if name in self.ns and not cell["refused"]:
                    value = self.ns[name]
                    cell["names"][name] = (self.handle(value), self.kind(value))
            cells[grade_id] = cell
        return {"cells": cells}

    # -- requests
    def launch(self, handle, grid, block, inputs, outputs, scalars, what):
        from gpulib.arrays import to_device
        from gpulib.grading import core

        kernel = self.objects[handle]
        ready = {}
        for name, value in inputs.items():
            if isinstance(value, core.GuardedView):
                ready[name] = to_device(value.base)[value.index]
            else:
                ready[name] = value
        return {"outputs": core.launched(kernel, grid, block, ready, outputs, scalars, what=what)}

    def time(self, handle, reference, grid, block, inputs, outputs, scalars, fresh, what):
        from gpulib.grading import core

        mine, theirs, out = core.time_against(self.objects[handle], reference, grid, block, inputs, outputs, scalars,
                                              fresh, what)
        return {"student_ms": float(mine), "reference_ms": float(theirs), "outputs": out}

    def trace(self, handle, grid, block, args, what):
        from gpulib.grading import core

        t = core.traced(self.objects[handle], grid, block, args, what)
        return {"trace": t, "args": {k: v for k, v in args.items() if isinstance(v, np.ndarray)}}

    def call(self, handle, args, kwargs, what, watch_allocations=False, out_args=()):
        from gpulib.grading import core

        fn = self.objects[handle]
        args = [self.objects[a[1]] if isinstance(a, tuple) and len(a) == 2 and a[0] == "handle" else a for a in args]
        seen = None
        if watch_allocations:
            with core.allocations() as seen:
                result = core.called(fn, *args, what=what, **kwargs)
        else:
            result = core.called(fn, *args, what=what, **kwargs)
        sgemm = [[x if isinstance(x, tuple) else self.plain(x) for x in call] for call in core.OBSERVED["sgemm"]]
        return {"result": self.plain(result), "args": {i: np.array(args[i]) for i in out_args if isinstance(args[i], np.ndarray)},
                "allocations": dict(seen) if seen is not None else None, "sgemm": sgemm}

    def getattr(self, handle, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return {"value": self.plain(getattr(self.objects[handle], attr))}

    def serve(self, requests: int, answers: int) -> None:
        from gpulib.grading.core import Mistake, explain_exception

        while True:
            try:
                request = channel.receive_trusted(requests)
            except channel.ChannelClosed:
                return
            op = request.pop("op")
            try:
                answer = getattr(self, op)(**request)
            except Mistake as m:
                answer = {"error": (m.kind, str(m).split("] ", 1)[-1])}
            except GraderError as exc:
                answer = {"grader_error": str(exc)}
            except BaseException as exc:  # noqa: BLE001
                m = explain_exception(exc, request.get("what", "풀이"))
                answer = {"error": (m.kind, str(m).split("] ", 1)[-1]),
                          "detail": "".join(traceback.format_exception_only(type(exc), exc))[-2000:]}
            channel.send(answers, answer)


def start_restricted() -> None:
    """Before any solution runs: the GPU initialised (if any), then Landlock if the sandbox left
    it to this process (``sandbox.restrict_late``)."""
    from gpulib.env import BACKEND_CHOICE, cuda, on_gpu
    from gpulib.grading.cleanroom import sandbox

    if on_gpu() and not BACKEND_CHOICE.compile_only:
        cuda.current_context()
    sandbox.restrict_late()


def main() -> None:
    start_restricted()
    answers = os.dup(1)  # the protocol's pipe; what the solution prints goes to standard error
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    Worker().serve(0, answers)


if __name__ == "__main__":
    main()
