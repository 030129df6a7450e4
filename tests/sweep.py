"""The bad-input sweep's machinery: an entry point described once (its valid arguments and the
kind of each), every way to get each argument wrong generated from that kind, and each wrong
call run with its launches counted.

    Entry(make, call, arrays=("X", "W"), ints={"padding": 0}, tied={"W": (1,)})

A case passes when the call raises ValueError or TypeError whose message names the argument
(or one of ``speaks``' words for it), and no kernel was configured and no library call was made
before it. ``tests/entry_points.py`` holds the table; the tests in test_bad_input*.py run it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import gpulib
from gpulib import launch

f32 = np.float32


@dataclass
class Entry:
    """One way to call one public entry point, and the kinds of its arguments."""

    make: Callable  # rng -> dict of valid arguments
    call: Callable  # dict of arguments -> anything
    arrays: tuple = ()  # array arguments
    ints: dict = field(default_factory=dict)  # integer argument -> its least valid value
    reals: dict = field(default_factory=dict)  # real argument -> "positive", "nonnegative", "fraction" or "finite"
    choices: tuple = ()  # arguments that name one of a set (a string)
    others: dict = field(default_factory=dict)  # argument -> [(label, wrong value)], whatever its kind
    tied: dict = field(default_factory=dict)  # array -> axes whose size the other arguments fix
    finite: tuple = ()  # arrays that must hold no NaN or infinity
    optional: tuple = ()  # arguments for which None is valid
    any_shape: tuple = ()  # arrays of any number of dimensions
    any_float: tuple = ()  # arrays of any real floating-point dtype (rounded as documented)
    any_dtype: tuple = ()  # arrays of any dtype
    integer_arrays: tuple = ()  # arrays of integers (labels, argmax)
    device_only: tuple = ()  # arrays that must already be on the device
    numeric: tuple = ()  # NumPy data of any real dtype and any layout (the float64 references)
    speaks: dict = field(default_factory=dict)  # argument -> other words its messages may use
    launches: bool = False  # the valid call launches at least one kernel (or library call)
    gpu_only: str = ""  # why the valid call cannot run on the simulator (it must refuse clearly there)

    def targets(self) -> list[str]:
        return [*self.arrays, *self.ints, *self.reals, *self.choices, *self.others]


def _on_device_like(original, value):
    """A wrong array on the device when the original was (so that only the wrong thing is wrong)."""
    if hasattr(original, "copy_to_host") and isinstance(value, np.ndarray):
        try:
            return gpulib.cuda.to_device(value)
        except ValueError:  # the simulator copies only contiguous arrays: one that is not stays on the host
            return value
    return value


def array_cases(entry: Entry, name: str, original) -> list[tuple[str, object]]:
    """Every way to get the array argument ``name`` wrong that the entry point must refuse (for a
    ``numeric`` one, lists, real dtypes and layouts are numbers alike: only what is no number)."""
    a = original.copy_to_host() if hasattr(original, "copy_to_host") else np.asarray(original)
    numeric = name in entry.numeric
    cases: list[tuple[str, object]] = [] if name in entry.optional else [("None", None)]
    cases += [("a string", "X"), ("empty", np.zeros((0,) + a.shape[1:], a.dtype))]
    if numeric or name in entry.any_float:
        cases += [("complex", a.astype(np.complex64))]
    if not numeric:
        cases += [("a list", a.tolist())]
        if name in entry.integer_arrays:
            cases += [("float32 instead of integers", a.astype(f32))]
        elif name in entry.any_float:
            cases += [("integers", a.astype(np.int32))]
        elif name not in entry.any_dtype:
            wrong = [("int32", np.int32), ("float64", np.float64), ("float16", np.float16), ("float32", np.float32)]
            cases += [(label, a.astype(t)) for label, t in wrong if np.dtype(t) != a.dtype]  # another dtype than the valid one
            cases += [("big-endian", a.astype(a.dtype.newbyteorder(">")))]
    if name not in entry.any_shape:
        cases += [("one axis more", a[None])] + ([("one axis fewer", a[0])] if a.ndim > 1 else [])
    if not numeric:
        if a.ndim > 1:
            cases += [("not C-order", np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, -1)), 0, -1))]
        else:
            cases += [("strided", np.repeat(a, 2)[::2])]
    for axis in entry.tied.get(name, ()):
        cases += [(f"axis {axis} one longer", np.concatenate([a, np.take(a, [0], axis=axis)], axis=axis))]
    if name in entry.finite:
        nan = a.copy()
        nan.flat[a.size // 2] = np.nan
        cases += [("one NaN", nan), ("one inf", np.where(np.arange(a.size).reshape(a.shape) == 0, np.inf, a).astype(a.dtype))]
    if name in entry.device_only:
        cases += [("a NumPy array", a)]
    return [(label, v if label == "a NumPy array" else _on_device_like(original, v)) for label, v in cases]


def int_cases(least: int) -> list[tuple[str, object]]:
    return [(f"{least - 1}", least - 1), (f"{least - 5}", least - 5), ("a float", float(max(least, 1))),
            ("a string", "2"), ("None", None), ("True", True)]


def real_cases(kind: str) -> list[tuple[str, object]]:
    cases = [("NaN", float("nan")), ("inf", float("inf")), ("a string", "1"), ("None", None), ("True", True)]
    if kind in ("positive", "fraction"):
        cases += [("0", 0.0), ("-1", -1.0)]
    if kind == "nonnegative":
        cases += [("-1", -1.0)]
    if kind == "fraction":
        cases += [("1", 1.0), ("1.5", 1.5)]
    return cases


CHOICE_CASES = [("nonsense", "nonsense"), ("None", None), ("an int", 3)]


def cases(entry: Entry, args: dict) -> list[tuple[str, str, object]]:
    """(argument, label, wrong value) for every way to get one argument of ``entry`` wrong."""
    out = []
    for name in entry.arrays:
        out += [(name, label, v) for label, v in array_cases(entry, name, args[name])]
    for name, least in entry.ints.items():
        out += [(name, label, v) for label, v in int_cases(least) if not (v is None and name in entry.optional)]
    for name, kind in entry.reals.items():
        out += [(name, label, v) for label, v in real_cases(kind) if not (v is None and name in entry.optional)]
    for name in entry.choices:
        out += [(name, label, v) for label, v in CHOICE_CASES if not (v is None and name in entry.optional)]
    for name, wrong in entry.others.items():
        out += [(name, label, v) for label, v in wrong]
    return out


class _Counter(launch.Watcher):
    def __init__(self):
        self.n = 0

    def launch(self, call):
        self.n += 1
        return call.go()


@contextlib.contextmanager
def counting(monkeypatch):
    """Counts kernels configured (the simulator's ``kernel[grid, block]``) and library calls."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    counter = _Counter()
    original = FakeCUDAKernel.__getitem__

    def counted(self, configuration):
        counter.n += 1
        return original(self, configuration)

    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", counted)
    with launch.watching(counter):
        yield counter
    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", original)


def failures(entry: Entry, rng_seed: int, counter, accepted: dict) -> list[str]:
    """Every case of ``entry`` that is not refused as it must be (or accepted as documented)."""
    problems = []
    base = entry.make(np.random.default_rng(rng_seed))
    for target, label, value in cases(entry, base):
        args = entry.make(np.random.default_rng(rng_seed))
        args[target] = value
        counter.n = 0
        if (target, label) in accepted:
            try:
                accepted[target, label](entry.call(args), args)
            except Exception as err:  # noqa: BLE001
                problems.append(f"{target} = {label}: documented as accepted, but {type(err).__name__}: {err}")
            continue
        try:
            entry.call(args)
        except (ValueError, TypeError) as err:
            words = (target, *entry.speaks.get(target, ()))
            if not any(w in str(err) for w in words):
                problems.append(f"{target} = {label}: {type(err).__name__} does not name {target}: {err}")
            elif counter.n:
                problems.append(f"{target} = {label}: refused only after {counter.n} launch(es)")
        except Exception as err:  # noqa: BLE001
            problems.append(f"{target} = {label}: {type(err).__name__}: {err}")
        else:
            problems.append(f"{target} = {label}: accepted")
    return problems
