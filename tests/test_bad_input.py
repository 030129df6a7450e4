"""Every public entry point refuses malformed input with a ValueError (or TypeError) that names
the argument, before any kernel launches (launches are counted on the simulator).

The entry points and the kinds of their arguments are the table of tests/entry_points.py; the
ways to get each kind wrong are tests/sweep.py's. ``test_every_public_name_is_swept_or_internal``
lists the package itself, so a new public function fails here until it is in the table.
"""

import importlib
import inspect
import pkgutil

import entry_points
import numpy as np
import pytest
import sweep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpulib
from gpulib import cnn, gemm, mlp
from gpulib.conv import direct, fft, front, im2col, implicit_gemm, winograd
from gpulib.conv import tensorcore as tc_conv
from gpulib.gemm import tensorcore as tc_gemm

pytestmark = pytest.mark.skipif(not gpulib.on_simulator(), reason="launches are counted on the simulator")

f32 = np.float32
_conv_args = entry_points._conv_args
CONVOLUTIONS = {
    "direct": direct.conv2d_direct,
    "im2col": im2col.conv2d_im2col,
    "implicit_gemm": implicit_gemm.conv2d_implicit_gemm,
    "implicit_precomp_gemm": implicit_gemm.conv2d_implicit_precomp_gemm,
    "fft": fft.conv2d_fft,
    "winograd": winograd.conv2d_winograd,
    "winograd_nonfused": winograd.conv2d_winograd_nonfused,
    "winograd_f4": winograd.conv2d_winograd_f4,
    "tensor cores": tc_conv.conv2d_tc,
    "registry": front.conv2d,
    "cnn layer": cnn.conv2d_forward,
}

# the layers a reader or a program calls; bench/ (GPU measurement scripts run by benchmarks/),
# figures/ (pictures and widgets of stored results) and grading/ (the instructor's checks, whose
# input is a student's code, screened by the clean room: tests/test_cleanroom.py) are not
SWEPT_LAYERS = ("gpulib.bench", "gpulib.figures", "gpulib.grading")


def _public_names():
    """(qualified name, object) of every public function, class and method of the swept layers that
    takes an argument (what takes none has nothing to refuse)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    for info in pkgutil.walk_packages(gpulib.__path__, "gpulib."):
        if info.name.startswith(SWEPT_LAYERS) or "._" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or isinstance(obj, FakeCUDAKernel) or getattr(obj, "__module__", None) != info.name:
                continue
            if inspect.isclass(obj):
                if issubclass(obj, BaseException):
                    continue
                yield from _if_it_takes_arguments(f"{info.name}.{name}", obj)
                for attr, member in vars(obj).items():
                    if inspect.isfunction(member) and (not attr.startswith("_") or attr == "__call__"):
                        yield from _if_it_takes_arguments(f"{info.name}.{name}.{attr}", member, method=True)
                    elif isinstance(member, classmethod):
                        yield from _if_it_takes_arguments(f"{info.name}.{name}.{attr}", member.__func__, method=True)
            elif inspect.isfunction(obj):
                yield from _if_it_takes_arguments(f"{info.name}.{name}", obj)


def _if_it_takes_arguments(qualified, obj, method=False):
    try:
        parameters = list(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        parameters = ["?"]
    if len(parameters) > (1 if method else 0):
        yield qualified, obj


def test_every_public_name_is_swept_or_internal():
    names = dict(_public_names())
    missing = sorted(n for n in names if n not in entry_points.ENTRIES and not entry_points.internal(n))
    assert not missing, f"public entry points the sweep does not cover (add them to tests/entry_points.py): {missing}"
    stale = sorted(n for n in entry_points.ENTRIES if n not in names)
    assert not stale, f"the table names what the package no longer has: {stale}"
    assert len(entry_points.ENTRIES) >= 150


def test_the_listing_sees_a_new_public_function(monkeypatch):
    monkeypatch.setattr(gpulib.precision, "brand_new", lambda x: x, raising=False)
    gpulib.precision.brand_new.__module__ = "gpulib.precision"
    assert "gpulib.precision.brand_new" in dict(_public_names())


ALL = [(name, i) for name, entries in sorted(entry_points.ENTRIES.items()) for i in range(len(entries))]


@pytest.mark.parametrize("name, i", ALL, ids=[f"{n}#{i}" for n, i in ALL])
def test_the_valid_call_runs(name, i, rng, monkeypatch):
    entry = entry_points.ENTRIES[name][i]
    with sweep.counting(monkeypatch) as counter:
        if entry.gpu_only:
            with pytest.raises((ValueError, RuntimeError), match="GPU"):
                entry.call(entry.make(rng))
            return
        entry.call(entry.make(rng))  # the base arguments are valid: the sweep refuses only what it broke
        assert counter.n > 0 or not entry.launches


@pytest.mark.parametrize("name, i", ALL, ids=[f"{n}#{i}" for n, i in ALL])
def test_every_wrong_argument_is_refused_before_any_launch(name, i, monkeypatch):
    """Every case of every entry point: refused, naming the argument, before any launch; or taken as
    entry_points.ACCEPTED documents, and then checked."""
    entry = entry_points.ENTRIES[name][i]
    with sweep.counting(monkeypatch) as counter:
        problems = sweep.failures(entry, 0, counter, entry_points.accepted(f"{name}#{i}"))
    assert not problems, f"{name}#{i}: " + "\n".join(problems)


def test_the_sweep_counts():
    """How many entry points, variants and cases the sweep holds (the numbers the closing note gives)."""
    variants = sum(len(v) for v in entry_points.ENTRIES.values())
    cases = sum(len(sweep.cases(e, e.make(np.random.default_rng(0)))) for v in entry_points.ENTRIES.values() for e in v)
    print(f"{len(entry_points.ENTRIES)} entry points, {variants} variants, {cases} cases, "
          f"{len(entry_points.ACCEPTED)} accepted on purpose")
    assert len(entry_points.ENTRIES) >= 150 and cases >= 6000


@pytest.fixture
def launches(monkeypatch):
    with sweep.counting(monkeypatch) as counter:
        yield counter


def _refused(launches, call, message, error=ValueError):
    launches.n = 0
    with pytest.raises(error, match=message):
        call()
    assert launches.n == 0, f"{launches['n']} kernel(s) launched before the error"


def test_outputs_and_selectors_are_checked_before_any_launch(rng, launches):
    a = _conv_args(rng)
    X, W, b = a["X"], a["W"], a["b"]
    wrong = gpulib.poisoned((2, 4, 6, 6))
    _refused(launches, lambda: im2col.conv2d_im2col(X, W, b, 1, out=wrong), r"out must have shape \(2, 4, 6, 5\)")
    _refused(launches, lambda: im2col.conv2d_im2col(X, W, b, 1, gemm="cublas"), "unknown gemm 'cublas'")
    _refused(launches, lambda: fft.conv2d_fft(X, W, b, 1, out=wrong), r"out must have shape \(2, 4, 6, 5\)")
    _refused(launches, lambda: fft.conv2d_fft(X, W, b, 1, out=np.zeros((2, 4, 6, 5), f32)), "must be a device array")
    dY = rng.standard_normal((2, 4, 6, 5)).astype(f32)
    _refused(
        launches,
        lambda: cnn.conv2d_backward(X, W, dY, 1, out=(None, gpulib.poisoned((4, 3, 3, 2)), None)),
        r"dW must have shape \(4, 3, 3, 3\)",
    )
    _refused(launches, lambda: im2col.conv2d_im2col_backward(X, W, dY, 1, out=(None,)), "out must be a tuple of 2")


def test_implicit_gemm_refuses_a_table_of_another_layer(rng, launches):
    X = rng.standard_normal((1, 3, 6, 6)).astype(f32)
    W = rng.standard_normal((2, 3, 3, 3)).astype(f32)
    other = gpulib.cuda.to_device(implicit_gemm.row_table(27, 1, 1))  # as many rows, other taps
    _refused(
        launches,
        lambda: implicit_gemm.conv2d_implicit_precomp_gemm(X, W, table=other),
        r"table is not row_table\(C=3, R=3, S=3\) of this layer",
    )
    mine = gpulib.cuda.to_device(implicit_gemm.row_table(3, 3, 3))
    implicit_gemm.conv2d_implicit_precomp_gemm(X, W, table=mine)  # the right one is taken


@pytest.mark.parametrize(
    "tile, message",
    [
        (dict(BM=16, BN=16, BK=4, TM=2), r"needs the keys BM, BN, BK, TM, TN .*missing \['TN'\]"),
        (dict(BM=16, BN=16, BK=0, TM=2, TN=2), r"tile\['BK'\] must be a positive integer, not 0"),
        (dict(BM=16, BN=16, BK=4, TM=3, TN=2), "TM must divide BM"),
        (dict(BM=16, BN=16, BK=4, TM=2, TN=2, SPEED=9), r"unknown \['SPEED'\]"),
    ],
)
def test_tile_dicts_are_checked(tile, message, rng, launches):
    a = _conv_args(rng)
    _refused(launches, lambda: implicit_gemm.conv2d_implicit_gemm(a["X"], a["W"], tile=tile), message)
    _refused(launches, lambda: gemm.matmul(a["X"][0, 0], a["X"][0, 0].T.copy(), shape=tile), message.replace("tile", "shape"))


def test_pool_backward_refuses_an_argmax_that_is_not_the_forward_pass(rng, launches):
    dY = rng.standard_normal((1, 2, 2, 2)).astype(f32)
    outside = np.full((1, 2, 2, 2), 4, np.int32)  # a 2x2 window has positions 0..3
    _refused(
        launches,
        lambda: cnn.max_pool2d_backward(dY, outside, (1, 2, 4, 4), 2),
        r"argmax must hold positions inside a 2x2 window, 0..3, found 4..4",
    )
    _refused(
        launches,
        lambda: cnn.max_pool2d_backward(dY, np.zeros((1, 2, 2, 1), np.int32), (1, 2, 4, 4), 2),
        r"argmax must have dY's shape \(1, 2, 2, 2\)",
    )
    _refused(launches, lambda: cnn.avg_pool2d_backward(dY, (1, 2, 4, 4), 0), "size must be an integer of at least 1")
    _refused(
        launches,
        lambda: im2col.col2im(np.ones((27, 60), f32), (2, 3, 6, 5), 3, 3, 1, 0),
        "stride must be an integer of at least 1, not 0",
    )


def test_messages_name_what_is_wrong(rng, launches):
    X = rng.standard_normal((2, 3, 6, 5)).astype(">f4")  # big-endian float32
    _refused(
        launches,
        lambda: direct.conv2d_direct(X, np.ones((4, 3, 3, 3), f32)),
        r"X \[N, C, H, W\] must be float32 in the machine's byte order, not byte-swapped \(>f4\)",
    )
    A = (rng.standard_normal((4, 4)) + 1j).astype(np.complex64)
    _refused(launches, lambda: tc_gemm.matmul_tc(A, A), r"A \[M, K\] must hold real floating-point numbers")


def test_non_finite_input_is_refused_where_the_algorithm_would_spread_it(rng, launches):
    a = _conv_args(rng)
    a["X"][0, 0, 2, 2] = np.inf
    for conv in (fft.conv2d_fft, winograd.conv2d_winograd, winograd.conv2d_winograd_nonfused, winograd.conv2d_winograd_f4):
        _refused(launches, lambda: conv(a["X"], a["W"], a["b"], 1), "X holds NaN or infinite values")
    # the direct and GEMM forms give the reference's answer: inf where a window holds the inf
    from gpulib import reference as ref

    want = ref.conv2d(a["X"], a["W"], a["b"], 1)
    gpulib.validate(
        direct.conv2d_direct(a["X"], a["W"], a["b"], 1),
        want,
        scale=np.nanmax(np.where(np.isfinite(want), np.abs(want), np.nan)) * 4,
    )


def test_the_cublas_stand_in_takes_only_n_and_t():
    from gpulib.gemm.colmajor import sgemm

    buf = np.ones(4, f32)
    with pytest.raises(ValueError, match="transa must be 'N' .* or 'T' .*, not 'C'"):
        sgemm("C", "N", 2, 2, 2, 1.0, buf, 2, buf, 2, 0.0, buf.copy(), 2)


def test_the_tracer_refuses_launches_it_cannot_trace(rng):
    from gpulib.trace import trace

    X = rng.standard_normal((1, 1, 4, 4)).astype(f32)
    W = rng.standard_normal((1, 1, 3, 3)).astype(f32)
    Y = np.zeros((1, 1, 2, 2), f32)
    with pytest.raises(ValueError, match="block must be up to three positive integers, not \\(0, 4, 1\\)"):
        trace(direct.conv2d_v1_kernel, (1, 1, 1), (0, 4), X, W, np.zeros(1, f32), Y, 0, 1)
    with pytest.raises(ValueError, match="argument 0 is a device array"):
        trace(direct.conv2d_v1_kernel, (1, 1, 1), (2, 2), gpulib.cuda.to_device(X), W, np.zeros(1, f32), Y, 0, 1)


OUT_CALLS = {name: conv for name, conv in CONVOLUTIONS.items()}
OUT_CALLS.update(
    {
        "gemm.matmul": lambda X, W, b, p, s, out: gemm.matmul(X[0, 0], X[0, 0].T.copy(), out=out),
        "tensorcore.matmul_tc": lambda X, W, b, p, s, out: tc_gemm.matmul_tc(X[0, 0], X[0, 0].T.copy(), out=out),
        "cnn.relu": lambda X, W, b, p, s, out: cnn.relu(X, out=out),
        "mlp.dense_forward": lambda X, W, b, p, s, out: mlp.dense_forward(X[0, 0], np.ones((4, 5), f32), b, out=out),
    }
)


_OUT_SHAPES: dict = {}


@settings(
    max_examples=40 if gpulib.on_simulator() else 1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(sorted(OUT_CALLS)), bad=st.sampled_from(["shape", "dtype", "host", "not an array", "non-contiguous"]))
def test_a_wrong_out_is_refused_before_any_launch(name, bad, launches):
    a = _conv_args(np.random.default_rng(0))
    X, W, b = a["X"], a["W"][:, :, :, :3], a["b"]
    call = OUT_CALLS[name]
    if name not in _OUT_SHAPES:  # the output each call makes (run once per entry point)
        _OUT_SHAPES[name] = tuple(call(X, W, b, 1, 1, out=None).shape)
    shape = _OUT_SHAPES[name]
    out = {
        "shape": lambda: gpulib.poisoned(shape[:-1] + (shape[-1] + 1,)),
        "dtype": lambda: gpulib.cuda.to_device(np.zeros(shape, np.float64)),
        "host": lambda: np.zeros(shape, f32),
        "not an array": lambda: list(range(3)),
        "non-contiguous": lambda: (
            gpulib.cuda.to_device(np.zeros(shape[::-1], f32)).T if len(shape) > 1 and shape[0] > 1 else "out"
        ),
    }[bad]()
    launches.n = 0
    with pytest.raises((ValueError, TypeError)):
        call(X, W, b, 1, 1, out=out)
    assert launches.n == 0, f"{name} launched {launches['n']} kernel(s) before refusing out ({bad})"


def _idx(path, raw: bytes):
    path.write_bytes(raw)
    return path


@pytest.mark.parametrize("raw, message", [
    (b"", "too short to be an IDX file"),
    (b"\x01\x00\x08\x01\x00\x00\x00\x02ab", "not an IDX file"),
    (b"\x00\x00\x08\x03\x00\x00", "header promises 3 dimensions but the file ends early"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x05ab", r"needs 5 data bytes, the file has 2"),
    (b"\x00\x00\x08\x02\xff\xff\xff\xff\xff\xff\xff\xffab", "data bytes, the file has 2"),  # a product past 2**64
])
def test_corrupt_idx_files_are_refused_with_their_name(tmp_path, raw, message):
    path = _idx(tmp_path / "bad-idx1-ubyte", raw)
    with pytest.raises(ValueError, match=message) as err:
        gpulib.data.read_idx(path)
    assert "bad-idx1-ubyte" in str(err.value)


def test_mnist_of_mismatched_or_empty_parts_is_refused(tmp_path):
    entry_points.mnist_files(tmp_path / "a", test_images=(4, 27, 27))
    with pytest.raises(ValueError, match="test images have 729 pixels but the training images 784"):
        gpulib.data.load_mnist(tmp_path / "a")
    entry_points.mnist_files(tmp_path / "b", images=(0, 28, 28))
    with pytest.raises(ValueError, match="train-images-idx3-ubyte: the file holds no images"):
        gpulib.data.load_mnist(tmp_path / "b")


@pytest.mark.parametrize("variable, integer", [("GPULIB_GRADING_TIMEOUT", False), ("GPULIB_CLEANROOM_MEMORY", True),
                                               ("GPULIB_CLEANROOM_CPU_S", True), ("GPULIB_CLEANROOM_MARGIN_S", False)])
def test_numeric_settings_are_checked_by_name(variable, integer, monkeypatch):
    from gpulib.env import number_setting

    monkeypatch.delenv(variable, raising=False)
    assert number_setting(variable, 7, integer) == 7
    monkeypatch.setenv(variable, "3")
    assert number_setting(variable, 7, integer) == 3
    for bad in ("-1", "0", "abc", "nan", "inf") + (("2.5",) if integer else ()):
        monkeypatch.setenv(variable, bad)
        with pytest.raises(ValueError, match=f"{variable} must be a positive"):
            number_setting(variable, 7, integer)


@pytest.mark.parametrize("settings, message", [
    (dict(GPULIB_BACKEND="nonsense"), "GPULIB_BACKEND must be 'gpu' or 'sim'"),
    (dict(GPULIB_GRADING_TIMEOUT="abc"), "GPULIB_GRADING_TIMEOUT must be a positive number, not 'abc'"),
    (dict(GPULIB_CLEANROOM_CPU_S="-1"), "GPULIB_CLEANROOM_CPU_S must be a positive integer, not '-1'"),
])
def test_a_wrong_setting_stops_the_import_with_its_name(settings, message):
    """Read where gpulib reads them: a fresh interpreter (numba.cuda imported first for the backend's)."""
    import os
    import subprocess
    import sys

    code = "import numba.cuda, gpulib, gpulib.grading.cleanroom.judge"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GPULIB_BACKEND": "sim", **settings})
    assert run.returncode != 0 and message in run.stderr, run.stderr[-500:]


def test_the_sandbox_user_must_exist(monkeypatch):
    from gpulib.grading.cleanroom import sandbox

    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    monkeypatch.setenv(sandbox.USER_ENV, "no-such-user-here")
    with pytest.raises(ValueError, match="GPULIB_CLEANROOM_USER must name a user of this machine"):
        sandbox.target_user()
    monkeypatch.setenv(sandbox.USER_ENV, "")
    assert sandbox.target_user() is None


def test_a_replayed_step_records_again_when_the_models_buffers_change(rng):
    from gpulib.cnn.book_model import BookCNN
    from gpulib.playbook.replay import ReplayedStep

    model = BookCNN(channels=(2, 3), classes=4, algorithms_per_layer=("direct", "direct"))
    X, y = rng.standard_normal((4, 1, 8, 8)).astype(f32), np.arange(4, dtype=np.int32) % 4
    step = ReplayedStep(model, 4, 0.1)
    step(X, y)
    step(X, y)  # a replay
    model.params = [gpulib.cuda.to_device(p.copy_to_host() * 0.5) for p in model.params]  # new buffers
    want, _ = BookCNN.loss_and_grads(model, X, y)  # the model's own loss on its new parameters
    model.params = [gpulib.cuda.to_device(p.copy_to_host()) for p in model.params]
    assert abs(step(X, y) - want) < 1e-5


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-6, atol=1e-6, equal_nan=True)


NUMERIC = [(name, i) for name, i in ALL if entry_points.ENTRIES[name][i].numeric]


@pytest.mark.parametrize("name, i", NUMERIC, ids=[f"{n}#{i}" for n, i in NUMERIC])
def test_numpy_entry_points_take_lists_and_any_real_dtype_alike(name, i):
    """The float64 references and the NumPy models take real numbers in any form (what ``numeric``
    in the table accepts): a list, another float dtype (the same values), or a Fortran-order copy give
    the answer of the array the table makes."""
    entry = entry_points.ENTRIES[name][i]
    want = entry.call(entry.make(np.random.default_rng(0)))
    for form in (lambda a: a.tolist(), lambda a: a.astype(np.float64 if a.dtype == np.float32 else np.float32),
                 np.asfortranarray):
        args = entry.make(np.random.default_rng(0))
        for target in entry.numeric:
            if isinstance(args.get(target), np.ndarray):
                args[target] = form(args[target])
        assert _same(entry.call(args), want), f"{name}#{i} gives another answer for the same numbers"
