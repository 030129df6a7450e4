"""What every assignment check is made of: launches that cannot hang, outputs that must all be
written, comparisons that say which element is wrong, and structural checks on the tracer's
record (races, divergent barriers, global reads per block, coalesced writes, atomics, memory).

A check raises ``Mistake`` (an AssertionError, so nbgrader and pytest count it as a failed
test). Its ``kind`` names the mistake in a word ("unwritten", "race", "global_reads"...) and its
message says in Korean what was seen, for which thread or element, and what usually causes
it. The mutation tests plant known wrong answers and assert on ``kind``.

Every check runs in two stages:

1. a traced launch on the simulator at a tiny shape that is not a multiple of the block
   (``trace.trace``, whatever the backend): exceptions, out-of-bounds indices, infinite loops
   (``TIMEOUT_S``), races, divergent barriers and the memory-traffic bounds are found here,
   before anything runs on a GPU;
2. launches on the backend (the GPU when there is one, at larger shapes), on poisoned
   outputs, each compared with a float64 reference.

Hidden checks draw their shapes and values from a fresh seed every time they run (printed in
every failure, so a failure can be reproduced with ``seed=``), and always include sizes of 1
and primes.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from gpulib.arrays import is_device_array, to_device, to_host
from gpulib.check import ValidationError, poisoned, unwritten_mask, validate
from gpulib.env import cuda, number_setting, on_gpu
from gpulib.simulator import ON_CHIP_ARRAY_MODULES as _SIMULATED_ON_CHIP  # where shared/local arrays are made
from gpulib.trace import trace

# One launch on the simulator (or one call of a student's function) gets this long;
# nbgrader's cell timeout (assignments/nbgrader_config.py) is longer.
TIMEOUT_S = number_setting("GPULIB_GRADING_TIMEOUT", 60.0)  # seconds
PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


class Mistake(AssertionError):
    """A check found a wrong answer. ``kind`` names it; the message (Korean) explains it."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"[{kind}] {message}")
        self.kind = kind


class Remote:
    """A kernel, function or object of the student's that lives in the clean room's worker
    process (``cleanroom.judge``): the launches and calls below send it the inputs and read back
    the outputs, so the check's comparisons run where the student's code never did."""

    def remote_launch(self, grid, block, inputs: dict, outputs: dict, scalars: tuple, what: str) -> dict:
        raise NotImplementedError

    def remote_trace(self, grid, block, args: dict, what: str):
        raise NotImplementedError

    def remote_call(self, args: tuple, kwargs: dict, what: str, out_args: tuple = ()):
        raise NotImplementedError

    def remote_time(self, reference: str, grid, block, inputs: dict, outputs: dict, scalars: tuple,
                    fresh: dict, what: str):
        raise NotImplementedError

    def identity(self):
        """What this name is bound to now in the worker (a kernel rebound there is another kernel)."""
        raise NotImplementedError


@dataclass(frozen=True)
class GuardedView:
    """A kernel input that is ``base[index]`` on the device: a view whose neighbours in ``base``
    (NaN guards, say) a kernel reading past its edge would meet."""

    base: np.ndarray
    index: tuple


# what the last call of a student's function was seen doing: its sgemm calls (each a list of
# its arguments, the caller's arrays as ("arg", position)); set by ``called``
OBSERVED: dict = {"sgemm": []}
_ALLOCATION_WATCHES: list[dict] = []


class KernelTimeout(Exception):
    """Raised inside a simulator thread that ran past the launch's time limit."""


# -- seeds and shapes


def new_seed(seed: int | None = None) -> int:
    """``seed`` itself, or a fresh one (hidden checks): printed in every failure message."""
    return int(np.random.SeedSequence().entropy % 2**31) if seed is None else int(seed)


def check_seed(hidden: bool, seed: int | None, visible: int) -> int:
    """The seed a check runs with: ``seed`` if given; else a fresh one for the hidden check, and
    the exercise's fixed ``visible`` seed for the check the student runs."""
    return new_seed(seed if hidden or seed is not None else visible)


def odd_size(rng: np.random.Generator, low: int, high: int, multiple_of: int = 0) -> int:
    """A size in [low, high] that is 1 or a prime where it can be, never a multiple of
    ``multiple_of`` (a block or tile edge) unless it has to be."""
    choices = [n for n in (1,) + PRIMES if low <= n <= high and not (multiple_of > 1 and n % multiple_of == 0)]
    if not choices:
        choices = [n for n in range(low, high + 1) if not (multiple_of > 1 and n % multiple_of == 0)] or [low]
    return int(rng.choice(choices))


def values(rng: np.random.Generator, shape, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Fresh float32 inputs (never zeros, never the same twice)."""
    return rng.uniform(low, high, size=shape).astype(np.float32)


def where(seed: int) -> str:
    return f" (검사 시드 seed={seed})"


# -- pictures


def picture(counts: np.ndarray, title: str):
    """Show a 2-D map of counts (reads or writes per element) when running in a notebook."""
    try:
        from IPython import get_ipython

        if get_ipython() is None:
            return
        import matplotlib.pyplot as plt

        from gpulib.style import use_korean_font
    except ImportError:
        return
    use_korean_font()
    from matplotlib.ticker import MaxNLocator

    counts = np.asarray(counts)
    boolean, ndim = counts.dtype == bool, counts.ndim
    counts = counts.reshape(-1, counts.shape[-1]).astype(float) if counts.ndim > 1 else counts[None, :].astype(float)
    fig, ax = plt.subplots(figsize=(min(10, 2 + 0.35 * counts.shape[1]), min(6, 1.5 + 0.3 * counts.shape[0])))
    image = ax.imshow(counts, cmap="viridis", aspect="auto")
    if not boolean:
        fig.colorbar(image, ax=ax, label="횟수")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("마지막 축의 인덱스")
    ax.set_ylabel({1: "", 2: "첫 축의 인덱스"}.get(ndim, "앞 축들을 펼친 인덱스"))
    ax.set_title(title)
    plt.show()


# -- launches


@contextmanager
def time_limit(seconds: float | None = None):
    """Stop the simulator's kernel threads that are still running after ``seconds``: an endless
    loop becomes a KernelTimeout inside the kernel (then a Mistake), not a hung notebook."""
    from gpulib.simulator import block_thread_type

    BlockThread = block_thread_type()
    expired = threading.Event()

    def stop_all() -> bool:
        """Raise KernelTimeout in every simulator thread still alive; True if there were any."""
        alive = [t for t in threading.enumerate() if isinstance(t, BlockThread) and t.is_alive()]
        for t in alive:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(KernelTimeout))
        return bool(alive)

    def watchdog():
        while not done.wait(0.5 if not expired.is_set() else 0.05):
            if time.monotonic() > deadline:
                expired.set()
                stop_all()  # again and again: the simulator may still be starting the block's threads

    def quiet(args):
        """A thread already stopped may be hit again while it unwinds; that second KernelTimeout
        escapes the simulator's handler and is no news."""
        if not (issubclass(args.exc_type, KernelTimeout) and isinstance(args.thread, BlockThread)):
            previous_hook(args)

    done = threading.Event()
    deadline = time.monotonic() + (TIMEOUT_S if seconds is None else seconds)
    previous_hook, threading.excepthook = threading.excepthook, quiet
    dog = threading.Thread(target=watchdog, daemon=True)
    dog.start()
    try:
        yield expired
    finally:
        done.set()
        dog.join()
        if expired.is_set():  # leave no thread spinning behind (it would slow every later cell)
            give_up = time.monotonic() + 10
            while stop_all() and time.monotonic() < give_up:
                time.sleep(0.05)
        threading.excepthook = previous_hook


def _thread_of(message: str) -> str:
    """'tid=[1, 0, 0] ctaid=[2, 0, 0]: ...' (the simulator's prefix) in Korean."""
    import re

    m = re.search(r"tid=\[([^\]]*)\] ctaid=\[([^\]]*)\]", message)
    return f"블록 ({m.group(2)})의 스레드 ({m.group(1)})" if m else ""


def explain_exception(exc: BaseException, what: str) -> Mistake:
    text = str(exc)
    who = _thread_of(text)
    detail = text.split(": ", 1)[1] if ": " in text else text
    if isinstance(exc, KernelTimeout):
        return Mistake("timeout", f"{what}: {TIMEOUT_S:.0f}초 안에 끝나지 않았다 ({who or '코드'}가 아직 돌고 있었다). "
                                  f"끝나지 않는 반복문(증가하지 않는 인덱스)이나, 일부 스레드만 지나는 장벽을 찾아보라.")
    if isinstance(exc, IndexError):
        return Mistake("out_of_bounds", f"{what}: {who or '코드'}가 배열 범위 밖을 건드렸다: {detail}. "
                                        f"크기가 블록의 배수가 아닐 때 남는 스레드가 있다: 경계 검사(if ... < n)를 빠뜨렸는가?")
    if isinstance(exc, OverflowError):
        return Mistake("overflow", f"{what}: {who + '에서 ' if who else ''}수가 넘쳤다: {detail}. 시뮬레이터의 math.exp는 넘치면 예외를 내고, "
                                   f"GPU에서는 inf가 되어 NaN으로 번진다. 지수 함수에 큰 값(예: 로짓 1000)이 들어가지 않게 하라.")
    if isinstance(exc, ValueError) and "math domain" in detail:
        return Mistake("math_domain", f"{what}: {who or '코드'}가 수학 함수의 정의역 밖을 계산했다 ({detail}): log(0)이나 음수의 sqrt 같은 것이다. "
                                      f"GPU에서는 -inf나 NaN이 된다. 0으로 언더플로될 수 있는 값의 로그를 취하지 말고 식을 로그 형태로 바꿔라.")
    if isinstance(exc, NotImplementedError):
        return Mistake("not_done", f"{what}: 아직 구현되지 않았다 (NotImplementedError). 풀이를 채워 넣어라.")
    return Mistake("error", f"{what}: {who + '에서 ' if who else ''}예외가 났다: {type(exc).__name__}: {detail}")


@contextmanager
def explained(what: str):
    """The student's code failed: explain it as a Mistake, do not crash the grader."""
    try:
        yield
    except Mistake:
        raise
    except Exception as exc:
        raise explain_exception(exc, what) from None


def traced(kernel, grid, block, args: dict, what: str):
    """Run ``kernel[grid, block]`` on the simulator with every access recorded (the tracer).
    ``args`` maps names to NumPy arrays (written in place) and scalars, in the kernel's order."""
    if isinstance(kernel, Remote):
        t, written = kernel.remote_trace(grid, block, args, what)
        for name, array in written.items():
            args[name][...] = array
        return t
    with explained(what), time_limit():
        return trace(kernel, grid, block, *args.values(), names=tuple(args))


def launched(kernel, grid, block, inputs: dict, outputs: dict, scalars: tuple = (), what: str = "커널"):
    """Launch on the backend: inputs copied to the device, outputs poisoned (``outputs`` maps
    names to (shape, dtype)), the kernel's arguments in the order inputs, outputs, scalars.
    Returns the outputs on the host."""
    if isinstance(kernel, Remote):
        return kernel.remote_launch(grid, block, inputs, outputs, scalars, what)
    dev_in = [to_device(a.base)[a.index] if isinstance(a, GuardedView) else a if is_device_array(a)
              else to_device(np.ascontiguousarray(a)) for a in inputs.values()]
    dev_out = [poisoned(shape, dtype) for shape, dtype in outputs.values()]
    with explained(what):
        if on_gpu():
            kernel[grid, block](*dev_in, *dev_out, *scalars)
            cuda.synchronize()
        else:
            with time_limit():
                kernel[grid, block](*dev_in, *dev_out, *scalars)
    return {name: to_host(d) for name, d in zip(outputs, dev_out)}


def run(kernel, grid, block, inputs: dict, outputs: dict, scalars: tuple = (), trace: bool = False,
        what: str = "커널"):
    """The launch every stub uses: ``inputs`` (name -> array), then ``outputs`` (name -> shape, or
    (shape, dtype)), then ``scalars``. On the backend it returns the outputs on the host; with
    ``trace=True`` it runs traced on the simulator and returns (trace, outputs)."""
    shaped = {name: spec if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], tuple)
              else (tuple(np.atleast_1d(spec)), np.float32) for name, spec in outputs.items()}
    if not trace:
        return launched(kernel, grid, block, inputs, shaped, scalars, what=what)
    host = {name: np.array(a) for name, a in inputs.items()}
    outs = {name: poisoned(shape, dtype, device=False) for name, (shape, dtype) in shaped.items()}
    t = traced(kernel, grid, block, {**host, **outs, **{f"scalar{i}": s for i, s in enumerate(scalars)}}, what)
    return t, outs


# -- speed (graded on a GPU only)

SPEED_FULL = 1.2      # full points up to this many times the reference kernel's time
SPEED_FLOOR_AT = 5.0  # the floor from this many times on
SPEED_FLOOR = 0.2     # the share of the points a correct but slow kernel keeps
SPEED_LOG: list = []  # one dict per speed check graded on a GPU in this process (gpulib.bench.speed_grading)


def speed_share(student_ms: float, reference_ms: float) -> float:
    """The share of a speed check's points: 1 up to SPEED_FULL times the reference's time, then
    falling linearly to SPEED_FLOOR at SPEED_FLOOR_AT times, and SPEED_FLOOR beyond."""
    ratio = student_ms / reference_ms
    if ratio <= SPEED_FULL:
        return 1.0
    if ratio >= SPEED_FLOOR_AT:
        return SPEED_FLOOR
    return 1.0 - (1.0 - SPEED_FLOOR) * (ratio - SPEED_FULL) / (SPEED_FLOOR_AT - SPEED_FULL)


def _resolve(reference: str):
    import importlib

    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def time_against(kernel, reference: str, grid, block, inputs: dict, outputs: dict, scalars: tuple, fresh: dict,
                 what: str = "커널"):
    """On a GPU: the median time (ms, CUDA events, L2 flushed, 20 runs, the two kernels taking
    turns twice) of ``kernel`` and of the reference kernel ``"module:name"`` on the same launch;
    then ``kernel`` once more on the ``fresh`` inputs, whose outputs come back to be checked (a
    kernel that kept an answer from the timed runs cannot pass). Returns (student ms, reference
    ms, outputs on the fresh inputs)."""
    if isinstance(kernel, Remote):
        return kernel.remote_time(reference, grid, block, inputs, outputs, scalars, fresh, what)
    from gpulib.timing import benchmark

    ref = _resolve(reference)
    dev_in = [to_device(np.ascontiguousarray(a)) for a in inputs.values()]
    dev_out = [poisoned(shape, dtype) for shape, dtype in outputs.values()]
    mine, theirs = [], []
    with explained(what):
        for _ in range(2):
            theirs.append(benchmark(lambda: ref[grid, block](*dev_in, *dev_out, *scalars)).median_ms)
            mine.append(benchmark(lambda: kernel[grid, block](*dev_in, *dev_out, *scalars)).median_ms)
    return min(mine), min(theirs), launched(kernel, grid, block, fresh, outputs, scalars, what=what)


_VERDICTS: dict = {}  # (check, kernel's identity) → (the kernel, its Mistake or None): the visible checks' verdicts
_VERDICTS_KEPT = 32


def _identity(kernel):
    return ("remote", kernel.identity()) if isinstance(kernel, Remote) else ("local", id(kernel))


def remembered(check):
    """An exercise's visible check (its fixed seed) that remembers its verdict on each kernel, so
    that the speed check, which must first pass it (``speed_points``), does not run it a second
    time on the same kernel: ``check.again(kernel)`` raises the Mistake it found or returns, and
    runs it where it has not run. The hidden check (fresh seeds) is never remembered."""

    def run(kernel, hidden: bool = False, seed: int | None = None) -> None:
        if hidden or seed is not None:
            return check(kernel, hidden, seed)
        key = (check.__qualname__, _identity(kernel))
        _VERDICTS.pop(key, None)
        try:
            check(kernel)
        except Mistake as mistake:
            _keep(key, kernel, mistake)
            raise
        _keep(key, kernel, None)

    def again(kernel) -> None:
        known = _VERDICTS.get((check.__qualname__, _identity(kernel)))
        if known is None or known[0] is not kernel:
            return run(kernel)
        if known[1] is not None:
            raise known[1]

    run = functools.wraps(check)(run)
    run.again = again
    return run


def _keep(key, kernel, mistake) -> None:
    _VERDICTS[key] = (kernel, mistake)  # the kernel held: its id is not reused while its verdict is kept
    while len(_VERDICTS) > _VERDICTS_KEPT:
        _VERDICTS.pop(next(iter(_VERDICTS)))


def speed_points(kernel, reference: str, grid, block, make_inputs, outputs: dict, scalars: tuple, check_values,
                 points: float, seed: int, what: str, correct=None) -> float:
    """A speed check. First ``correct(kernel)``, the exercise's own check (a wrong or cheating
    kernel earns no speed points anywhere; a ``remembered`` check's verdict on this kernel is
    reused); then on the simulator all the points and a message; on a GPU the points of
    ``speed_share``, once the outputs on fresh inputs pass ``check_values(outputs, inputs)``."""
    if correct is not None:
        getattr(correct, "again", correct)(kernel)
    if not on_gpu():
        print(f"건너뜀: {what}의 속도는 GPU에서만 채점한다 (시뮬레이터의 시간은 아무 뜻이 없다). 이 칸의 점수는 잃지 않는다.")
        return float(points)
    rng = np.random.default_rng(seed)
    inputs, fresh = make_inputs(rng), make_inputs(rng)
    mine, theirs, out = time_against(kernel, reference, grid, block, inputs, outputs, scalars, fresh, what)
    check_values(out, fresh)
    share = speed_share(mine, theirs)
    SPEED_LOG.append({"check": what, "ms": mine, "reference_ms": theirs, "ratio": mine / theirs, "points": share * points,
                      "of": float(points)})
    print(f"{what}: {mine:.3f} ms, 기준 커널 {theirs:.3f} ms ({mine / theirs:.2f}배) → 점수 {share * points:.2f}/{points:g} "
          f"(기준의 {SPEED_FULL}배 안이면 만점, {SPEED_FLOOR_AT}배부터 {SPEED_FLOOR:.0%}){where(seed)}")
    return share * points


def called(fn, *args, what: str = "함수", out_args: tuple = (), **kwargs):
    """Call a student's Python function; its exceptions become Mistakes. ``out_args``: the
    positions of the arrays the function writes its answer into (in the clean room, only those
    come back: a function that changes its other inputs changes nothing the check reads).
    ``OBSERVED["sgemm"]`` then holds the sgemm calls it made."""
    if isinstance(fn, Remote):
        return fn.remote_call(args, kwargs, what, out_args)
    OBSERVED["sgemm"] = []
    with explained(what), time_limit(), _recording_sgemm(fn, args):
        return fn(*args, **kwargs)


@contextmanager
def _recording_sgemm(fn, args):
    """While ``fn`` runs in this process, its global ``sgemm`` records each call in OBSERVED."""
    from gpulib.gemm import colmajor

    globs = getattr(fn, "__globals__", None)
    if globs is None or globs.get("sgemm") is not colmajor.sgemm:
        yield
        return
    positions = {id(a): i for i, a in enumerate(args) if isinstance(a, np.ndarray)}

    def recorded(*call):
        OBSERVED["sgemm"].append([("arg", positions[id(x)]) if isinstance(x, np.ndarray) and id(x) in positions
                                  else ("array", tuple(x.shape)) if isinstance(x, np.ndarray) else x for x in call])
        return colmajor.sgemm(*call)

    globs["sgemm"] = recorded
    try:
        yield
    finally:
        globs["sgemm"] = colmajor.sgemm


# -- comparing values


def _index(idx) -> str:
    return "[" + ", ".join(str(i) for i in idx) + "]"


def compare(got, ref, name: str, seed: int, rtol: float | None = None, scale: float | None = None,
            known: dict | None = None, hint: str = "", kind: str = "wrong_value",
            nonfinite: tuple[str, str] | None = None) -> None:
    """``got`` must equal the float64 ``ref``: every element written, non-finite values where the
    reference has them, and the rest within ``rtol`` (see ``check.validate``).

    ``known`` maps a mistake's kind to (the output that mistake produces, its explanation): when
    ``got`` matches one of them, that mistake is named instead of a bare "wrong value". Either
    may be a function returning it, called only when ``got`` is wrong (a candidate that costs a
    whole reference computation); a candidate of None cannot happen on this input. ``kind``
    names a wrong value that matches none of them (a stage of a check: "stride", "padding"), and
    ``nonfinite`` = (kind, explanation) a NaN or infinity where the reference is finite.
    """
    got = to_host(got)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        raise Mistake("shape", f"{name}의 모양이 {got.shape}이다. {ref.shape}이어야 한다{where(seed)}.")
    unwritten = unwritten_mask(got) if got.dtype.kind == "f" else np.zeros(got.shape, bool)
    if unwritten.any():
        first = tuple(int(i) for i in np.argwhere(unwritten)[0])
        picture(~unwritten, f"{name}: 쓰인 원소(노랑)와 아무도 쓰지 않은 원소(보라)")
        raise Mistake("unwritten", f"{name}{_index(first)}을(를) 포함해 {int(unwritten.sum())}/{got.size}개 원소를 "
                                   f"아무 스레드도 쓰지 않았다{where(seed)}. 그리드가 출력 전체를 덮는지, 그리드의 x/y 축과 "
                                   f"행/열의 대응이 바뀌지 않았는지, 끝 원소를 빼먹는 경계 조건(<= 대신 <)은 없는지 보라. {hint}")
    try:
        validate(got, ref, rtol=rtol, scale=scale, name=name)
        return
    except ValidationError:
        pass
    for mistake, (wrong, explanation) in (known or {}).items():
        wrong = wrong() if callable(wrong) else wrong
        if wrong is None:  # that mistake cannot happen on this input
            continue
        wrong = np.asarray(wrong, np.float64)
        if wrong.shape == got.shape:
            try:
                validate(got, wrong, rtol=max(rtol or 1e-5, 1e-4), scale=scale, name=name)
            except ValidationError:
                continue
            raise Mistake(mistake, f"{name}: {explanation() if callable(explanation) else explanation}{where(seed)}")
    got64 = got.astype(np.float64)
    bad_finite = np.isfinite(ref) & ~np.isfinite(got64)
    if bad_finite.any():
        first = tuple(int(i) for i in np.argwhere(bad_finite)[0])
        if nonfinite:
            raise Mistake(nonfinite[0], f"{name}{_index(first)}이(가) {got64[first]}이다 (기준값 {ref[first]:.6g}){where(seed)}. "
                                        f"{nonfinite[1]}")
        raise Mistake("not_finite", f"{name}{_index(first)}이(가) {got64[first]}이다. 기준값은 유한한 수 {ref[first]:.6g}"
                                    f"{where(seed)}. 지수 함수가 넘쳤거나(exp(1000) = inf) 0으로 나누었거나 log(0)을 계산했는가? {hint}")
    size = scale if scale is not None else (float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0)) or 1.0)
    err = np.where(np.isfinite(ref), np.abs(got64 - np.where(np.isfinite(ref), ref, 0.0)), np.inf)
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
    wrong = int(np.count_nonzero(err > (rtol or 1e-5) * size))
    raise Mistake(kind, f"{name}{_index(worst)} = {got64[worst]:.6g}, 기준값(float64)은 {ref[worst]:.6g}; "
                                 f"{wrong}/{got.size}개 원소가 허용 오차를 넘는다{where(seed)}. {hint}")


# -- structural checks on a trace


def barriers_and_races(t, what: str) -> None:
    """Races and divergent barriers of a traced launch."""
    if t.divergent_barriers:
        d = t.divergent_barriers[0]
        counts = ", ".join(f"{len(threads)}개 스레드는 {n}번" for n, threads in sorted(d.counts.items()))
        raise Mistake("divergent_barrier", f"{what}: 블록 {d.block}의 스레드들이 지난 장벽 수가 다르다 ({counts}). "
                                           f"syncthreads()가 일부 스레드만 들어가는 if 안에 있다. GPU에서는 멈추거나 "
                                           f"틀린 값을 낸다. 장벽은 블록의 모든 스레드가 지나는 곳에 두어라.")
    if t.race_count:
        r = t.races[0]
        kinds = {"read after write": "쓴 값을 장벽 없이 다른 스레드가 읽었다 (적재 뒤 syncthreads가 없다)",
                 "write after read": "다른 스레드가 아직 읽는 값을 장벽 없이 덮어썼다 (다음 타일을 올리기 전 syncthreads가 없다)",
                 "write after write": "두 스레드가 장벽 없이 같은 원소에 썼다"}
        why = kinds.get(r.kind, r.kind)
        raise Mistake("race", f"{what}: 셰어드 메모리 경쟁 {t.race_count}건. 예: 블록 {r.block}에서 '{r.array}'{list(r.index)}를 "
                              f"스레드 {r.first_thread}와 {r.second_thread}가 건드렸다: {why}.")


def global_reads_per_block(t, name: str, bound: int, what: str, why: str) -> None:
    """No block may read one element of global ``name`` more than ``bound`` times (a tiled kernel
    reads each input element once per block and then uses shared memory)."""
    worst, worst_block, worst_counts = 0, None, None
    gx, gy, gz = t.grid
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                counts = t.block_element_reads(name, (bx, by, bz))
                if counts.max() > worst:
                    worst, worst_block, worst_counts = int(counts.max()), (bx, by, bz), counts
    if worst > bound:
        element = tuple(int(i) for i in np.unravel_index(int(np.argmax(worst_counts)), worst_counts.shape))
        picture(worst_counts, f"블록 {worst_block}이(가) {name}의 각 원소를 전역 메모리에서 읽은 횟수")
        raise Mistake("global_reads", f"{what}: 블록 {worst_block}이(가) {name}{_index(element)}을(를) 전역 메모리에서 "
                                      f"{worst}번 읽었다. 블록마다 최대 {bound}번이어야 한다: {why}")


def coalesced_writes(t, name: str, what: str, share: float = 0.9) -> None:
    """Neighbouring threads of a warp must write neighbouring elements of ``name`` (their first
    writes one element apart), so that a warp's stores form few memory transactions."""
    first = t.first_writes(name)
    per_block = t.threads_per_block
    pairs = good = 0
    example = None
    for tid in range(len(first) - 1):
        nxt = tid + 1
        if nxt % per_block == 0 or nxt % 32 == 0 or first[tid] < 0 or first[nxt] < 0:
            continue  # another block or warp, or a thread that wrote nothing
        pairs += 1
        if first[nxt] - first[tid] == 1:
            good += 1
        elif example is None:
            example = (tid, int(first[tid]), int(first[nxt]))
    if pairs and good < share * pairs:
        tid, a, b = example
        shape = t.arrays[name].shape
        ia, ib = (tuple(int(i) for i in np.unravel_index(x, shape)) for x in (a, b))
        raise Mistake("coalescing", f"{what}: 이웃한 스레드 {tid % per_block}번과 {tid % per_block + 1}번이 {name}{_index(ia)}와 "
                                    f"{name}{_index(ib)}에 쓴다 (주소 차이 {b - a}). 이웃 스레드 쌍의 {good}/{pairs}만 이웃 주소에 "
                                    f"쓴다. 스레드 번호가 가장 빨리 변하는 출력 인덱스(마지막 축)를 맡게 하라.")


def outputs_per_thread(t, name: str, bound: int, what: str) -> None:
    """The statement's mapping: no thread writes more than ``bound`` elements of ``name`` (one
    thread per output: a thread that computes its neighbours' outputs too does another's work,
    and a block whose one thread does everything is no parallel kernel)."""
    writes = t.arrays[name].writes_by_thread
    if writes.max() > bound:
        tid = int(np.argmax(writes))
        block, local = divmod(tid, t.threads_per_block)
        raise Mistake("thread_mapping", f"{what}: 블록 {block}의 스레드 {t._thread_idx(tid)}가 {name}의 원소를 {int(writes.max())}개 "
                                        f"썼다. 문제는 스레드 하나가 많아야 {bound}개를 맡게 한다: 일을 블록의 스레드에 나누어라 "
                                        f"(한 스레드가 다른 스레드의 출력까지 계산하면 병렬 커널이 아니다).")


def shared_loads_spread(t, what: str) -> None:
    """Each shared array is filled by the block's threads together: in every block, no thread
    writes much more of it than its share (a tile one thread loads while the others wait)."""
    per_block = t.threads_per_block
    for name, rec in t.arrays.items():
        if rec.kind != "shared":
            continue
        for first in range(0, t.total_threads, per_block):
            writes = rec.writes_by_thread[first:first + per_block]
            total = int(writes.sum())
            if not total:
                continue
            share = -(-total // per_block)
            if writes.max() > 4 * share + 4:  # a 2-D loop gives a thread up to ceil(edge / block edge)² cells
                tid = first + int(np.argmax(writes))
                raise Mistake("cooperative_load", f"{what}: 블록 {first // per_block}에서 스레드 {t._thread_idx(tid)} 하나가 "
                                                  f"셰어드 배열 '{name}'의 {int(writes.max())}칸을 올렸다 (블록 전체 {total}칸, 스레드 "
                                                  f"{per_block}개: 스레드마다 {share}칸 남짓). 타일은 블록의 스레드가 함께 나누어 올린다.")


def shared_reads_per_thread(t, bound: int, what: str, why: str) -> None:
    """No thread reads shared memory more than ``bound`` times in all (register blocking: a
    thread keeps what it read from a tile in registers and uses each value for several outputs)."""
    reads = sum(rec.reads_by_thread for rec in t.arrays.values() if rec.kind == "shared")
    if np.ndim(reads) and reads.max() > bound:
        tid = int(np.argmax(reads))
        raise Mistake("shared_reads", f"{what}: 블록 {tid // t.threads_per_block}의 스레드 {t._thread_idx(tid)}가 셰어드 메모리를 "
                                      f"{int(reads.max())}번 읽었다. 많아야 {bound}번이어야 한다: {why}")


def no_atomics(t, name: str, what: str) -> None:
    rec = t.arrays[name]
    if rec.atomics:
        raise Mistake("atomics", f"{what}: {name}에 원자적 연산을 {rec.atomics}번 썼다. 이 연습은 원소마다 스레드 하나가 "
                                 f"필요한 값을 모아(gather) 한 번 쓰는 것이다: 원자적 연산 없이도 경쟁이 없다.")


def written_once(t, name: str, what: str) -> None:
    """Every element of ``name`` written by exactly one thread, once."""
    writes = t.element_writes(name)
    if writes.max() > 1:
        element = tuple(int(i) for i in np.unravel_index(int(np.argmax(writes)), writes.shape))
        picture(writes, f"{name}의 원소마다 쓰인 횟수")
        raise Mistake("write_conflict", f"{what}: {name}{_index(element)}에 {int(writes.max())}번 썼다. 여러 스레드가 같은 원소에 "
                                        f"쓰면(원자적 연산 없이) 마지막 것만 남는다. 원소마다 스레드 하나가 값을 모아 한 번 써라.")




@contextmanager
def allocations():
    """Record the largest array (in bytes) created while the block runs through the calls that
    make one: device arrays (``cuda.device_array``, ``to_device``, ... on either backend) and
    NumPy's constructors (``np.empty``, ``np.zeros``, ``np.pad``, ``np.concatenate``, ...; what
    ``reference.im2col`` or a hand-made X_col uses). Yields a dict: "largest", "where" and
    "total" (the bytes of all of them: an X_col built a channel at a time is large there)."""
    seen = {"largest": 0, "where": "", "total": 0}
    patched = []
    _ALLOCATION_WATCHES.append(seen)  # calls into the clean room's worker report theirs here

    def watch(owner, fname, label):
        original = getattr(owner, fname, None)
        if original is None:
            return

        def wrapper(*args, _original=original, **kwargs):
            array = _original(*args, **kwargs)
            if sys._getframe(1).f_globals.get("__name__") in _SIMULATED_ON_CHIP:
                return array  # on-chip memory, not an allocation (and threads arriving together may each make one)
            size = int(np.prod(getattr(array, "shape", ()))) * np.dtype(getattr(array, "dtype", np.float32)).itemsize
            seen["total"] += size
            if size > seen["largest"]:
                seen["largest"], seen["where"] = size, f"{label}{fname}{tuple(getattr(array, 'shape', ()))}"
            return array

        patched.append((owner, fname, original))
        setattr(owner, fname, wrapper)

    for fname in ("device_array", "device_array_like", "to_device", "pinned_array", "mapped_array"):
        watch(cuda, fname, "cuda.")
    for fname in ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like", "pad",
                  "concatenate", "stack", "vstack", "hstack", "ascontiguousarray", "copy", "tile", "repeat"):
        watch(np, fname, "np.")
    try:
        yield seen
    finally:
        _ALLOCATION_WATCHES.remove(seen)
        for owner, fname, original in reversed(patched):
            setattr(owner, fname, original)


def watching_allocations() -> bool:
    return bool(_ALLOCATION_WATCHES)


def report_allocation(largest: int, where: str, total: int = 0) -> None:
    """An allocation seen elsewhere (the clean room's worker), for every ``allocations`` block open."""
    for seen in _ALLOCATION_WATCHES:
        seen["total"] += total
        if largest > seen["largest"]:
            seen["largest"], seen["where"] = largest, where


def passed(what: str, seed: int, detail: str = "") -> None:
    print(f"통과: {what}{where(seed)}{' ' + detail if detail else ''}")
