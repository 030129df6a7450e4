"""Every public entry point refuses malformed input with a ValueError (or TypeError) that names
the argument, before any kernel launches (launches are counted on the simulator)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpulib
from gpulib import cnn, gemm, mlp
from gpulib.conv import autotune, direct, fft, front, im2col, implicit_gemm, winograd
from gpulib.conv import tensorcore as tc_conv
from gpulib.gemm import tensorcore as tc_gemm

pytestmark = pytest.mark.skipif(not gpulib.on_simulator(), reason="launches are counted on the simulator")

f32 = np.float32


def _arrays(rng, **shapes):
    return {name: rng.standard_normal(shape).astype(f32) for name, shape in shapes.items()}


def _conv_args(rng):
    args = _arrays(rng, X=(2, 3, 6, 5), W=(4, 3, 3, 3), b=(4,))
    return dict(args, padding=1, stride=1)


def _labels(n, classes=5):
    return np.arange(n, dtype=np.int32) % classes


# name -> (valid arguments, call, the arguments that are arrays, the integer arguments and their minimum)
ENTRY_POINTS = {
    "mlp.layer_forward": (lambda r: dict(_arrays(r, W=(3, 4), b=(3,), h_prev=(4,))),
                          lambda a: mlp.layer_forward(a["W"], a["b"], a["h_prev"]), ("W", "b", "h_prev"), {}),
    "mlp.dense_forward": (lambda r: _arrays(r, X=(3, 4), W=(2, 4), b=(2,)),
                          lambda a: mlp.dense_forward(a["X"], a["W"], a["b"]), ("X", "W", "b"), {}),
    "mlp.dense_backward": (lambda r: _arrays(r, X=(3, 4), W=(2, 4), H=(3, 2), dH=(3, 2)),
                           lambda a: mlp.dense_backward(a["X"], a["W"], a["H"], a["dH"]), ("X", "W", "H", "dH"), {}),
    "mlp.sgd_update": (lambda r: dict(theta=gpulib.cuda.to_device(r.standard_normal(6).astype(f32)),
                                      grad=r.standard_normal(6).astype(f32)),
                       lambda a: mlp.sgd_update(a["theta"], a["grad"], 0.1), ("grad",), {}),
    "mlp.softmax_cross_entropy": (lambda r: dict(_arrays(r, Z=(3, 5)), labels=_labels(3)),
                                  lambda a: mlp.softmax_cross_entropy(a["Z"], a["labels"]), ("Z", "labels"), {}),
    "mlp.softmax_cross_entropy_backward": (
        lambda r: dict(P=np.full((3, 5), 0.2, f32), labels=_labels(3)),
        lambda a: mlp.softmax_cross_entropy_backward(a["P"], a["labels"]), ("P", "labels"), {}),
    "cnn.relu": (lambda r: _arrays(r, Z=(2, 3, 4, 4)), lambda a: cnn.relu(a["Z"]), ("Z",), {}),
    "cnn.relu_backward": (lambda r: _arrays(r, H=(2, 3, 4, 4), dH=(2, 3, 4, 4)),
                          lambda a: cnn.relu_backward(a["H"], a["dH"]), ("H", "dH"), {}),
    "cnn.max_pool2d": (lambda r: dict(_arrays(r, X=(2, 3, 4, 4)), size=2),
                       lambda a: cnn.max_pool2d(a["X"], a["size"]), ("X",), {"size": 1}),
    "cnn.avg_pool2d": (lambda r: dict(_arrays(r, X=(2, 3, 4, 4)), size=2),
                       lambda a: cnn.avg_pool2d(a["X"], a["size"]), ("X",), {"size": 1}),
    "cnn.max_pool2d_backward": (
        lambda r: dict(_arrays(r, dY=(2, 3, 2, 2)), argmax=np.zeros((2, 3, 2, 2), np.int32), size=2),
        lambda a: cnn.max_pool2d_backward(a["dY"], a["argmax"], (2, 3, 4, 4), a["size"]), ("dY", "argmax"),
        {"size": 1}),
    "cnn.avg_pool2d_backward": (lambda r: dict(_arrays(r, dY=(2, 3, 2, 2)), size=2),
                                lambda a: cnn.avg_pool2d_backward(a["dY"], (2, 3, 4, 4), a["size"]), ("dY",),
                                {"size": 1}),
    "cnn.conv2d_backward": (lambda r: dict(_conv_args(r), dY=r.standard_normal((2, 4, 6, 5)).astype(f32)),
                            lambda a: cnn.conv2d_backward(a["X"], a["W"], a["dY"], a["padding"], a["stride"]),
                            ("X", "W", "dY"), {"padding": 0, "stride": 1}),
    "conv.im2col": (lambda r: dict(_arrays(r, X=(2, 3, 6, 5)), R=3, padding=1, stride=1),
                    lambda a: im2col.im2col(a["X"], a["R"], 3, a["padding"], a["stride"]), ("X",),
                    {"R": 1, "padding": 0, "stride": 1}),
    "conv.col2im": (lambda r: dict(_arrays(r, dX_col=(27, 60)), R=3, padding=1, stride=1),
                    lambda a: im2col.col2im(a["dX_col"], (2, 3, 6, 5), a["R"], 3, a["padding"], a["stride"]),
                    ("dX_col",), {"R": 1, "padding": 0, "stride": 1}),
    "conv.conv2d_im2col_backward": (
        lambda r: dict(_conv_args(r), dY=r.standard_normal((2, 4, 6, 5)).astype(f32)),
        lambda a: im2col.conv2d_im2col_backward(a["X"], a["W"], a["dY"], a["padding"], a["stride"]),
        ("X", "W", "dY"), {"padding": 0, "stride": 1}),
    "gemm.matmul": (lambda r: _arrays(r, A=(5, 4), B=(4, 3)), lambda a: gemm.matmul(a["A"], a["B"]), ("A", "B"), {}),
    "tensorcore.matmul_tc": (lambda r: _arrays(r, A=(5, 4), B=(4, 3)), lambda a: tc_gemm.matmul_tc(a["A"], a["B"]),
                             ("A", "B"), {}),
    "autotune.find_algorithms": (_conv_args, lambda a: autotune.find_algorithms(
        a["X"], a["W"], a["b"], a["padding"], a["stride"], timer=lambda fn, label: None),
        ("X", "W", "b"), {"padding": 0, "stride": 1}),
}
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
for _name, _conv in CONVOLUTIONS.items():
    ENTRY_POINTS[f"conv {_name}"] = (
        _conv_args,
        lambda a, conv=_conv: conv(a["X"], a["W"], a["b"], a["padding"], a["stride"]),
        ("X", "W", "b"),
        {"padding": 0, "stride": 1},
    )


ANY_SHAPE = {"cnn.relu"}  # element-wise on an array of any number of dimensions
ANY_FLOAT = {"tensorcore.matmul_tc"}  # rounds any real floating-point input to fp16


def _bad_arrays(a: np.ndarray, any_shape: bool = False, any_float: bool = False) -> list:
    """Ways to get an array argument wrong that no entry point may accept."""
    bad = [
        a.tolist(),
        None,
        "X",
        np.zeros((0,) + a.shape[1:], a.dtype),
        a.astype(np.complex64) if any_float else a.astype(np.int32) if a.dtype == f32 else a.astype(f32),
    ]
    if not any_float:
        bad += [a.astype(np.float64) if a.dtype == f32 else a.astype(np.int64), a.astype(a.dtype.newbyteorder(">"))]
    if not any_shape:
        bad += [a[None]] + ([a[0]] if a.ndim > 1 else [])  # one axis more or fewer
    if a.ndim > 1:
        bad += [np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, -1)), 0, -1)]  # not C-order
    else:
        bad += [np.repeat(a, 2)[::2]]  # a strided view
    return bad


def _bad_integers(least: int) -> list:
    """Ways to get an integer argument of at least ``least`` wrong."""
    return [least - 1, least - 5, float(max(least, 1)), "2", None, True]


@pytest.fixture(autouse=True)
def launches(monkeypatch):
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    counter = {"n": 0}
    original = FakeCUDAKernel.__getitem__

    def counted(self, configuration):
        counter["n"] += 1
        return original(self, configuration)

    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", counted)
    return counter


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_the_valid_call_of_each_entry_point_runs(name, rng, launches):
    make, call, _, _ = ENTRY_POINTS[name]
    call(make(rng))  # the base arguments are valid: the checks below refuse only what was broken
    assert launches["n"] > 0 or name == "conv fft"


@settings(
    max_examples=120 if gpulib.on_simulator() else 1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_malformed_input_is_refused_before_any_launch(data, launches):
    name = data.draw(st.sampled_from(sorted(ENTRY_POINTS)), label="entry point")
    make, call, arrays, integers = ENTRY_POINTS[name]
    args = make(np.random.default_rng(data.draw(st.integers(0, 2**31), label="seed")))
    targets = [a for a in arrays] + list(integers)
    target = data.draw(st.sampled_from(targets), label="argument")
    if target in integers:
        least = integers[target]
        value = data.draw(st.sampled_from(_bad_integers(least)), label="value")
    else:
        bad = _bad_arrays(np.asarray(args[target]), name in ANY_SHAPE, name in ANY_FLOAT)
        value = data.draw(st.sampled_from([v for v in bad if not (v is None and target == "b")]), label="value")
    args[target] = value
    launches["n"] = 0
    with pytest.raises((ValueError, TypeError)) as err:
        call(args)
    assert launches["n"] == 0, f"{name} launched {launches['n']} kernel(s) before refusing {target}"
    assert err.type is ValueError or "argument" in str(err.value) or target in str(err.value)


def _refused(launches, call, message, error=ValueError):
    launches["n"] = 0
    with pytest.raises(error, match=message):
        call()
    assert launches["n"] == 0, f"{launches['n']} kernel(s) launched before the error"


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
    launches["n"] = 0
    with pytest.raises((ValueError, TypeError)):
        call(X, W, b, 1, 1, out=out)
    assert launches["n"] == 0, f"{name} launched {launches['n']} kernel(s) before refusing out ({bad})"


def _every_corruption():
    for name in sorted(ENTRY_POINTS):
        make, _, arrays, integers = ENTRY_POINTS[name]
        args = make(np.random.default_rng(0))
        for target in arrays:
            bad = _bad_arrays(np.asarray(args[target]), name in ANY_SHAPE, name in ANY_FLOAT)
            for i, value in enumerate(bad):
                if not (value is None and target == "b"):
                    yield name, target, i
        for target, least in integers.items():
            for i in range(len(_bad_integers(least))):
                yield name, target, -1 - i


@pytest.mark.parametrize("name, target, which", list(_every_corruption()))
def test_every_corruption_of_every_argument_is_refused(name, target, which, launches):
    """The same, exhaustively: every entry point, every argument, every way to break it."""
    make, call, _, integers = ENTRY_POINTS[name]
    args = make(np.random.default_rng(0))
    if which >= 0:
        args[target] = _bad_arrays(np.asarray(args[target]), name in ANY_SHAPE, name in ANY_FLOAT)[which]
    else:
        args[target] = _bad_integers(integers[target])[-1 - which]
    launches["n"] = 0
    with pytest.raises((ValueError, TypeError)):
        call(args)
    assert launches["n"] == 0, f"{name} launched {launches['n']} kernel(s) before refusing {target}"
