"""The trusted side of the clean room: the instructor's checks, run on proxies of the student's code.

    verdicts = grade_notebook(submitted_nb, source_nb)   # {grade_id of each test cell: Verdict}

The setup cell and the test cells come from the instructor's source notebook, the solution
cells (by grade_id) from the submission. The solutions run in a sandboxed worker
(``worker.py``); here each name they define is a ``RemoteObject``, which the checks of
``gpulib.grading`` launch, trace and call through ``core`` exactly as they would a local kernel:
inputs go to the worker, outputs come back as data, and the comparison with the float64
reference happens in this process. Before a kernel's first launch it must be a ``cuda.jit``
kernel and compile for compute capability 9.0 (``compile.py``, in a second sandbox).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from gpulib.env import number_setting
from gpulib.grading import core
from gpulib.grading.cleanroom import channel, sandbox, screen
from gpulib.grading.core import Mistake

MEMORY_LIMIT = number_setting("GPULIB_CLEANROOM_MEMORY", 8 << 30, integer=True)  # bytes, on the simulator
CPU_LIMIT = number_setting("GPULIB_CLEANROOM_CPU_S", 1800, integer=True)
# how long past the checks' own limit (core.TIMEOUT_S, which the worker applies to a simulated
# kernel itself) the judge waits for an answer before it stops the worker: Python that never returns
MARGIN_S = number_setting("GPULIB_CLEANROOM_MARGIN_S", 10.0)


@dataclass
class Verdict:
    grade_id: str
    passed: bool
    kind: str = ""
    message: str = ""
    stdout: str = ""
    score: float | None = None  # the points a speed check gave (a number the cell returned); None: all or nothing
    traceback: list = field(default_factory=list)


class Session:
    """One sandboxed process holding the solutions: the worker, or the compiler."""

    def __init__(self, setup: str, solutions: list, module: str, backend: str, label: str):
        self.setup, self.solutions, self.module, self.backend, self.label = setup, solutions, module, backend, label
        self.process = None
        self.cells: dict = {}
        self.folder = None

    def start(self):
        self.folder = tempfile.mkdtemp(prefix=f"gpulib-cleanroom-{self.label}-")
        os.chmod(self.folder, 0o755)
        # the folder holding this gpulib, so that the worker imports the same one as the judge
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env = dict(os.environ, GPULIB_BACKEND=self.backend,
                   PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p))
        memory = MEMORY_LIMIT if self.backend == "sim" else 0  # CUDA reserves far more address space than it uses
        # on a GPU the worker restricts its writes itself once the driver is up (sandbox.restrict_late)
        argv = sandbox.command(self.folder, [sys.executable, "-m", self.module], CPU_LIMIT, memory,
                               landlock=self.backend != "gpu")
        self._log = open(os.path.join(tempfile.gettempdir(), f"{os.path.basename(self.folder)}.log"), "wb")
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                        env=env, start_new_session=True)
        answer = self._request({"op": "load", "setup_source": self.setup, "solutions": self.solutions}, timeout=600)
        self.cells = answer["cells"]

    def log_tail(self) -> str:
        try:
            with open(self._log.name, "rb") as f:
                return f.read()[-3000:].decode(errors="replace")
        except OSError:
            return ""

    def _request(self, message: dict, timeout: float):
        try:
            channel.send(self.process.stdin.fileno(), message)
            return channel.receive_untrusted(self.process.stdout.fileno(), timeout)
        except channel.ChannelTimeout:
            self.stop()
            raise Mistake("timeout", f"{message.get('what', '풀이')}: {timeout:.0f}초 안에 답하지 않아 채점실의 프로세스를 "
                                     f"멈췄다. 끝나지 않는 반복문이나 일부 스레드만 지나는 장벽을 찾아보라.") from None
        except (channel.ChannelClosed, BrokenPipeError, OSError) as exc:
            tail = self.log_tail()
            self.stop()
            raise Mistake("crash", f"{message.get('what', '풀이')}: 채점실의 프로세스가 끝나 버렸다 ({type(exc).__name__}). "
                                   f"메모리나 CPU 시간 한도를 넘었거나 프로세스를 끝내는 코드가 있다.\n{tail[-800:]}") from None

    def request(self, op: str, timeout: float | None = None, **fields):
        if self.process is None or self.process.poll() is not None:
            self.start()
        # the worker stops a simulated kernel after TIMEOUT_S itself; Python that never returns (or a
        # kernel hung on a GPU) is stopped here, with the whole worker, which the next request restarts
        answer = self._request({"op": op, **fields}, timeout or core.TIMEOUT_S + MARGIN_S)
        if "grader_error" in answer:
            raise RuntimeError(f"the grading machine cannot grade this: {answer['grader_error']}")
        if "error" in answer:
            kind, message = answer["error"]
            raise Mistake(str(kind), str(message))
        return answer

    def handle_of(self, name: str):
        if self.process is None or self.process.poll() is not None:
            self.start()
        for cell in self.cells.values():
            if name in cell["names"]:
                return cell["names"][name]
        raise Mistake("missing", f"'{name}'이(가) 풀이에 정의되어 있지 않다")

    def stop(self):
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
            self._log.close()
            self.process = None
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _type_of(value, layout="C"):
    if isinstance(value, core.GuardedView):
        return ("array", value.base.dtype.str, value.base[value.index].ndim, "A")
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.ndim, "C" if value.flags.c_contiguous else "A")
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple):  # an output: (shape, dtype)
        return ("array", np.dtype(value[1]).str, len(value[0]), "C")
    if isinstance(value, (bool, np.bool_)):
        return ("scalar", "bool")
    if isinstance(value, (int, np.integer)):
        return ("scalar", "int64")
    return ("scalar", "float64")


class Judge:
    def __init__(self, setup: str, solutions: list, compile_kernels: bool = True):
        from gpulib.env import BACKEND

        self.worker = Session(setup, solutions, "gpulib.grading.cleanroom.worker", BACKEND, "worker")
        self.compiler = Session(setup, solutions, "gpulib.grading.cleanroom.compile", "ptx", "compile") \
            if compile_kernels else None
        self.compiled: dict = {}

    def close(self):
        self.worker.stop()
        if self.compiler:
            self.compiler.stop()

    def decode(self, value, name="값"):
        if isinstance(value, tuple) and value and isinstance(value[0], str):
            tag = value[0]
            if tag == "tuple":
                return tuple(self.decode(v) for v in value[1])
            if tag == "list":
                return [self.decode(v) for v in value[1]]
            if tag == "dict":
                return {k: self.decode(v) for k, v in value[1].items()}
            if tag == "handle":
                return RemoteObject(self, None, value[1], value[2], name)
        return value

    def require_compiles(self, remote: "RemoteObject", types: list, what: str) -> list:
        """The kernel compiles to PTX for compute capability 9.0; returns the functions its PTX calls."""
        if self.compiler is None or remote.name is None:
            return []
        key = (remote.name, tuple(types))
        if key not in self.compiled:
            handle, _ = self.compiler.handle_of(remote.name)
            self.compiled[key] = self.compiler.request("ptx", timeout=600, handle=handle, types=types, what=what)["calls"]
        return self.compiled[key]


class RemoteObject(core.Remote):
    """A name of the student's solution (or an object a call returned) in the worker."""

    def __init__(self, judge: Judge, name: str | None, handle=None, kind: str = "", label: str = ""):
        object.__setattr__(self, "_state", {"judge": judge, "name": name, "handle": handle, "kind": kind,
                                            "label": label or name or "값"})

    name = property(lambda self: self._state["name"])

    def _resolve(self):
        s = self._state
        if s["name"] is not None:
            s["handle"], s["kind"] = s["judge"].worker.handle_of(s["name"])
        return s["handle"], s["kind"]

    def _kernel(self, what, types):
        handle, kind = self._resolve()
        if kind != "kernel":
            raise Mistake("not_a_kernel", f"{what}: '{self._state['label']}'은(는) CUDA 커널이 아니다 ({kind}). 이 문제는 "
                                          f"@cuda.jit 커널을 쓰는 것이다: 호스트에서 NumPy로 계산한 값은 점수가 없다.")
        calls = self._state["judge"].require_compiles(self, types, what)
        return handle, calls

    def remote_launch(self, grid, block, inputs, outputs, scalars, what):
        types = [_type_of(v) for v in inputs.values()] + [_type_of(v) for v in outputs.values()] + \
                [_type_of(v) for v in scalars]
        handle, calls = self._kernel(what, types)
        self._state["calls"] = calls
        answer = self._state["judge"].worker.request("launch", handle=handle, grid=grid, block=block, inputs=inputs,
                                                     outputs=outputs, scalars=scalars, what=what)
        return {name: np.asarray(answer["outputs"][name]) for name in outputs}

    def remote_time(self, reference, grid, block, inputs, outputs, scalars, fresh, what):
        types = [_type_of(v) for v in inputs.values()] + [_type_of(v) for v in outputs.values()] + \
                [_type_of(v) for v in scalars]
        handle, _ = self._kernel(what, types)
        answer = self._state["judge"].worker.request("time", timeout=core.TIMEOUT_S + 300, handle=handle,
                                                     reference=reference, grid=grid, block=block, inputs=inputs,
                                                     outputs=outputs, scalars=scalars, fresh=fresh, what=what)
        return (float(answer["student_ms"]), float(answer["reference_ms"]),
                {name: np.asarray(answer["outputs"][name]) for name in outputs})

    def remote_trace(self, grid, block, args, what):
        handle, calls = self._kernel(what, [_type_of(v) for v in args.values()])
        self._state["calls"] = calls
        answer = self._state["judge"].worker.request("trace", handle=handle, grid=grid, block=block, args=args, what=what)
        from gpulib.trace import Trace

        if not isinstance(answer["trace"], Trace):
            raise Mistake("crash", f"{what}: 추적 기록이 오지 않았다")
        return answer["trace"], {k: v for k, v in answer["args"].items() if k in args and isinstance(v, np.ndarray)}

    def remote_call(self, args, kwargs, what, out_args=()):
        handle, kind = self._resolve()
        if kind == "kernel":
            raise Mistake("not_a_function", f"{what}: '{self._state['label']}'은(는) 커널이다. 여기서는 파이썬 함수를 써야 한다.")
        sent = [("handle", a._resolve()[0]) if isinstance(a, RemoteObject) else a for a in args]
        answer = self._state["judge"].worker.request("call", handle=handle, args=sent, kwargs=kwargs, what=what,
                                                     watch_allocations=core.watching_allocations(), out_args=tuple(out_args))
        for i, array in answer["args"].items():
            if i in out_args and isinstance(array, np.ndarray) and isinstance(args[i], np.ndarray) \
                    and array.shape == args[i].shape:
                args[i][...] = array
        if answer.get("allocations"):
            seen = answer["allocations"]
            core.report_allocation(int(seen["largest"]), str(seen["where"]), int(seen.get("total", 0)))
        core.OBSERVED["sgemm"] = [list(call) for call in answer.get("sgemm", [])]
        return self._state["judge"].decode(answer["result"], what)

    def identity(self):
        return id(self._state["judge"]), self._resolve()[0]

    def ptx_calls(self) -> list:
        """The functions the kernel's PTX calls (after its first launch), e.g. the WMMA loads."""
        return list(self._state.get("calls", []))

    def __call__(self, *args, **kwargs):
        return core.called(self, *args, what=self._state["label"], **kwargs)

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        handle, _ = self._resolve()
        value = self._state["judge"].worker.request("getattr", handle=handle, attr=attr)["value"]
        return self._state["judge"].decode(value, f"{self._state['label']}.{attr}")

    def __setattr__(self, attr, value):
        raise AttributeError("a remote object is read-only")

    def __repr__(self):
        return f"<the student's {self._state['label']} ({self._state['kind']}), in the clean room>"


class Unavailable(core.Remote):
    """A name whose cell was refused by the screen or failed: every use is that mistake."""

    def __init__(self, kind: str, message: str):
        object.__setattr__(self, "_mistake", (kind, message))

    def _raise(self, *args, **kwargs):
        raise Mistake(*self._mistake)

    remote_launch = remote_trace = remote_call = identity = __call__ = _raise

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        self._raise()


def _cells(nb) -> list:
    return [c for c in nb["cells"] if c.get("cell_type") == "code"]


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def notebook_parts(submitted, source):
    """(setup, [(grade_id, solution source)], [(grade_id, test source, points)]): the setup and the
    tests from the instructor's ``source``, the solutions (by grade_id) from ``submitted``."""
    code = _cells(source)
    setup = _source(code[0])
    given = {_meta(c).get("grade_id"): _source(c) for c in _cells(submitted) if _meta(c).get("solution")}
    solutions, tests = [], []
    for cell in code:
        meta = _meta(cell)
        if meta.get("solution"):
            solutions.append((meta["grade_id"], given.get(meta["grade_id"], "")))
        elif meta.get("grade"):
            tests.append((meta["grade_id"], _source(cell), float(meta.get("points", 0))))
    return setup, solutions, tests


def grade_parts(setup: str, solutions: list, tests: list, compile_kernels: bool = True) -> dict:
    judge = Judge(setup, solutions, compile_kernels)
    verdicts = {}
    try:
        namespace: dict = {"__name__": "__judge__"}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(setup, "<setup>", "exec"), namespace)
        trusted = set(namespace)
        try:
            cells = judge.worker.cells or (judge.worker.start() or judge.worker.cells)
        except Mistake as m:
            cells = {gid: {"refused": [], "error": (m.kind, str(m)), "names": {}} for gid, _ in solutions}
        for grade_id, source in solutions:
            cell = cells.get(grade_id, {"refused": ["셀이 없다"], "error": None, "names": {}})
            if cell["refused"]:
                unavailable = Unavailable("refused", f"풀이 셀 '{grade_id}'을(를) 실행하지 않았다: " + "; ".join(cell["refused"]))
            elif cell["error"]:
                unavailable = Unavailable("error", f"풀이 셀 '{grade_id}'이(가) 실행 중에 실패했다: {cell['error'][1]}")
            elif not source.strip():
                unavailable = Unavailable("not_done", f"풀이 셀 '{grade_id}'이(가) 비어 있다")
            else:
                unavailable = None
            for name in screen.defined_names(source):
                if name in trusted:  # a solution never replaces what the setup gave the checks (grade, reference...)
                    continue
                if unavailable is None and name in cell["names"]:
                    namespace[name] = RemoteObject(judge, name, *cell["names"][name])
                else:
                    namespace[name] = unavailable or Unavailable("missing", f"'{name}'이(가) 정의되지 않았다")
        for grade_id, source, _points in tests:
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    result = eval_cell(source, namespace)
                verdicts[grade_id] = Verdict(grade_id, True, stdout=out.getvalue(),
                                             score=float(result) if isinstance(result, (int, float)) else None)
            except Mistake as m:
                verdicts[grade_id] = Verdict(grade_id, False, m.kind, str(m), out.getvalue())
            except Exception as exc:  # noqa: BLE001  (a check that broke: no points, and the instructor sees why)
                verdicts[grade_id] = Verdict(grade_id, False, "grader_error", f"{type(exc).__name__}: {exc}", out.getvalue(),
                                             traceback=traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    finally:
        judge.close()
    return verdicts


def eval_cell(source: str, namespace: dict):
    """Run a test cell; the value of its last line if that is an expression (a partial score)."""
    import ast

    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<test>", "exec"), namespace)
    if last is not None:
        return eval(compile(ast.Expression(last.value), "<test>", "eval"), namespace)
    return None


def grade_notebook(submitted, source, compile_kernels: bool = True) -> dict:
    """{test cell grade_id: Verdict} of a submitted notebook (nbformat dicts)."""
    start = time.monotonic()
    verdicts = grade_parts(*notebook_parts(submitted, source), compile_kernels=compile_kernels)
    grade_notebook.last_seconds = time.monotonic() - start
    return verdicts
