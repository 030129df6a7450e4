"""The bad-input sweep's table: every public entry point of gpulib, how to call it rightly, and
the kind of each argument (tests/sweep.py turns the kinds into wrong values).

``ENTRIES`` maps the entry point's qualified name (``gpulib.conv.fft.conv2d_fft``, a class, or a
class's method ``gpulib.mlp.model.MLP.forward``) to one or more ``Entry``s. ``INTERNAL`` names
what is public in the package but not an entry point, with the reason; ``ACCEPTED`` the wrong
looking inputs an entry point takes on purpose, with the check of what it then returns.
test_bad_input.py lists the package and fails on a public name in neither table.
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path

import numpy as np
from sweep import Entry

import gpulib
from gpulib import check, precision, reference, results, source, timing
from gpulib import shapes as shape_rules
from gpulib.cnn import anatomy, book_model, layers, model
from gpulib.conv import algorithms, autotune, cuda_c, direct, fft, front, im2col, implicit_gemm, tc_kernels, winograd
from gpulib.conv import tensorcore as tc_conv
from gpulib.gemm import api, colmajor, tc_wgmma
from gpulib.gemm import autotune as gemm_autotune
from gpulib.gemm import kernels as gemm_kernels
from gpulib.gemm import tensorcore as tc_gemm
from gpulib.mlp import layers as mlp_layers
from gpulib.mlp import model as mlp_model
from gpulib.playbook import correctness, memory, patterns, profile, replay, roofline
from gpulib.reductions import softmax
from gpulib.tensorcore import layout, smem_layout, tma, wgmma, wgmma_model

mlp_train = importlib.import_module("gpulib.mlp.train")  # (gpulib.mlp's ``train`` is the function)

f32, f16 = np.float32, np.float16
dev = gpulib.cuda.to_device


def _arrays(rng, **shapes):
    return {name: rng.standard_normal(shape).astype(f32) for name, shape in shapes.items()}


def _labels(n, classes=5):
    return np.arange(n, dtype=np.int32) % classes


def _conv_args(rng, X=(2, 3, 6, 5), W=(4, 3, 3, 3), padding=1, stride=1):
    return dict(_arrays(rng, X=X, W=W, b=(W[0],)), padding=padding, stride=stride)


TC_SHAPES = dict(X=(1, 8, 4, 4), W=(8, 8, 3, 3))  # channels the tensor-core convolutions take whole


def conv_entry(fn, launches=True, shapes=None, keywords=None, **kinds) -> Entry:
    """Any convolution fn(X, W, b, padding, stride, **keywords) (``keywords``: their valid values);
    ``kinds``: Entry's fields in place of a convolution's (finite, numeric, gpu_only, choices...)."""
    keywords = keywords or {}
    fields = dict(arrays=("X", "W", "b"), ints={"padding": 0, "stride": 1}, optional=("b",),
                  tied={"X": (1,), "W": (1, 0), "b": (0,)}, speaks={"X": ("channel",), "b": ("filters",)})
    return Entry(
        lambda r: dict(_conv_args(r, **(shapes or {})), **keywords),
        lambda a: fn(a["X"], a["W"], a["b"], a["padding"], a["stride"], **{k: a[k] for k in keywords}),
        launches=launches, **{**fields, **kinds},
    )


def backward_entry(fn, launches=True, **kinds) -> Entry:
    """A convolution's backward pass fn(X, W, dY, padding, stride)."""
    return Entry(
        lambda r: dict(_conv_args(r), dY=r.standard_normal((2, 4, 6, 5)).astype(f32)),
        lambda a: fn(a["X"], a["W"], a["dY"], a["padding"], a["stride"]),
        arrays=("X", "W", "dY"), ints={"padding": 0, "stride": 1}, tied={"X": (1,), "W": (0, 1), "dY": (1, 2, 3)},
        speaks={"X": ("channel",), "dY": ("Y",)}, launches=launches, **kinds,
    )


SHAPE_CASES = [("3 sizes", (2, 3, 6)), ("a zero size", (2, 0, 6, 5)), ("a negative size", (2, 3, -6, 5)),
               ("a fractional size", (2, 3, 6.5, 5)), ("None", None), ("a string", "2,3,6,5")]
W_SHAPE_CASES = [("3 sizes", (4, 3, 3)), ("a zero size", (0, 3, 3, 3)), ("a negative size", (4, 3, -3, 3)),
                 ("a fractional size", (4, 3, 2.5, 3)), ("None", None), ("a string", "4,3,3,3")]


def shape_entry(fn, with_x=True, need_dx=False) -> Entry:
    """A function of a layer's shapes: (X_shape, W_shape, padding, stride) or (W_shape, stride)."""
    if with_x:
        extra = (lambda a: (a["need_dX"],)) if need_dx else (lambda a: ())
        return Entry(lambda r: dict(X_shape=(2, 3, 6, 5), W_shape=(4, 3, 3, 3), padding=1, stride=1, need_dX=True),
                     lambda a: fn(a["X_shape"], a["W_shape"], a["padding"], a["stride"], *extra(a)),
                     ints={"padding": 0, "stride": 1},
                     others={"X_shape": SHAPE_CASES + [("other channels than W", (2, 4, 6, 5))],
                             "W_shape": W_SHAPE_CASES, **({"need_dX": [("a string", "yes"), ("None", None)]}
                                                          if need_dx else {})},
                     speaks={"X_shape": ("channel", "X"), "W_shape": ("channel", "W")})
    return Entry(lambda r: dict(W_shape=(4, 3, 3, 3), stride=1), lambda a: fn(a["W_shape"], a["stride"]),
                 ints={"stride": 1}, others={"W_shape": W_SHAPE_CASES})


ENTRIES: dict[str, list[Entry]] = {}


def _untimed(fn, label):
    return None  # the auto-tuner's timer: the simulator times nothing
_BOOL_CASES = [("a string", "yes"), ("None", None), ("2", 2)]  # what a True/False switch must refuse


def add(name: str, *entries: Entry) -> None:
    ENTRIES.setdefault(name, []).extend(entries)


# ---------------------------------------------------------------- convolutions and their registry
def _qualified(fn) -> str:
    return f"{fn.__module__}.{fn.__name__}"


for _fn in (direct.conv2d_direct, im2col.conv2d_im2col, implicit_gemm.conv2d_implicit_gemm,
            implicit_gemm.conv2d_implicit_precomp_gemm, fft.conv2d_fft, winograd.conv2d_winograd,
            winograd.conv2d_winograd_nonfused, winograd.conv2d_winograd_f4, tc_conv.conv2d_tc, front.conv2d,
            layers.conv2d_forward):
    add(_qualified(_fn), conv_entry(_fn, launches=_fn is not fft.conv2d_fft))
for _fn in (tc_conv.conv2d_tc_nchw, tc_conv.conv2d_tc_nhwc, tc_conv.conv2d_tc_wgmma, tc_conv.conv2d_tc_tma,
            tc_conv.conv2d_tc_persistent, tc_conv.conv2d_tc_halo, tc_conv.conv2d_tc_pingpong):
    add(_qualified(_fn), conv_entry(_fn, shapes=TC_SHAPES))
def _nhwc16_args(r, C=8, K=4):  # a 2x1 filter: two steps, which the simulator runs quickly
    return dict(X=dev(r.standard_normal((1, 6, 5, C)).astype(f16)), Wk=dev(r.standard_normal((K, 2, 1, C)).astype(f16)),
                b=dev(r.standard_normal(K).astype(f32)), padding=1, stride=1)


_NHWC16 = dict(arrays=("X", "Wk", "b"), device_only=("X", "Wk"), optional=("b",), ints={"padding": 0, "stride": 1},
               tied={"X": (3,), "Wk": (0, 3), "b": (0,)}, speaks={"X": ("C", "fp16"), "Wk": ("C", "fp16"), "b": ("K",)},
               launches=True)
for _fn in (tc_conv.conv2d_tc_wgmma_nhwc16, tc_conv.conv2d_tc_tma_nhwc16, tc_conv.conv2d_tc_persistent_nhwc16,
            tc_conv.conv2d_tc_halo_nhwc16, tc_conv.conv2d_tc_pingpong_nhwc16):
    add(_qualified(_fn), Entry(_nhwc16_args, lambda a, fn=_fn: fn(a["X"], a["Wk"], a["b"], a["padding"], a["stride"]),
                               **_NHWC16))
add("gpulib.conv.tensorcore.conv2d_tc_nhwc16", Entry(
    lambda r: dict(_nhwc16_args(r), version="v3"),
    lambda a: tc_conv.conv2d_tc_nhwc16(a["X"], a["Wk"], a["b"], a["padding"], a["stride"], version=a["version"]),
    choices=("version",), **_NHWC16))
add("gpulib.conv.front.conv2d", Entry(
    lambda r: dict(_nhwc16_args(r), algorithm="tc_implicit_gemm_wgmma", layout="NHWC"),
    lambda a: front.conv2d(a["X"], a["Wk"], a["b"], a["padding"], a["stride"], algorithm=a["algorithm"],
                           layout=a["layout"]), choices=("algorithm", "layout"), **_NHWC16))
for _name, _layout in (("image_nhwc16", "X"), ("filters_krsc16", "W")):
    add(f"gpulib.conv.tensorcore.{_name}", Entry(
        lambda r, n=_layout: {n: r.standard_normal((2, 3, 5, 4)).astype(f32)},
        lambda a, fn=getattr(tc_conv, _name), n=_layout: fn(a[n]), arrays=(_layout,), launches=True))
add("gpulib.conv.tensorcore.reference", conv_entry(tc_conv.reference, launches=False, numeric=("X", "W", "b")))
add("gpulib.conv.cuda_c.conv2d_direct_c", conv_entry(cuda_c.conv2d_direct_c, launches=False,
                                                     gpu_only="NVRTC compiles CUDA C for a GPU"))
add("gpulib.conv.cuda_c.im2col_c", Entry(
    lambda r: dict(_arrays(r, X=(2, 3, 6, 5)), R=3, S=3, padding=1, stride=1),
    lambda a: cuda_c.im2col_c(a["X"], a["R"], a["S"], a["padding"], a["stride"]),
    arrays=("X",), ints={"R": 1, "S": 1, "padding": 0, "stride": 1}, gpu_only="NVRTC compiles CUDA C for a GPU"))
add("gpulib.conv.cuda_c.source", Entry(lambda r: dict(name="direct_conv"), lambda a: cuda_c.source(a["name"]),
                                       choices=("name",)))
add("gpulib.conv.cuda_c.show", Entry(lambda r: dict(name="direct_conv"), lambda a: cuda_c.show(a["name"]),
                                     choices=("name",)))

for _alg in algorithms.ALGORITHMS.values():
    _shapes = TC_SHAPES if _alg.precision == "fp16" else {}
    add("gpulib.conv.algorithms.Algorithm", conv_entry(_alg.run, launches=_alg.name != "fft", shapes=_shapes),
        shape_entry(_alg.supports, with_x=False), shape_entry(_alg.workspace), shape_entry(_alg.multiplications))
    if _alg.backward is not None:
        add("gpulib.conv.algorithms.Algorithm", backward_entry(_alg.backward),
            shape_entry(_alg.backward_workspace, need_dx=True))
add("gpulib.conv.algorithms.direct_multiplications", shape_entry(algorithms.direct_multiplications))
add("gpulib.conv.algorithms.of_precision", Entry(lambda r: dict(p="fp32"), lambda a: algorithms.of_precision(a["p"]),
                                                 choices=("p",), speaks={"p": ("precision",)}))
add("gpulib.conv.front.get", Entry(lambda r: dict(_conv_args(r), algorithm="auto"),
                                   lambda a: front.get(a["algorithm"], a["X"], a["W"], a["b"], a["padding"], a["stride"]),
                                   choices=("algorithm",), arrays=("X", "W"), ints={"padding": 0, "stride": 1},
                                   tied={"X": (1,), "W": (1,)}, speaks={"X": ("channel",)}),  # (tunes, or finds the pick cached)
    Entry(lambda r: dict(algorithm="gemm"), lambda a: front.get(a["algorithm"]), choices=("algorithm",)))
add("gpulib.conv.front.conv2d", Entry(lambda r: dict(_conv_args(r), algorithm="gemm"),
                                      lambda a: front.conv2d(a["X"], a["W"], algorithm=a["algorithm"]),
                                      choices=("algorithm",), launches=True))
add("gpulib.cnn.layers.conv2d_forward", Entry(lambda r: dict(_conv_args(r), algorithm="gemm"),
                                              lambda a: layers.conv2d_forward(a["X"], a["W"], algorithm=a["algorithm"]),
                                              choices=("algorithm",), launches=True))

add("gpulib.conv.autotune.find_algorithms", conv_entry(autotune.find_algorithms, keywords=dict(timer=_untimed),
                                                       finite=("X", "W")),
    Entry(lambda r: dict(_conv_args(r), algorithms=["direct", "gemm"]),
          lambda a: autotune.find_algorithms(a["X"], a["W"], algorithms=a["algorithms"], timer=_untimed),
          others={"algorithms": [("a cuDNN name", ["IMPLICIT_GEMM"]), ("a string", "direct"), ("empty", []),
                                 ("a number", [3])]}, launches=True))
def _choose_afresh(X, W, b, padding, stride):
    """choose() with its cache emptied: a cached pick is returned without a look at the values (so a
    recorded step can call it), and the sweep's NaN cases must reach the tuning."""
    autotune._cache.clear()
    return autotune.choose(X, W, b, padding, stride, timer=_untimed)


add("gpulib.conv.autotune.find_algorithms", Entry(
    lambda r: dict(_conv_args(r), reference=None, scale=None, timer=_untimed),
    lambda a: autotune.find_algorithms(a["X"], a["W"], a["b"], 1, 1, timer=a["timer"], reference=a["reference"],
                                       scale=a["scale"]),
    optional=("reference", "scale"), reals={"scale": "positive"},
    others={"reference": [("another shape", np.zeros((2, 4, 6, 4))), ("a string", "Y")],
            "timer": [("a string", "time it"), ("a number", 3)]}, launches=True))
add("gpulib.conv.autotune.choose", conv_entry(_choose_afresh, finite=("X", "W")))
add("gpulib.conv.autotune.cached_ranking", shape_entry(autotune.cached_ranking))
add("gpulib.conv.autotune.table", Entry(lambda r: dict(results=[autotune.Result("direct", "DIRECT", "ok", 1.0, 0.0)]),
                                        lambda a: autotune.table(a["results"]),
                                        others={"results": [("None", None), ("numbers", [1, 2]), ("a string", "ok")]}))

# ---------------------------------------------------------------- the convolutions' parts
add("gpulib.conv.im2col.im2col", Entry(
    lambda r: dict(_arrays(r, X=(2, 3, 6, 5)), R=3, padding=1, stride=1),
    lambda a: im2col.im2col(a["X"], a["R"], 3, a["padding"], a["stride"]),
    arrays=("X",), ints={"R": 1, "padding": 0, "stride": 1}, launches=True))
add("gpulib.conv.im2col.col2im", Entry(
    lambda r: dict(_arrays(r, dX_col=(27, 60)), R=3, padding=1, stride=1),
    lambda a: im2col.col2im(a["dX_col"], (2, 3, 6, 5), a["R"], 3, a["padding"], a["stride"]),
    arrays=("dX_col",), ints={"R": 1, "padding": 0, "stride": 1}, tied={"dX_col": (0, 1)}, launches=True),
    Entry(lambda r: dict(_arrays(r, dX_col=(27, 60)), input_shape=(2, 3, 6, 5)),
          lambda a: im2col.col2im(a["dX_col"], a["input_shape"], 3, 3, 1, 1), others={"input_shape": SHAPE_CASES},
          speaks={"input_shape": ("dX_col",)}))
add("gpulib.conv.im2col.conv2d_im2col_backward", backward_entry(im2col.conv2d_im2col_backward))
add("gpulib.conv.im2col.backward_workspace_bytes", shape_entry(im2col.backward_workspace_bytes, need_dx=True))
for _name in ("workspace_bytes", "multiplications"):
    add(f"gpulib.conv.fft.{_name}", shape_entry(getattr(fft, _name)))
for _name in ("workspace_bytes", "nonfused_workspace_bytes", "multiplications", "f4_multiplications",
              "f4_workspace_bytes"):
    add(f"gpulib.conv.winograd.{_name}", shape_entry(getattr(winograd, _name)))
add("gpulib.conv.winograd.supports", shape_entry(winograd.supports, with_x=False))
add("gpulib.conv.winograd.supports_f4", shape_entry(winograd.supports_f4, with_x=False))
for _name in ("supports_nchw", "supports_nhwc", "supports_wgmma", "supports_tma", "supports_persistent", "supports_halo",
              "supports_pingpong"):
    add(f"gpulib.conv.tensorcore.{_name}", shape_entry(getattr(tc_conv, _name), with_x=False))
for _name in ("workspace_nchw", "workspace_nhwc", "workspace_wgmma", "workspace_tma", "workspace_persistent",
              "workspace_halo", "workspace_pingpong"):
    add(f"gpulib.conv.tensorcore.{_name}", shape_entry(getattr(tc_conv, _name)))
add("gpulib.conv.tensorcore.supports", Entry(lambda r: dict(W_shape=(8, 8, 3, 3), stride=1, version="v3"),
                                             lambda a: tc_conv.supports(a["W_shape"], a["stride"], version=a["version"]),
                                             ints={"stride": 1}, choices=("version",), others={"W_shape": W_SHAPE_CASES}))
add("gpulib.conv.tensorcore.workspace_bytes", Entry(
    lambda r: dict(X_shape=(1, 8, 4, 4), W_shape=(8, 8, 3, 3), padding=1, stride=1, version="v2"),
    lambda a: tc_conv.workspace_bytes(a["X_shape"], a["W_shape"], a["padding"], a["stride"], version=a["version"]),
    ints={"padding": 0, "stride": 1}, choices=("version",),
    others={"X_shape": SHAPE_CASES, "W_shape": W_SHAPE_CASES}, speaks={"X_shape": ("channel", "X"), "W_shape": ("W",)}))
add("gpulib.conv.tensorcore.prepare", conv_entry(tc_conv.prepare, shapes=TC_SHAPES, keywords=dict(version="v2"),
                                                    choices=("version",)))


def _tc_launch_args(r, version="v2"):
    a = _conv_args(r, **TC_SHAPES)
    ops = tc_conv.prepare(a["X"], a["W"], a["b"], 1, 1, version=version)
    return dict(operands=ops, Y=gpulib.cuda.device_array(ops.out_shape, f32))


add("gpulib.conv.tensorcore.launch", Entry(
    _tc_launch_args, lambda a: tc_conv.launch(a["operands"], a["Y"]), arrays=("Y",), device_only=("Y",),
    tied={"Y": (0, 1)}, others={"operands": [("None", None), ("a tuple", (1, 2)), ("an array", np.ones(3, f32))]},
    launches=True))
add("gpulib.conv.tensorcore.fp16_copy", Entry(lambda r: dict(a=dev(r.standard_normal((2, 3)).astype(f32))),
                                              lambda a: tc_conv.fp16_copy(a["a"]), arrays=("a",), any_shape=("a",),
                                              speaks={"a": ("array",)}, launches=True))
add("gpulib.conv.tensorcore.to_nchw", Entry(
    lambda r: dict(Yn=dev(r.standard_normal((32, 16)).astype(f32)), shape=(2, 8, 4, 4)),
    lambda a: tc_conv.to_nchw(a["Yn"], a["shape"]), arrays=("Yn",),
    others={"shape": SHAPE_CASES}, speaks={"shape": ("Yn",)}))
add("gpulib.conv.fft.grid_size", Entry(lambda r: dict(H=6, W=5, padding=1), lambda a: fft.grid_size(a["H"], a["W"], a["padding"]),
                                       ints={"H": 1, "W": 1, "padding": 0}))
add("gpulib.conv.winograd.filter_transform", Entry(lambda r: _arrays(r, W=(4, 3, 3, 3)),
                                                   lambda a: winograd.filter_transform(a["W"]), arrays=("W",),
                                                   tied={"W": (2, 3)}, launches=True))
for _name, _m in (("reference_tile", 4), ("reference_tile_f4", 6)):
    add(f"gpulib.conv.winograd.{_name}", Entry(
        lambda r, m=_m: dict(d=r.standard_normal((m, m)), g=r.standard_normal((3, 3))),
        lambda a, fn=getattr(winograd, _name): fn(a["d"], a["g"]), arrays=("d", "g"), numeric=("d", "g"),
        tied={"d": (0, 1), "g": (0, 1)}))


def _f4_plan_args(r):
    a = _conv_args(r, X=(1, 2, 8, 8), W=(2, 2, 3, 3))
    a = {k: dev(v) if isinstance(v, np.ndarray) else v for k, v in a.items()}
    return dict(a, Y=gpulib.cuda.device_array((1, 2, 8, 8), f32), plan=winograd.F4Plan((1, 2, 8, 8), (2, 2, 3, 3), 1))


add("gpulib.conv.winograd.F4Plan", Entry(
    lambda r: dict(X_shape=(1, 2, 8, 8), W_shape=(2, 2, 3, 3), padding=1),
    lambda a: winograd.F4Plan(a["X_shape"], a["W_shape"], a["padding"]), ints={"padding": 0},
    others={"X_shape": SHAPE_CASES, "W_shape": W_SHAPE_CASES + [("5x5", (2, 2, 5, 5))]},
    speaks={"X_shape": ("channel", "X"), "W_shape": ("channel", "W", "3x3")}))
add("gpulib.conv.winograd.F4Plan.run", Entry(
    _f4_plan_args, lambda a: a["plan"].run(a["X"], a["W"], a["b"], a["Y"], a["padding"]),
    arrays=("X", "W", "b", "Y"), device_only=("X", "W", "b", "Y"), tied={"X": (0, 1, 2, 3), "W": (0, 1, 2, 3), "b": (0,),
                                                           "Y": (0, 1, 2, 3)},
    ints={"padding": 0}, speaks={"padding": ("plan",), "X": ("plan",), "W": ("plan",), "b": ("plan",), "Y": ("plan",)},
    launches=True))
add("gpulib.conv.implicit_gemm.row_table", Entry(lambda r: dict(C=3, R=3, S=3),
                                                 lambda a: implicit_gemm.row_table(a["C"], a["R"], a["S"]),
                                                 ints={"C": 1, "R": 1, "S": 1}))
add("gpulib.conv.tc_kernels.pixel_tile", Entry(lambda r: dict(Ho=6, Wo=5), lambda a: tc_kernels.pixel_tile(a["Ho"], a["Wo"]),
                                               ints={"Ho": 1, "Wo": 1}))
add("gpulib.conv.tc_kernels.halo_tile", Entry(lambda r: dict(Ho=6, Wo=5, R=3),
                                              lambda a: tc_kernels.halo_tile(a["Ho"], a["Wo"], a["R"]),
                                              ints={"Ho": 1, "Wo": 1, "R": 1}))
add("gpulib.conv.tc_kernels.v7_tile", Entry(lambda r: dict(Ho=6, Wo=5, R=3),
                                            lambda a: tc_kernels.v7_tile(a["Ho"], a["Wo"], a["R"]),
                                            ints={"Ho": 1, "Wo": 1, "R": 1}))

# ---------------------------------------------------------------- GEMM
add("gpulib.gemm.api.matmul", Entry(lambda r: _arrays(r, A=(5, 4), B=(4, 3)), lambda a: api.matmul(a["A"], a["B"]),
                                    arrays=("A", "B"), tied={"A": (1,), "B": (0,)}, speaks={"A": ("inner",), "B": ("inner",)},
                                    launches=True))
for _v in ("v1", "v2", "v3", "v4", "v5", "v6", "auto", "library"):
    add("gpulib.gemm.api.matmul", Entry(lambda r, v=_v: dict(_arrays(r, A=(5, 4), B=(4, 3)), version=v),
                                        lambda a: api.matmul(a["A"], a["B"], version=a["version"]), choices=("version",),
                                        launches=True))
add("gpulib.gemm.api.matmul", Entry(
    lambda r: dict(_arrays(r, A=(4, 5), B=(3, 4)), trans_a=True, trans_b=True),
    lambda a: api.matmul(a["A"], a["B"], trans_a=a["trans_a"], trans_b=a["trans_b"]),
    others={"trans_a": [("a string", "yes"), ("None", None), ("2", 2)], "trans_b": [("a string", "yes")]}, launches=True))


def _gemm_launch_args(r, M=5, K=4, N=3, batch=None):
    lead = () if batch is None else (batch,)
    return dict(A=dev(r.standard_normal(lead + (M, K)).astype(f32)), B=dev(r.standard_normal(lead + (K, N)).astype(f32)),
                C=gpulib.cuda.device_array(lead + (M, N), f32))


_TOO_BIG = dict(BM=128, BN=128, BK=8, TM=2, TN=2)  # 64 x 64 = 4096 threads a block
for _name in ("launch_v3", "launch_v4", "launch_v5", "launch_v6"):
    add(f"gpulib.gemm.api.{_name}", Entry(
        _gemm_launch_args, lambda a, fn=getattr(api, _name): fn(a["A"], a["B"], a["C"], a.get("shape")),
        arrays=("A", "B", "C"), device_only=("A", "B", "C"), tied={"A": (0, 1), "B": (0, 1), "C": (0, 1)},
        others={"shape": [("4096 threads a block", _TOO_BIG), ("a string", "big"), ("missing TN", dict(BM=16, BN=16,
                                                                                                        BK=4, TM=2))]},
        speaks={"A": ("A [",), "B": ("B [",), "C": ("C [",), "shape": ("threads", "TN", "tile")}, launches=True))
add("gpulib.gemm.api.launch_v5", Entry(
    lambda r: _gemm_launch_args(r, batch=2), lambda a: api.launch_v5(a["A"], a["B"], a["C"]),
    arrays=("A", "B", "C"), device_only=("A", "B", "C"), tied={"A": (0, 1, 2), "B": (0, 1, 2), "C": (0, 1, 2)},
    speaks={"A": ("A [",), "B": ("B [",), "C": ("C [",)}, launches=True))
add("gpulib.gemm.api.launch_v6", Entry(
    lambda r: _gemm_launch_args(r, batch=2), lambda a: api.launch_v6(a["A"], a["B"], a["C"]),
    arrays=("A", "B", "C"), device_only=("A", "B", "C"), tied={"A": (0, 1, 2), "B": (0, 1, 2), "C": (0, 1, 2)},
    speaks={"A": ("A [",), "B": ("B [",), "C": ("C [",)}, launches=True))
add("gpulib.gemm.api.library_matmul", Entry(
    _gemm_launch_args, lambda a: api.library_matmul(a["A"], a["B"], a["C"]), arrays=("A", "B", "C"),
    device_only=("A", "B", "C"), tied={"A": (0, 1), "B": (0, 1), "C": (0, 1)}, launches=True))
_PRODUCT = dict(M=5, N=7, K=3, batch=None, trans_a=False, trans_b=False)
_PRODUCT_KINDS = dict(ints={"M": 1, "N": 1, "K": 1, "batch": 1}, optional=("batch",),
                      others={"trans_a": _BOOL_CASES, "trans_b": _BOOL_CASES})


def _product(fn, **extra):
    return lambda a: fn(a["M"], a["N"], a["K"], batch=a["batch"], trans_a=a["trans_a"], trans_b=a["trans_b"], **extra)


def _choose_gemm_afresh(M, N, K, **options):
    gemm_autotune._cache.clear()
    return gemm_autotune.choose(M, N, K, timer=_untimed, **options)


add("gpulib.gemm.autotune.find_tiles", Entry(lambda r: dict(_PRODUCT), _product(gemm_autotune.find_tiles, timer=_untimed),
                                             launches=True, **_PRODUCT_KINDS),
    Entry(lambda r: dict(candidates=list(gemm_autotune.SIM_CANDIDATES[:1]), timer=_untimed),
          lambda a: gemm_autotune.find_tiles(4, 4, 4, candidates=a["candidates"], timer=a["timer"]),
          others={"candidates": [("empty", []), ("a string", "v5"), ("an unknown version", [("v9", {})]),
                                 ("a tile that is no tile", [("v5", "16x16")])],
                  "timer": [("a string", "time it"), ("a number", 3)]}, launches=True))
add("gpulib.gemm.autotune.choose", Entry(lambda r: dict(_PRODUCT), _product(_choose_gemm_afresh), launches=True,
                                         **_PRODUCT_KINDS))
add("gpulib.gemm.autotune.cached_ranking", Entry(lambda r: dict(_PRODUCT), _product(gemm_autotune.cached_ranking),
                                                 **_PRODUCT_KINDS))
add("gpulib.gemm.autotune.launch_chosen", Entry(
    _gemm_launch_args, lambda a: gemm_autotune.launch_chosen(a["A"], a["B"], a["C"]),
    arrays=("A", "B", "C"), device_only=("A", "B", "C"), tied={"A": (0, 1), "B": (0, 1), "C": (0, 1)},
    speaks={"A": ("A [",), "B": ("B [",), "C": ("C [",)}, launches=True))
add("gpulib.gemm.autotune.table", Entry(
    lambda r: dict(results=[gemm_autotune.Result("v5", dict(gemm_kernels.V5_SIM), "ok", 1.0, 0.0)]),
    lambda a: gemm_autotune.table(a["results"]),
    others={"results": [("None", None), ("numbers", [1, 2]), ("a string", "ok")]}))
add("gpulib.gemm.api.v3_shape", Entry(lambda r: dict(rows=64), lambda a: api.v3_shape(a["rows"]), ints={"rows": 1},
                                      optional=("rows",)))
add("gpulib.gemm.kernels.check_tile", Entry(
    lambda r: dict(tile=dict(BM=16, BN=16, BK=4, TM=2, TN=2)), lambda a: gemm_kernels.check_tile(a["tile"]),
    others={"tile": [("4096 threads a block", _TOO_BIG), ("None", None), ("a string", "16x16"),
                     ("a register cap of 300", dict(BM=16, BN=16, BK=4, TM=2, TN=2, REGISTERS=300)),
                     ("more shared memory than a block may hold", dict(BM=256, BN=256, BK=64, TM=16, TN=16))]},
    speaks={"tile": ("threads", "shared")}))
add("gpulib.gemm.kernels.tiled_kernel", Entry(
    lambda r: dict(version="v5", tile=dict(BM=16, BN=16, BK=4, TM=4, TN=4)),
    lambda a: gemm_kernels.tiled_kernel(a["version"], a["tile"]), choices=("version",),
    others={"tile": [("None", None), ("4096 threads a block", _TOO_BIG)]}, speaks={"tile": ("shape", "threads")}),
    Entry(lambda r: dict(version="v4", tile=dict(BM=16, BN=16, BK=4, TM=2, TN=2)),
          lambda a: gemm_kernels.tiled_kernel(a["version"], a["tile"]),
          others={"tile": [("a register cap for version 4", dict(BM=16, BN=16, BK=4, TM=2, TN=2, REGISTERS=64))]},
          speaks={"tile": ("shape", "REGISTERS")}))
add("gpulib.gemm.kernels.block_threads", Entry(
    lambda r: dict(tile=dict(BM=16, BN=16, BK=4, TM=2, TN=2)), lambda a: gemm_kernels.block_threads(a["tile"]),
    others={"tile": [("None", None), ("zero TM", dict(BM=16, BN=16, BK=4, TM=0, TN=2))]}))
add("gpulib.gemm.colmajor.sgemm", Entry(
    lambda r: dict(A=r.standard_normal(6).astype(f32), B=r.standard_normal(6).astype(f32), C=np.zeros(4, f32), m=2, n=2,
                   k=3, lda=2, ldb=3, ldc=2, alpha=1.0, beta=0.0, transa="N"),
    lambda a: colmajor.sgemm(a["transa"], "N", a["m"], a["n"], a["k"], a["alpha"], a["A"], a["lda"], a["B"], a["ldb"],
                             a["beta"], a["C"], a["ldc"]),
    arrays=("A", "B", "C"), any_shape=("A", "B", "C"), ints={"m": 1, "n": 1, "k": 1, "lda": 2, "ldb": 3, "ldc": 2},
    reals={"alpha": "finite", "beta": "finite"}, choices=("transa",)))
add("gpulib.gemm.colmajor.conv_gemm_the_chapters_way", Entry(
    lambda r: _arrays(r, X_col=(27, 60), W_mat=(4, 27)), lambda a: colmajor.conv_gemm_the_chapters_way(a["X_col"], a["W_mat"]),
    arrays=("X_col", "W_mat"), tied={"X_col": (0,), "W_mat": (1,)},
    speaks={"X_col": ("inner", "C·R·S"), "W_mat": ("inner", "C·R·S")}))


def _tc_operands(r, M=32, N=16, K=32, dtype=f16):
    return dict(A=dev(r.standard_normal((M, K)).astype(dtype)), Bt=dev(r.standard_normal((N, K)).astype(dtype)),
                C=gpulib.cuda.device_array((M, N), f32))


for _v in ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9"):
    for _qual, _fn in (("gpulib.gemm.tensorcore.launch", tc_gemm.launch), ("gpulib.gemm.tensorcore.check_launch",
                                                                            tc_gemm.check_launch)):
        add(_qual, Entry(
            lambda r: dict(_tc_operands(r), version="v2"),
            lambda a, v=_v, fn=_fn: fn(a["A"], a["Bt"], a["C"], version=v),
            arrays=("A", "Bt", "C"), device_only=("A", "Bt", "C"), tied={"A": (0, 1), "Bt": (0, 1), "C": (0, 1)},
            any_dtype=(), speaks={"A": ("K",), "Bt": ("K",), "C": ("C",)},
            launches=_fn is tc_gemm.launch and _v in ("v1", "v2")))
add("gpulib.gemm.tensorcore.launch", Entry(
    lambda r: dict(_tc_operands(r), version="v6", config=None, operands="fp16"),
    lambda a: tc_gemm.launch(a["A"], a["Bt"], a["C"], version=a["version"], config=a["config"], operands=a["operands"]),
    choices=("version", "operands"), others={"config": [("nonsense", "nonsense"), ("an int", 3)]}))
add("gpulib.gemm.tensorcore.matmul_tc", Entry(
    lambda r: _arrays(r, A=(5, 4), B=(4, 3)), lambda a: tc_gemm.matmul_tc(a["A"], a["B"]), arrays=("A", "B"),
    any_float=("A", "B"), tied={"A": (1,), "B": (0,)}, speaks={"A": ("inner",), "B": ("inner",)}, launches=True),
    Entry(lambda r: dict(_arrays(r, A=(5, 4), B=(4, 3)), version="v2"),
          lambda a: tc_gemm.matmul_tc(a["A"], a["B"], version=a["version"]), choices=("version",), launches=True))
add("gpulib.gemm.tensorcore.reference", Entry(
    lambda r: _arrays(r, A=(5, 4), B=(4, 3)), lambda a: tc_gemm.reference(a["A"], a["B"]), arrays=("A", "B"),
    numeric=("A", "B"), tied={"A": (1,), "B": (0,)}, speaks={"A": ("inner",), "B": ("inner",)}))
for _v, _name in (("v5", "make_tc_gemm_v5"), ("v6", "make_tc_gemm_v6")):
    add(f"gpulib.gemm.tc_wgmma.{_name}", Entry(
        lambda r: dict(bn=64, stages=3, operands="fp16"),
        lambda a, fn=getattr(tc_wgmma, _name): fn(a["bn"], a["stages"], a["operands"]),
        ints={"bn": 8, "stages": 1}, choices=("operands",),
        others={"bn": [("not a multiple of 8", 60), ("more than 256", 264)]}))
add("gpulib.gemm.tc_wgmma.make_tc_gemm_v7", Entry(
    lambda r: dict(bn=128, stages=3, registers=168, producer_registers=40, consumer_registers=232, operands="fp16"),
    lambda a: tc_wgmma.make_tc_gemm_v7(a["bn"], a["stages"], a["registers"], a["producer_registers"],
                                       a["consumer_registers"], a["operands"]),
    ints={"bn": 8, "stages": 1, "registers": 24, "producer_registers": 24, "consumer_registers": 24},
    choices=("operands",), others={"registers": [("more than 255", 256)], "producer_registers": [("not a multiple of 8", 41)]}))
add("gpulib.conv.tensorcore.v5_shared_bytes", Entry(
    lambda r: dict(W_shape=(64, 64, 3, 3), fp16_out=True), lambda a: tc_conv.v5_shared_bytes(a["W_shape"], a["fp16_out"]),
    others={"W_shape": W_SHAPE_CASES, "fp16_out": _BOOL_CASES}))
add("gpulib.conv.tc_kernels.make_tc_conv_v5", Entry(lambda r: dict(out="fp16"),
                                                   lambda a: tc_kernels.make_tc_conv_v5(a["out"]), choices=("out",)))
for _name in ("make_tc_gemm_v8", "make_tc_gemm_v9"):
    add(f"gpulib.gemm.tc_wgmma.{_name}", Entry(
        lambda r: dict(bn=128, stages=4, operands="fp16", out="16-bit"),
        lambda a, fn=getattr(tc_wgmma, _name): fn(a["bn"], a["stages"], a["operands"], a["out"]),
        ints={"bn": 8, "stages": 1}, choices=("operands", "out"),
        others={"bn": [("not a multiple of 8", 60)], "stages": [("too many to stage C beside", 6 + 1)]}))
add("gpulib.conv.tc_kernels.make_tc_conv_v6", Entry(lambda r: dict(out="fp16"),
                                                   lambda a: tc_kernels.make_tc_conv_v6(a["out"]), choices=("out",)))
add("gpulib.conv.tensorcore.v6_shared_bytes", Entry(
    lambda r: dict(W_shape=(64, 64, 3, 3), stages=4, box_pixels=144, fp16_out=True),
    lambda a: tc_conv.v6_shared_bytes(a["W_shape"], a["stages"], a["box_pixels"], a["fp16_out"]),
    ints={"stages": 1, "box_pixels": 1}, others={"W_shape": W_SHAPE_CASES, "fp16_out": _BOOL_CASES}))
add("gpulib.conv.tc_kernels.make_tc_conv_v7", Entry(
    lambda r: dict(height=14, width=8, out="fp16"),
    lambda a: tc_kernels.make_tc_conv_v7(a["height"], a["width"], a["out"]), choices=("out",),
    others={"height": [("not a tile of V7_TILES", 9)], "width": [("not a tile of V7_TILES", 24)]}))
add("gpulib.conv.tensorcore.v7_shared_bytes", Entry(
    lambda r: dict(W_shape=(64, 64, 3, 3), stages=4, box_pixels=128),
    lambda a: tc_conv.v7_shared_bytes(a["W_shape"], a["stages"], a["box_pixels"]),
    ints={"stages": 1, "box_pixels": 1}, others={"W_shape": W_SHAPE_CASES}))
add("gpulib.conv.tensorcore.v7_stages", Entry(
    lambda r: dict(W_shape=(64, 64, 3, 3), box_pixels=128),
    lambda a: tc_conv.v7_stages(a["W_shape"], a["box_pixels"]),
    ints={"box_pixels": 1}, others={"W_shape": W_SHAPE_CASES, "box_pixels": [("too big for two boxes", 10**6)]}))
add("gpulib.conv.tensorcore.v6_stages", Entry(
    lambda r: dict(W_shape=(64, 64, 3, 3), box_pixels=144, fp16_out=True),
    lambda a: tc_conv.v6_stages(a["W_shape"], a["box_pixels"], a["fp16_out"]),
    ints={"box_pixels": 1}, others={"W_shape": W_SHAPE_CASES, "fp16_out": _BOOL_CASES,
                                    "box_pixels": [("too big for two boxes", 10**6)]}))

# ---------------------------------------------------------------- the layers
add("gpulib.mlp.layers.layer_forward", Entry(
    lambda r: _arrays(r, W=(3, 4), b=(3,), h_prev=(4,)), lambda a: mlp_layers.layer_forward(a["W"], a["b"], a["h_prev"]),
    arrays=("W", "b", "h_prev"), tied={"W": (0, 1), "b": (0,), "h_prev": (0,)}, launches=True),
    Entry(lambda r: dict(_arrays(r, W=(3, 4), b=(3,), h_prev=(4,)), activation="relu"),
          lambda a: mlp_layers.layer_forward(a["W"], a["b"], a["h_prev"], a["activation"]), choices=("activation",),
          launches=True))
add("gpulib.mlp.layers.dense_forward", Entry(
    lambda r: _arrays(r, X=(3, 4), W=(2, 4), b=(2,)), lambda a: mlp_layers.dense_forward(a["X"], a["W"], a["b"]),
    arrays=("X", "W", "b"), tied={"X": (1,), "W": (0, 1), "b": (0,)}, launches=True),
    Entry(lambda r: dict(_arrays(r, X=(3, 4), W=(2, 4), b=(2,)), activation="relu"),
          lambda a: mlp_layers.dense_forward(a["X"], a["W"], a["b"], a["activation"]), choices=("activation",),
          launches=True))
add("gpulib.mlp.layers.dense_backward", Entry(
    lambda r: _arrays(r, X=(3, 4), W=(2, 4), H=(3, 2), dH=(3, 2)),
    lambda a: mlp_layers.dense_backward(a["X"], a["W"], a["H"], a["dH"]), arrays=("X", "W", "H", "dH"),
    tied={"X": (0, 1), "W": (0, 1), "H": (0, 1), "dH": (0, 1)}, launches=True))
add("gpulib.mlp.layers.sgd_update", Entry(
    lambda r: dict(theta=dev(r.standard_normal(6).astype(f32)), grad=r.standard_normal(6).astype(f32), lr=0.1),
    lambda a: mlp_layers.sgd_update(a["theta"], a["grad"], a["lr"]), arrays=("theta", "grad"), device_only=("theta",),
    any_shape=("theta", "grad"), tied={"grad": (0,)}, reals={"lr": "positive"}, launches=True))
add("gpulib.mlp.layers.softmax_cross_entropy", Entry(
    lambda r: dict(_arrays(r, Z=(3, 5)), labels=_labels(3)), lambda a: mlp_layers.softmax_cross_entropy(a["Z"], a["labels"]),
    arrays=("Z", "labels"), integer_arrays=("labels",), tied={"Z": (0,), "labels": (0,)},
    others={"labels": [("out of range", np.array([0, 5, 1], np.int32)), ("negative", np.array([0, -1, 1], np.int32))]},
    speaks={"Z": ("samples",)}, launches=True))
add("gpulib.mlp.layers.softmax_cross_entropy_backward", Entry(
    lambda r: dict(P=np.full((3, 5), 0.2, f32), labels=_labels(3)),
    lambda a: mlp_layers.softmax_cross_entropy_backward(a["P"], a["labels"]), arrays=("P", "labels"),
    integer_arrays=("labels",), tied={"P": (0,), "labels": (0,)},
    others={"labels": [("out of range", np.array([0, 5, 1], np.int32))]}, speaks={"P": ("samples",)}, launches=True))
add("gpulib.mlp.layers.grid_2d", Entry(lambda r: dict(rows=3, cols=4), lambda a: mlp_layers.grid_2d(a["rows"], a["cols"]),
                                       ints={"rows": 1, "cols": 1}))
add("gpulib.mlp.layers.activation_code", Entry(lambda r: dict(activation="relu"),
                                               lambda a: mlp_layers.activation_code(a["activation"]), choices=("activation",)))
add("gpulib.cnn.layers.relu", Entry(lambda r: _arrays(r, Z=(2, 3, 4, 4)), lambda a: layers.relu(a["Z"]), arrays=("Z",),
                                    any_shape=("Z",), launches=True))
add("gpulib.cnn.layers.relu_backward", Entry(
    lambda r: _arrays(r, H=(2, 3, 4, 4), dH=(2, 3, 4, 4)), lambda a: layers.relu_backward(a["H"], a["dH"]),
    arrays=("H", "dH"), tied={"H": (0, 1, 2, 3), "dH": (0, 1, 2, 3)}, launches=True))
for _name in ("max_pool2d", "avg_pool2d"):
    add(f"gpulib.cnn.layers.{_name}", Entry(lambda r: dict(_arrays(r, X=(2, 3, 4, 4)), size=2),
                                            lambda a, fn=getattr(layers, _name): fn(a["X"], a["size"]), arrays=("X",),
                                            ints={"size": 1}, others={"size": [("larger than the image", 5)]},
                                            launches=True))
add("gpulib.cnn.layers.max_pool2d_backward", Entry(
    lambda r: dict(_arrays(r, dY=(2, 3, 2, 2)), argmax=np.zeros((2, 3, 2, 2), np.int32), size=2, input_shape=(2, 3, 4, 4)),
    lambda a: layers.max_pool2d_backward(a["dY"], a["argmax"], a["input_shape"], a["size"]), arrays=("dY", "argmax"),
    integer_arrays=("argmax",), ints={"size": 1}, tied={"dY": (0, 1, 2, 3), "argmax": (0, 1, 2, 3)},
    others={"input_shape": SHAPE_CASES}, speaks={"dY": ("argmax", "input_shape"), "size": ("dY",),
                                                 "input_shape": ("dY",)}, launches=True))
add("gpulib.cnn.layers.avg_pool2d_backward", Entry(
    lambda r: dict(_arrays(r, dY=(2, 3, 2, 2)), size=2, input_shape=(2, 3, 4, 4)),
    lambda a: layers.avg_pool2d_backward(a["dY"], a["input_shape"], a["size"]), arrays=("dY",), ints={"size": 1},
    tied={"dY": (0, 1, 2, 3)}, others={"input_shape": SHAPE_CASES}, speaks={"dY": ("input_shape",), "size": ("dY",),
                                                                            "input_shape": ("dY",)}, launches=True))
add("gpulib.cnn.layers.conv2d_backward", backward_entry(layers.conv2d_backward),
    Entry(lambda r: dict(_conv_args(r), dY=r.standard_normal((2, 4, 6, 5)).astype(f32), algorithm="gemm",
                         reduction="tree", input_grad="flipped"),
          lambda a: layers.conv2d_backward(a["X"], a["W"], a["dY"], 1, 1, algorithm=a["algorithm"],
                                           reduction=a["reduction"], input_grad=a["input_grad"]),
          choices=("algorithm", "reduction", "input_grad"), optional=("reduction",), launches=True),
    Entry(lambda r: dict(_conv_args(r), dY=r.standard_normal((2, 4, 6, 5)).astype(f32),
                         relu_output=r.standard_normal((2, 4, 6, 5)).astype(f32), need_dX=False),
          lambda a: layers.conv2d_backward(a["X"], a["W"], a["dY"], 1, 1, need_dX=a["need_dX"], reduction="staged",
                                           relu_output=a["relu_output"]),
          arrays=("relu_output",), optional=("relu_output",), tied={"relu_output": (0, 1, 2, 3)},
          others={"need_dX": _BOOL_CASES}, speaks={"relu_output": ("dY",)}, launches=True))
add("gpulib.reductions.softmax.softmax_rows", Entry(lambda r: _arrays(r, Z=(3, 5)), lambda a: softmax.softmax_rows(a["Z"]),
                                                    arrays=("Z",), launches=True))
add("gpulib.reductions.softmax.reduction_steps", Entry(lambda r: dict(cols=10), lambda a: softmax.reduction_steps(a["cols"]),
                                                       ints={"cols": 1}))

# ---------------------------------------------------------------- the models and training
IMAGE_SHAPE_CASES = [("2 sizes", (8, 8)), ("an odd height", (1, 7, 8)), ("a negative size", (1, -8, 8)),
                     ("a zero size", (0, 8, 8)), ("fractional sizes", (1, 8.5, 8)), ("None", None), ("a string", "1x8x8")]
LABEL_CASES = [("out of range", np.array([0, 1, 10, 3], np.int32)), ("negative", np.array([0, -1, 2, 3], np.int32)),
               ("floats", np.array([0.0, 1.0, 2.0, 3.0], f32)), ("too few", np.array([0, 1, 2], np.int32)),
               ("None", None), ("2-D", np.zeros((4, 1), np.int32))]


def _images(r, n=4, shape=(1, 8, 8)):
    return r.standard_normal((n, *shape)).astype(f32)


def _image_cases():
    nan = np.zeros((4, 1, 8, 8), f32)
    nan[1, 0, 3, 3] = np.nan
    return [("one NaN", nan), ("other images", np.zeros((4, 1, 6, 8), f32)), ("float64", np.zeros((4, 1, 8, 8))),
            ("None", None), ("a list", [[0.0] * 64] * 4), ("3-D", np.zeros((4, 8, 8), f32)),
            ("no images", np.zeros((0, 1, 8, 8), f32))]


for _cls, _ctor_args in ((model.SmallCNN, dict(channels=3)), (book_model.BookCNN, dict(channels=(2, 3)))):
    _q = f"{_cls.__module__}.{_cls.__name__}"
    _channels = ("channels", [("zero", 0), ("a float", 2.5), ("None", None)] if _cls is model.SmallCNN else
                 [("one entry", (2,)), ("a zero", (0, 3)), ("a float", (2.5, 3)), ("None", None), ("an int", 3)])
    _algo = "conv_algorithm" if _cls is model.SmallCNN else "algorithms_per_layer"
    _algo_cases = [("nonsense", "nonsense"), ("None", None)] if _cls is model.SmallCNN else \
        [("one entry", ("direct",)), ("nonsense", ("direct", "nonsense")), ("a string", "gemm")]
    add(_q, Entry(lambda r, c=_cls, k=_ctor_args: dict(k, image_shape=(1, 8, 8), classes=4, seed=0),
                  lambda a, c=_cls: c(image_shape=a["image_shape"], channels=a["channels"], classes=a["classes"],
                                      seed=a["seed"]),
                  ints={"classes": 2, "seed": 0}, others={"image_shape": IMAGE_SHAPE_CASES, _channels[0]: _channels[1]},
                  speaks={"image_shape": ("image",)}),
        Entry(lambda r, c=_cls, k=_ctor_args: dict(k, algo="direct"),
              lambda a, c=_cls, name=_algo: c(channels=a["channels"], **{name: a["algo"] if c is model.SmallCNN else
                                                                          (a["algo"],) * 2 if isinstance(a["algo"], str)
                                                                          and a["algo"] == "direct" else a["algo"]}),
              others={"algo": _algo_cases}, speaks={"algo": (_algo,)}))
    _m = lambda r, c=_cls, k=_ctor_args: dict(model=c(image_shape=(1, 8, 8), classes=4, **k), X=_images(r),  # noqa: E731
                                               labels=_labels(4, 4))
    add("gpulib.cnn.model.ImageClassifier.forward", Entry(_m, lambda a: a["model"].forward(a["X"]),
                                                          others={"X": _image_cases()}, launches=True))
    add(f"{_q}.loss_and_grads", Entry(_m, lambda a: a["model"].loss_and_grads(a["X"], a["labels"]),
                                      others={"X": _image_cases(), "labels": LABEL_CASES}, launches=True))
    add("gpulib.cnn.model.ImageClassifier.predict", Entry(_m, lambda a: a["model"].predict(a["X"]),
                                                           others={"X": _image_cases()}, launches=True))
    add("gpulib.cnn.model.ImageClassifier.accuracy", Entry(_m, lambda a: a["model"].accuracy(a["X"], a["labels"]),
                                                            others={"X": _image_cases(), "labels": LABEL_CASES},
                                                            launches=True))
    add("gpulib.cnn.model.ImageClassifier.step", Entry(
        lambda r, m=_m: dict(m(r), lr=0.1), lambda a: a["model"].step(a["grads"] if "grads" in a else
                                                                      [dev(p.copy_to_host()) for p in a["model"].params],
                                                                      a["lr"]),
        reals={"lr": "positive"}, others={"grads": [("too few", []), ("None", None), ("wrong shapes", [np.ones(3, f32)] * 6),
                                                    ("one NaN", "nan")]},
        speaks={"grads": ("grads", "params")}, launches=True))
for _fused in (False, True):  # BookCNN's own step: ImageClassifier's, or one launch for all six (fused)
    add("gpulib.cnn.book_model.BookCNN.step", Entry(
        lambda r, f=_fused: dict(model=book_model.BookCNN(image_shape=(1, 8, 8), classes=4, channels=(2, 3), fused=f),
                                 lr=0.1),
        lambda a: a["model"].step(a["grads"] if "grads" in a else [dev(p.copy_to_host()) for p in a["model"].params],
                                  a["lr"]),
        reals={"lr": "positive"}, others={"grads": [("too few", []), ("None", None), ("wrong shapes", [np.ones(3, f32)] * 6),
                                                    ("one NaN", "nan")]},
        speaks={"grads": ("grads", "params")}, launches=True))
add("gpulib.cnn.book_model.BookCNN.device_loss_and_grads", Entry(
    lambda r: dict(model=book_model.BookCNN(channels=(2, 3), classes=4), X=dev(_images(r)), labels=dev(_labels(4, 4))),
    lambda a: a["model"].device_loss_and_grads(a["X"], a["labels"]),
    arrays=("X", "labels"), device_only=("X", "labels"), integer_arrays=("labels",), tied={"X": (1, 2, 3), "labels": (0,)},
    speaks={"X": ("image",), "labels": ("samples",)}, launches=True))
add("gpulib.cnn.model.images_on_device", Entry(lambda r: dict(X=_images(r), image_shape=(1, 8, 8)),
                                               lambda a: model.images_on_device(a["X"], a["image_shape"]),
                                               others={"X": _image_cases()[1:], "image_shape": IMAGE_SHAPE_CASES},
                                               speaks={"image_shape": ("image",)}))


def _params(model_obj):
    return [p.copy_to_host() for p in model_obj.params]


for _mod, _cls in ((model, model.SmallCNN), (book_model, book_model.BookCNN)):
    for _fn in ("reference_loss",) + (("reference_grads",) if _mod is book_model else ()):
        add(f"{_mod.__name__}.{_fn}", Entry(
            lambda r, c=_cls: dict(params=_params(c(channels=3 if c is model.SmallCNN else (2, 3), classes=4)),
                                   X=_images(r), labels=_labels(4, 4)),
            lambda a, fn=getattr(_mod, _fn): fn(a["params"], a["X"], a["labels"]),
            others={"params": [("too few", []), ("None", None)], "X": _image_cases()[1:2] + [("None", None)],
                    "labels": LABEL_CASES[:2] + [("None", None)]}, speaks={"X": ("image", "params"), "labels": ("classes",)}))

_SIZES_CASES = [("one width", [4]), ("a zero width", [4, 0, 3]), ("a float width", [4, 2.5, 3]), ("None", None),
                ("a string", "4,3")]
add("gpulib.mlp.model.MLP", Entry(lambda r: dict(sizes=[4, 5, 3], activation="relu", seed=0),
                                  lambda a: mlp_model.MLP(a["sizes"], a["activation"], a["seed"]),
                                  choices=("activation",), ints={"seed": 0}, others={"sizes": _SIZES_CASES}))
add("gpulib.mlp.model.MLP.from_params", Entry(
    lambda r: dict(params=_arrays(r, W1=(5, 4), b1=(5,), W2=(3, 5), b2=(3,)), activation="relu"),
    lambda a: mlp_model.MLP.from_params([(a["params"]["W1"], a["params"]["b1"]), (a["params"]["W2"], a["params"]["b2"])]
                                        if isinstance(a["params"], dict) else a["params"], a["activation"]),
    choices=("activation",), others={"params": [("empty", []), ("None", None), ("unchained", [(np.ones((5, 4), f32),
                                                                                                np.ones(5, f32)),
                                                                                               (np.ones((3, 4), f32),
                                                                                                np.ones(3, f32))])]}))
_mlp = lambda r: dict(model=mlp_model.MLP([4, 5, 3]), X=r.standard_normal((4, 4)).astype(f32), labels=_labels(4, 3))  # noqa: E731
_MLP_X = [("one NaN", np.where(np.eye(4) > 0, np.nan, 0).astype(f32)), ("other features", np.zeros((4, 5), f32)),
          ("None", None), ("float64", np.zeros((4, 4))), ("3-D", np.zeros((4, 4, 1), f32))]
add("gpulib.mlp.model.MLP.forward", Entry(_mlp, lambda a: a["model"].forward(a["X"]), others={"X": _MLP_X}, launches=True))
for _meth in ("loss_and_grads", "accuracy"):
    add(f"gpulib.mlp.model.MLP.{_meth}", Entry(_mlp, lambda a, m=_meth: getattr(a["model"], m)(a["X"], a["labels"]),
                                               others={"X": _MLP_X, "labels": LABEL_CASES[:2] + LABEL_CASES[3:]},
                                               launches=True))
add("gpulib.mlp.model.MLP.predict", Entry(_mlp, lambda a: a["model"].predict(a["X"]), others={"X": _MLP_X}, launches=True))
add("gpulib.mlp.model.MLP.step", Entry(
    lambda r: dict(_mlp(r), lr=0.1), lambda a: a["model"].step(a["grads"] if "grads" in a else
                                                              [(dev(W.copy_to_host()), dev(b.copy_to_host()))
                                                               for W, b in a["model"].params], a["lr"]),
    reals={"lr": "positive"}, others={"grads": [("too few", []), ("None", None)]}, speaks={"grads": ("grads", "params")},
    launches=True))


def _split(r, n=8):
    from gpulib.data import Split

    return Split(r.standard_normal((n, 4)).astype(f32), _labels(n, 3), r.standard_normal((4, 4)).astype(f32), _labels(4, 3))


def _split_cases():
    from gpulib.data import Split

    r = np.random.default_rng(1)
    good = _split(r)
    nan = good.X_train.copy()
    nan[0, 0] = np.nan
    return [("None", None), ("a tuple", (good.X_train, good.y_train)),
            ("one NaN", Split(nan, good.y_train, good.X_test, good.y_test)),
            ("labels out of range", Split(good.X_train, good.y_train + 3, good.X_test, good.y_test)),
            ("other features than the model", Split(np.zeros((8, 5), f32), good.y_train, np.zeros((4, 5), f32),
                                                    good.y_test))]


def _negative_split():
    from gpulib.data import Split

    good = _split(np.random.default_rng(2))
    return Split(good.X_train, good.y_train - 1, good.X_test, good.y_test)


add("gpulib.mlp.train.train", Entry(
    lambda r: dict(model=mlp_model.MLP([4, 5, 3]), data=_split(r), progress=False, verbose=False, evaluate_every_epoch=False,
                   seed=0),
    lambda a: mlp_train.train(a["model"], a["data"], 0.1, 1, 4, a["seed"], progress=a["progress"], verbose=a["verbose"],
                              evaluate_every_epoch=a["evaluate_every_epoch"]),
    ints={"seed": 0}, others={k: _BOOL_CASES for k in ("progress", "verbose", "evaluate_every_epoch")}, launches=True))
add("gpulib.mlp.train.train", Entry(
    lambda r: dict(model=mlp_model.MLP([4, 5, 3]), data=_split(r), lr=0.1, epochs=1, batch_size=4),
    lambda a: mlp_train.train(a["model"], a["data"], a["lr"], a["epochs"], a["batch_size"], progress=False),
    ints={"epochs": 1, "batch_size": 1}, reals={"lr": "positive"},
    others={"model": [("None", None), ("a CNN of other images", model.SmallCNN(channels=2)), ("a string", "MLP")],
            "data": _split_cases()},
    speaks={"data": ("X_train", "y_train", "features"), "model": ("MLP", "features")}, launches=True))

# ---------------------------------------------------------------- 16.6's tools
add("gpulib.playbook.replay.ReplayedStep", Entry(
    lambda r: dict(model=book_model.BookCNN(channels=(2, 3), classes=4, algorithms_per_layer=("direct", "direct")),
                   batch=4, lr=0.1, graph=False),
    lambda a: replay.ReplayedStep(a["model"], a["batch"], a["lr"], a["graph"]), ints={"batch": 1},
    reals={"lr": "positive"},
    others={"model": [("None", None), ("an MLP", mlp_model.MLP([4, 3])), ("a string", "BookCNN")],
            "graph": [("a string", "yes"), ("None", None)]}))
add("gpulib.playbook.replay.ReplayedStep.__call__", Entry(
    lambda r: dict(step=replay.ReplayedStep(book_model.BookCNN(channels=(2, 3), classes=4,
                                                               algorithms_per_layer=("direct", "direct")), 4, 0.1),
                   X=_images(r), labels=_labels(4, 4)),
    lambda a: a["step"](a["X"], a["labels"]), others={"X": _image_cases(), "labels": LABEL_CASES}, launches=True))
add("gpulib.playbook.profile.Profiler", Entry(lambda r: dict(memory=False, flush=True),
                                              lambda a: profile.Profiler(a["memory"], a["flush"]),
                                              others={"memory": [("a string", "yes"), ("None", None)],
                                                      "flush": [("a string", "no"), ("2", 2)]}))
add("gpulib.playbook.profile.Profiler.op", Entry(lambda r: dict(name="conv1"),
                                                 lambda a: profile.Profiler().op(a["name"]).__enter__(),
                                                 others={"name": [("None", None), ("an int", 3), ("empty", "")]}))
add("gpulib.playbook.profile.used_bytes", Entry(lambda r: dict(flush=True), lambda a: profile.used_bytes(a["flush"]),
                                                others={"flush": [("a string", "yes"), ("None", None)]},
                                                gpu_only="the simulator has no device memory to count"))
add("gpulib.playbook.profile.kernel_table", Entry(
    lambda r: dict(rows=[]), lambda a: profile.kernel_table(a["rows"]),
    others={"rows": [("None", None), ("numbers", [1, 2]), ("rows without their keys", [{"kernel": "k"}])]}))
add("gpulib.playbook.patterns.pattern_of", Entry(lambda r: dict(kernel="relu_kernel"),
                                                 lambda a: patterns.pattern_of(a["kernel"]),
                                                 others={"kernel": [("None", None), ("an int", 3)]}))
_CHANNELS_CASES = [("one entry", (8,)), ("a zero", (0, 16)), ("a negative", (8, -16)), ("a fraction", (8, 2.5)),
                   ("None", None)]
_ALGO_CASES = [("auto", ("auto", "auto")), ("one entry", ("direct",)), ("nonsense", ("direct", "nonsense")),
               ("a string", "direct")]
for _name in ("estimate", "savings"):
    add(f"gpulib.playbook.memory.{_name}", Entry(
        lambda r: dict(batch=4, channels=(8, 16), algorithms=("direct", "gemm")),
        lambda a, fn=getattr(memory, _name): fn(a["batch"], a["channels"], a["algorithms"]),
        ints={"batch": 1}, others={"channels": _CHANNELS_CASES, "algorithms": _ALGO_CASES}))
add("gpulib.playbook.memory.estimate", Entry(
    lambda r: dict(image_shape=(1, 8, 8), classes=10, inplace_relu=False),
    lambda a: memory.estimate(4, image_shape=a["image_shape"], classes=a["classes"], inplace_relu=a["inplace_relu"]),
    ints={"classes": 2}, others={"image_shape": IMAGE_SHAPE_CASES, "inplace_relu": [("a string", "yes"), ("None", None)]},
    speaks={"image_shape": ("image",)}))
_LIMITS = roofline.DATASHEET["H200"]
_LIMITS_CASES = [("None", None), ("missing fp32", {"hbm": 4.8e12}), ("zero bandwidth", dict(_LIMITS, hbm=0.0)),
                 ("a negative peak", dict(_LIMITS, fp32=-1.0))]
add("gpulib.playbook.roofline.datasheet", Entry(lambda r: dict(device="NVIDIA H200"), lambda a: roofline.datasheet(a["device"]),
                                                others={"device": [("an int", 3), ("a list", ["H200"]),
                                                                   ("an unknown GPU", "NVIDIA A100-SXM4-80GB")]}))
add("gpulib.playbook.roofline.limit", Entry(lambda r: dict(intensity=10.0, peak=6.7e13, bandwidth=4.8e12),
                                            lambda a: roofline.limit(a["intensity"], a["peak"], a["bandwidth"]),
                                            reals={"intensity": "nonnegative", "peak": "positive", "bandwidth": "positive"}))
add("gpulib.playbook.roofline.conv_bytes", Entry(
    lambda r: dict(layer=dict(gpulib.book_layers.LAYER), in_bytes=4, out_bytes=4),
    lambda a: roofline.conv_bytes(a["layer"], a["in_bytes"], a["out_bytes"]), ints={"in_bytes": 1, "out_bytes": 1},
    others={"layer": [("None", None), ("missing K", {k: v for k, v in gpulib.book_layers.LAYER.items() if k != "K"}),
                      ("a negative H", dict(gpulib.book_layers.LAYER, H=-56))]}))
add("gpulib.playbook.roofline.gemm_bytes", Entry(lambda r: dict(size=64, in_bytes=4, out_bytes=4),
                                                 lambda a: roofline.gemm_bytes(a["size"], a["in_bytes"], a["out_bytes"]),
                                                 ints={"size": 1, "in_bytes": 1, "out_bytes": 1}))
add("gpulib.playbook.roofline.place", Entry(
    lambda r: dict(name="k", section="16.3", precision="fp32", flop=1e9, nbytes=1e6, ms=1.0, limits=dict(_LIMITS)),
    lambda a: roofline.place(a["name"], a["section"], a["precision"], a["flop"], a["nbytes"], a["ms"], a["limits"]),
    reals={"flop": "positive", "nbytes": "positive", "ms": "positive"}, choices=("precision",),
    others={"limits": _LIMITS_CASES, "name": [("None", None)]}, speaks={"limits": ("hbm", "fp32", "limits")}))
add("gpulib.playbook.roofline.memory_kernel", Entry(
    lambda r: dict(name="k", section="16.4", nbytes=1e6, ms=1.0, limits=dict(_LIMITS)),
    lambda a: roofline.memory_kernel(a["name"], a["section"], a["nbytes"], a["ms"], a["limits"]),
    reals={"nbytes": "positive", "ms": "positive"}, others={"limits": [_LIMITS_CASES[0], _LIMITS_CASES[2]]},
    speaks={"limits": ("hbm", "limits")}))


def _stored():
    from gpulib.bench import conv_direct, conv_gemm, cudnn_tensorcore

    return dict(conv_direct=conv_direct.load(), conv_gemm=conv_gemm.load(), cudnn_tensorcore=cudnn_tensorcore.load())


add("gpulib.playbook.roofline.book_kernels", Entry(
    lambda r: dict(_stored(), limits=dict(_LIMITS)),
    lambda a: roofline.book_kernels(a["conv_direct"], a["conv_gemm"], a["cudnn_tensorcore"], a["limits"]),
    others={"conv_direct": [("None", None), ("empty", {})], "conv_gemm": [("empty", {})],
            "cudnn_tensorcore": [("empty", {})], "limits": _LIMITS_CASES[:2]},
    speaks={"limits": ("fp32", "limits")}))
add("gpulib.playbook.roofline.table", Entry(lambda r: dict(rows=[]), lambda a: roofline.table(a["rows"]),
                                            others={"rows": [("None", None), ("numbers", [1]), ("rows without keys",
                                                                                                 [{"name": "x"}])]}))

# ---------------------------------------------------------------- data, files, checks, timing, source
add("gpulib.data.load_digits", Entry(lambda r: dict(test_fraction=0.2, seed=0),
                                     lambda a: gpulib.data.load_digits(a["test_fraction"], a["seed"]),
                                     reals={"test_fraction": "fraction"}, ints={"seed": 0}))
add("gpulib.data.check_split", Entry(lambda r: dict(data=_split(r)), lambda a: gpulib.data.check_split(a["data"]),
                                     others={"data": _split_cases()[:3] + [("negative labels", _negative_split())]},
                                     speaks={"data": ("X_train", "y_train")}))
add("gpulib.data.write_idx", Entry(lambda r: dict(path="/dev/null", array=np.zeros((2, 3), np.uint8)),
                                   lambda a: gpulib.data.write_idx(a["path"], a["array"]),
                                   others={"array": [("None", None), ("complex", np.zeros(3, np.complex64)),
                                                     ("a list", [1, 2])],
                                           "path": [("None", None), ("an int", 3)]}))
add("gpulib.check.validate", Entry(
    lambda r: dict(out=np.ones(4, f32), ref=np.ones(4), rtol=1e-6, scale=1.0),
    lambda a: check.validate(a["out"], a["ref"], rtol=a["rtol"], scale=a["scale"]),
    reals={"rtol": "positive", "scale": "nonnegative"}, optional=("rtol", "scale"),
    # (an out of another shape than ref is a failed check, a ValidationError: tests/test_check.py)
    others={"out": [("None", None), ("a string", "out")], "ref": [("None", None)]}))
add("gpulib.check.poisoned", Entry(lambda r: dict(shape=(2, 3), dtype=f32), lambda a: check.poisoned(a["shape"], a["dtype"]),
                                   others={"shape": [("a negative size", (2, -3)), ("a fraction", (2.5,)), ("None", None)],
                                           "dtype": [("complex", np.complex64), ("a string", "nonsense")]}))
add("gpulib.check.poisoned", Entry(lambda r: dict(device=True), lambda a: check.poisoned((2, 3), device=a["device"]),
                                   others={"device": _BOOL_CASES}))
add("gpulib.timing.benchmark", Entry(lambda r: dict(flush_l2=True, label="x"),
                                     lambda a: timing.benchmark(lambda: None, flush_l2=a["flush_l2"], label=a["label"]),
                                     optional=("label",), others={"flush_l2": _BOOL_CASES, "label": [("an int", 3)]}))
add("gpulib.check.poison_value", Entry(lambda r: dict(dtype=f32), lambda a: check.poison_value(a["dtype"]),
                                       others={"dtype": [("complex", np.complex64), ("a string", "nonsense")]}))
add("gpulib.check.unwritten_mask", Entry(lambda r: dict(arr=np.ones(3, f32)), lambda a: check.unwritten_mask(a["arr"]),
                                         others={"arr": [("complex", np.ones(3, np.complex64)), ("None", None)]}))
add("gpulib.timing.benchmark", Entry(
    lambda r: dict(fn=lambda: None, warmup=1, repeat=3), lambda a: timing.benchmark(a["fn"], warmup=a["warmup"],
                                                                                    repeat=a["repeat"]),
    ints={"warmup": 0, "repeat": 1}, others={"fn": [("None", None), ("a string", "fn")]}))
add("gpulib.timing.Timing.tflops", Entry(lambda r: dict(flop=1e9), lambda a: timing.Timing("x", [1.0]).tflops(a["flop"]),
                                         reals={"flop": "positive"}))
add("gpulib.source.show", Entry(lambda r: dict(obj=layers.relu), lambda a: source.show(a["obj"]),
                                others={"obj": [("a built-in", len), ("a number", 3), ("None", None),
                                                ("a function without source", eval("lambda: 0"))]}))
add("gpulib.source.source_of", Entry(lambda r: dict(obj=layers.relu), lambda a: source.source_of(a["obj"]),
                                     others={"obj": [("a built-in", len), ("a number", 3)]}))
add("gpulib.results.ratio_text", Entry(lambda r: dict(v=1.5), lambda a: results.ratio_text(a["v"]), optional=("v",),
                                       reals={"v": "positive"}, speaks={"v": ("vs_library",)}))
add("gpulib.results.is_part_of_call", Entry(lambda r: dict(name="im2col alone"),
                                            lambda a: results.is_part_of_call(a["name"]),
                                            others={"name": [("an int", 3), ("None", None)]}))
add("gpulib.conv.direct.constant_group", Entry(lambda r: dict(C=3, R=3, S=3, KB=1),
                                               lambda a: direct.constant_group(a["C"], a["R"], a["S"], a["KB"]),
                                               ints={"C": 1, "R": 1, "S": 1, "KB": 1}))
add("gpulib.playbook.correctness.run", Entry(lambda r: dict(name="memcheck", timeout=60),
                                             lambda a: correctness.run(a["name"], a["timeout"]), choices=("name",),
                                             ints={"timeout": 1}, gpu_only="the tools watch a real GPU"))
add("gpulib.playbook.correctness.tool_path", Entry(lambda r: dict(tool="memcheck"),
                                                   lambda a: correctness.tool_path(a["tool"]), choices=("tool",)))
add("gpulib.playbook.correctness.launch_and_kernel", Entry(lambda r: dict(report=" ** CUDA API Summary (cuda_api_sum):"),
                                                          lambda a: correctness.launch_and_kernel(a["report"]),
                                                          others={"report": [("None", None), ("an int", 3)]}))
add("gpulib.playbook.correctness.first_nonfinite", Entry(
    lambda r: dict(named=[("X", r.standard_normal(3)), ("Y", np.array([1.0, np.nan]))]),
    lambda a: correctness.first_nonfinite(a["named"]),
    others={"named": [("None", None), ("a string", "X"), ("pairs of three", [("X", 1, 2)])]}))
add("gpulib.results.short_name", Entry(lambda r: dict(name="NVIDIA H200"), lambda a: results.short_name(a["name"]),
                                       others={"name": [("an int", 3)]}))
add("gpulib.precision.round_to", Entry(lambda r: dict(x=r.standard_normal(4), fmt="fp16"),
                                       lambda a: precision.round_to(a["x"], a["fmt"]), choices=("fmt",),
                                       others={"x": [("complex", np.ones(3, np.complex64)), ("a string", "x")]}))
add("gpulib.precision.unit_roundoff", Entry(lambda r: dict(fmt="fp16"), lambda a: precision.unit_roundoff(a["fmt"]),
                                            choices=("fmt",)))
add("gpulib.precision.bf16_bits", Entry(lambda r: dict(x=r.standard_normal(4)), lambda a: precision.bf16_bits(a["x"]),
                                        others={"x": [("complex", np.ones(3, np.complex64)), ("a string", "x")]}))
add("gpulib.precision.from_bf16_bits", Entry(lambda r: dict(words=np.arange(4, dtype=np.uint16)),
                                             lambda a: precision.from_bf16_bits(a["words"]),
                                             others={"words": [("floats", np.ones(3, f32)), ("negative", np.array([-1])),
                                                               ("a string", "x")]}))
add("gpulib.precision.gemm_errors", Entry(
    lambda r: dict(A=r.standard_normal((5, 4)), B=r.standard_normal((4, 3))), lambda a: precision.gemm_errors(a["A"], a["B"]),
    arrays=("A", "B"), numeric=("A", "B"), tied={"A": (1,), "B": (0,)}, speaks={"A": ("inner",), "B": ("inner",)},
    others={"A": [("all zero", np.zeros((5, 4)))]}))
add("gpulib.precision.fp16_underflow", Entry(lambda r: dict(values=r.standard_normal(5), scale=1.0),
                                             lambda a: precision.fp16_underflow(a["values"], a["scale"]),
                                             reals={"scale": "positive"},
                                             others={"values": [("None", None), ("empty", np.zeros(0)), ("a string", "v")]}))
add("gpulib.shapes.conv_output_size", Entry(
    lambda r: dict(size=6, filter_size=3, padding=1, stride=1),
    lambda a: shape_rules.conv_output_size(a["size"], a["filter_size"], a["padding"], a["stride"]),
    ints={"size": 1, "filter_size": 1, "padding": 0, "stride": 1},
    others={"filter_size": [("larger than the padded image", 9)]}))
add("gpulib.shapes.output_shape", shape_entry(shape_rules.output_shape))
add("gpulib.env.sized", Entry(lambda r: dict(gpu=1, sim=2), lambda a: gpulib.env.sized(a["gpu"], a["sim"]),
                              others={"gpu": [("None", None)], "sim": [("None", None)]}))
_LAYER_CASES = [("None", None), ("missing K", {k: v for k, v in gpulib.book_layers.LAYER.items() if k != "K"}),
                ("a negative H", dict(gpulib.book_layers.LAYER, H=-56)),
                ("a fractional C", dict(gpulib.book_layers.LAYER, C=6.5)),
                ("a string", "LAYER")]
for _name in ("shapes", "output_shape", "flop", "describe", "layer_inputs"):
    add(f"gpulib.book_layers.{_name}", Entry(lambda r: dict(layer=dict(gpulib.book_layers.LAYER, N=1, C=2, H=4, W=4, K=2)),
                                             lambda a, fn=getattr(gpulib.book_layers, _name): fn(a["layer"]),
                                             others={"layer": _LAYER_CASES}))

# ---------------------------------------------------------------- 16.2's anatomy and 16.5's hardware models
add("gpulib.cnn.anatomy.receptive_field", Entry(lambda r: dict(layers=[("conv", 3, 1), ("pool", 2, 2)]),
                                                lambda a: anatomy.receptive_field(a["layers"]),
                                                others={"layers": [("None", None), ("a zero filter", [("c", 0, 1)]),
                                                                   ("numbers", [3, 1]), ("empty", [])]}))
add("gpulib.cnn.anatomy.per_channel_terms", Entry(
    lambda r: dict(_conv_args(r), n=0, k=0), lambda a: anatomy.per_channel_terms(a["X"], a["W"], a["padding"], a["stride"],
                                                                               a["n"], a["k"]),
    arrays=("X", "W"), numeric=("X", "W"), tied={"X": (1,), "W": (1,)}, ints={"padding": 0, "stride": 1, "n": 0, "k": 0},
    others={"n": [("past the batch", 2)], "k": [("past the filters", 4)]}, speaks={"X": ("channel",)}))
add("gpulib.cnn.anatomy.conv1x1_as_matmul", Entry(
    lambda r: _arrays(r, X=(2, 3, 4, 4), W=(5, 3, 1, 1), b=(5,)), lambda a: anatomy.conv1x1_as_matmul(a["X"], a["W"], a["b"]),
    arrays=("X", "W", "b"), numeric=("X", "W", "b"), optional=("b",), tied={"X": (1,), "W": (0, 1, 2), "b": (0,)},
    speaks={"X": ("channel",), "b": ("filters",)}))
add("gpulib.cnn.anatomy.dilate", Entry(lambda r: dict(_arrays(r, dY=(1, 2, 3, 3)), stride=2),
                                       lambda a: anatomy.dilate(a["dY"], a["stride"]), arrays=("dY",), numeric=("dY",),
                                       ints={"stride": 1}))
add("gpulib.cnn.anatomy.transposed_conv", Entry(
    lambda r: dict(_arrays(r, dY=(1, 2, 3, 3), W=(2, 3, 3, 3)), input_shape=(1, 3, 5, 5), padding=1, stride=2),
    lambda a: anatomy.transposed_conv(a["dY"], a["W"], a["input_shape"], a["padding"], a["stride"]),
    arrays=("dY", "W"), numeric=("dY", "W"), tied={"dY": (1,), "W": (0,)}, ints={"padding": 0, "stride": 1},
    others={"input_shape": SHAPE_CASES}, speaks={"dY": ("filters", "W"), "W": ("dY", "filters"),
                                                 "input_shape": ("dY",)}))
add("gpulib.cnn.anatomy.strides_in", Entry(lambda r: dict(layout="NCHW", shape=(2, 3, 4, 4), itemsize=4),
                                           lambda a: anatomy.strides_in(a["layout"], a["shape"], a["itemsize"]),
                                           choices=("layout",), ints={"itemsize": 1}, others={"shape": SHAPE_CASES}))
_MATRIX = ("matrix",)
add("gpulib.tensorcore.layout.element", Entry(lambda r: dict(matrix="a", lane=3, index=2),
                                              lambda a: layout.element(a["matrix"], a["lane"], a["index"]), choices=_MATRIX,
                                              ints={"lane": 0, "index": 0}, others={"lane": [("32", 32)], "index": [("8", 8)]}))
add("gpulib.tensorcore.layout.owners", Entry(lambda r: dict(matrix="b"), lambda a: layout.owners(a["matrix"]), choices=_MATRIX))
add("gpulib.tensorcore.layout.owner", Entry(lambda r: dict(matrix="c", row=3, col=2),
                                            lambda a: layout.owner(a["matrix"], a["row"], a["col"]), choices=_MATRIX,
                                            ints={"row": 0, "col": 0}, others={"row": [("16", 16)], "col": [("8", 8)]}))
add("gpulib.tensorcore.layout.gather", Entry(lambda r: dict(matrix="a", tile=r.standard_normal((16, 16))),
                                             lambda a: layout.gather(a["matrix"], a["tile"]), choices=_MATRIX,
                                             arrays=("tile",), numeric=("tile",), tied={"tile": (0, 1)}))
add("gpulib.tensorcore.layout.scatter", Entry(lambda r: dict(matrix="c", fragments=r.standard_normal((32, 4))),
                                              lambda a: layout.scatter(a["matrix"], a["fragments"]), choices=_MATRIX,
                                              arrays=("fragments",), numeric=("fragments",), tied={"fragments": (0, 1)}))
add("gpulib.tensorcore.layout.warp_mma", Entry(
    lambda r: dict(a_frag=r.standard_normal((32, 8)), b_frag=r.standard_normal((32, 4)), c_frag=r.standard_normal((32, 4))),
    lambda a: layout.warp_mma(a["a_frag"], a["b_frag"], a["c_frag"]), arrays=("a_frag", "b_frag", "c_frag"),
    numeric=("a_frag", "b_frag", "c_frag"), tied={"a_frag": (0, 1), "b_frag": (0, 1), "c_frag": (0, 1)}))
_MODE = ("mode",)
add("gpulib.tensorcore.smem_layout.row_bytes", Entry(lambda r: dict(mode="128B"), lambda a: smem_layout.row_bytes(a["mode"]),
                                                     choices=_MODE))
add("gpulib.tensorcore.smem_layout.swizzle", Entry(lambda r: dict(address=160, mode="128B"),
                                                   lambda a: smem_layout.swizzle(a["address"], a["mode"]), choices=_MODE,
                                                   ints={"address": 0}))
add("gpulib.tensorcore.smem_layout.swizzle_array", Entry(
    lambda r: dict(addresses=np.arange(0, 256, 16), mode="64B"), lambda a: smem_layout.swizzle_array(a["addresses"], a["mode"]),
    choices=_MODE, others={"addresses": [("negative", np.array([-16])), ("floats", np.array([16.5])), ("None", None)]}))
add("gpulib.tensorcore.smem_layout.descriptor", Entry(
    lambda r: dict(start=1024, lbo=16, sbo=1024, mode="128B", base_offset=0),
    lambda a: smem_layout.descriptor(a["start"], a["lbo"], a["sbo"], a["mode"], a["base_offset"]), choices=_MODE,
    ints={"start": 0, "lbo": 0, "sbo": 0, "base_offset": 0},
    others={"start": [("not a multiple of 16", 8)], "base_offset": [("8", 8)]},
    speaks={"lbo": ("leading_byte_offset",), "sbo": ("stride_byte_offset",)}))
add("gpulib.tensorcore.smem_layout.decode", Entry(lambda r: dict(desc=smem_layout.descriptor(1024, 16, 1024)),
                                                  lambda a: smem_layout.decode(a["desc"]), ints={"desc": 0},
                                                  others={"desc": [("past 64 bits", 1 << 64)]}))
add("gpulib.tensorcore.smem_layout.kmajor_offset", Entry(
    lambda r: dict(row=3, k=8, mode="128B", itemsize=2), lambda a: smem_layout.kmajor_offset(a["row"], a["k"], a["mode"],
                                                                                             itemsize=a["itemsize"]),
    choices=_MODE, ints={"row": 0, "k": 0, "itemsize": 1}, others={"k": [("past the row", 64)]}))
add("gpulib.tensorcore.smem_layout.atom_chunks", Entry(lambda r: dict(mode="128B"), lambda a: smem_layout.atom_chunks(a["mode"]),
                                                       choices=_MODE))
add("gpulib.tensorcore.smem_layout.bank_passes", Entry(lambda r: dict(mode="128B", chunk=0),
                                                       lambda a: smem_layout.bank_passes(a["mode"], a["chunk"]), choices=_MODE,
                                                       ints={"chunk": 0}, others={"chunk": [("8", 8)]}))
add("gpulib.tensorcore.wgmma_model.accumulator_element", Entry(
    lambda r: dict(thread=5, index=3, n=16), lambda a: wgmma_model.accumulator_element(a["thread"], a["index"], a["n"]),
    ints={"thread": 0, "index": 0, "n": 8}, others={"thread": [("128", 128)], "n": [("12", 12)]},
    speaks={"n": ("N",)}))
add("gpulib.tensorcore.wgmma_model.fragments", Entry(lambda r: dict(D=r.standard_normal((64, 16))),
                                                     lambda a: wgmma_model.fragments(a["D"]), arrays=("D",), numeric=("D",),
                                                     tied={"D": (0,)}, others={"D": [("12 columns", np.zeros((64, 12)))]},
                                                     speaks={"D": ("N",)}))
add("gpulib.tensorcore.wgmma_model.from_fragments", Entry(lambda r: dict(regs=r.standard_normal((128, 8))),
                                                          lambda a: wgmma_model.from_fragments(a["regs"]), arrays=("regs",),
                                                          numeric=("regs",), tied={"regs": (0,)}))


def _smem_args(r):
    smem = np.zeros(8192, np.uint8)
    wgmma_model.write_kmajor(smem, 0, r.standard_normal((64, 16)), "128B", 1024)
    wgmma_model.write_kmajor(smem, 4096, r.standard_normal((16, 16)), "128B", 1024)
    return dict(smem=smem, a_desc=smem_layout.descriptor(0, 16, 1024), b_desc=smem_layout.descriptor(4096, 16, 1024), n=16,
                start=0, tile=r.standard_normal((64, 16)), rows=64, k=16)


_SMEM_CASES = [("None", None), ("floats", np.zeros(8192, f32)), ("2-D", np.zeros((64, 128), np.uint8))]
add("gpulib.tensorcore.wgmma_model.write_kmajor", Entry(
    _smem_args, lambda a: wgmma_model.write_kmajor(a["smem"], a["start"], a["tile"], "128B", 1024), ints={"start": 0},
    arrays=("tile",), numeric=("tile",), others={"smem": _SMEM_CASES, "start": [("past the image", 8192)]},
    speaks={"start": ("byte",), "tile": ("K", "rows")}))
add("gpulib.tensorcore.wgmma_model.read_kmajor", Entry(
    _smem_args, lambda a: wgmma_model.read_kmajor(a["smem"], a["a_desc"], a["rows"], a["k"]),
    ints={"a_desc": 0, "rows": 1, "k": 1}, others={"smem": _SMEM_CASES, "rows": [("past the image", 1024)]},
    speaks={"a_desc": ("desc",), "rows": ("row",)}))
for _name in ("multiply", "warpgroup_products"):
    add(f"gpulib.tensorcore.wgmma_model.{_name}", Entry(
        _smem_args, lambda a, fn=getattr(wgmma_model, _name): fn(a["smem"], a["a_desc"], a["b_desc"], a["n"]),
        ints={"a_desc": 0, "b_desc": 0, "n": 8}, others={"smem": _SMEM_CASES, "n": [("12", 12)]},
        speaks={"n": ("N",), "a_desc": ("desc",), "b_desc": ("desc",)}))
add("gpulib.tensorcore.wgmma_model.kmajor_addresses", Entry(
    lambda r: dict(start=0, rows=np.arange(8), k=0, mode="128B", sbo=1024),
    lambda a: wgmma_model.kmajor_addresses(a["start"], a["rows"], a["k"], a["mode"], a["sbo"]), choices=_MODE,
    ints={"start": 0, "k": 0, "sbo": 0}, others={"rows": [("negative", np.array([-1])), ("None", None)]},
    speaks={"sbo": ("stride_byte_offset",)}))
for _name in ("tensor_map", "tensor_map_box", "cached_map"):
    _box = (lambda a: a["box_rows"]) if _name == "tensor_map" else (lambda a: (a["box_rows"], 64))
    add(f"gpulib.tensorcore.tma.{_name}", Entry(
        lambda r: dict(array=dev(r.standard_normal((64, 64)).astype(f16)), box_rows=64),
        lambda a, fn=getattr(tma, _name), box=_box: fn(a["array"], box(a)), arrays=("array",), device_only=("array",),
        any_dtype=("array",), any_shape=("array",), ints={"box_rows": 1},
        others={"array": [("float32", dev(np.zeros((64, 64), f32))), ("an odd row", dev(np.zeros((64, 60), f16)))],
                "box_rows": [("257", 257)]}, speaks={"box_rows": ("box",), "array": ("fp16",)}))
def _wgmma_launch_args(r):
    kernel, shared = tc_gemm.KERNELS["v5", "fp16"][tc_gemm.V5_DEFAULT]
    bn = tc_gemm.CONFIGS["v5"][0][tc_gemm.V5_DEFAULT][0]
    return dict(_tc_operands(r, M=tc_gemm.V5_BM, N=bn, K=64), kernel=kernel, grid=1, block=tc_gemm.V5_THREADS, shared=shared)


add("gpulib.tensorcore.wgmma.launch", Entry(
    _wgmma_launch_args, lambda a: wgmma.launch(a["kernel"], a["grid"], a["block"], a["shared"], a["A"], a["Bt"], a["C"]),
    ints={"grid": 1, "block": 1, "shared": 0},
    others={"block": [("1025 threads", 1025), ("(32, 33) threads", (32, 33))], "shared": [("more than a block may hold",
                                                                                           300 * 1024)],
            "kernel": [("None", None), ("a function", len)]},
    speaks={"shared": ("shared_bytes",), "block": ("threads", "block")}, launches=True))


# ---------------------------------------------------------------- the float64 references (gpulib.reference)
def _ref_entry(fn, make, arrays, tied, ints=None, choices=(), optional=(), speaks=None, others=None, any_shape=()):
    return Entry(make, fn, arrays=arrays, numeric=arrays, tied=tied, ints=ints or {}, choices=choices, optional=optional,
                 speaks=speaks or {}, others=others or {}, any_shape=any_shape)


add("gpulib.reference.activate", _ref_entry(lambda a: reference.activate(a["Z"], a["activation"]),
                                            lambda r: dict(Z=r.standard_normal((3, 4)), activation="relu"), ("Z",), {},
                                            choices=("activation",), any_shape=("Z",)))
add("gpulib.reference.activation_grad", _ref_entry(lambda a: reference.activation_grad(a["H"], a["activation"]),
                                                   lambda r: dict(H=r.standard_normal((3, 4)), activation="tanh"), ("H",),
                                                   {}, choices=("activation",), any_shape=("H",)))
add("gpulib.reference.layer_forward", _ref_entry(
    lambda a: reference.layer_forward(a["W"], a["b"], a["h_prev"]), lambda r: _arrays(r, W=(3, 4), b=(3,), h_prev=(4,)),
    ("W", "b", "h_prev"), {"W": (0, 1), "b": (0,), "h_prev": (0,)}))
add("gpulib.reference.dense_forward", _ref_entry(
    lambda a: reference.dense_forward(a["X"], a["W"], a["b"]), lambda r: _arrays(r, X=(3, 4), W=(2, 4), b=(2,)),
    ("X", "W", "b"), {"X": (1,), "W": (0, 1), "b": (0,)}))
add("gpulib.reference.dense_magnitude", _ref_entry(
    lambda a: reference.dense_magnitude(a["X"], a["W"], a["b"]), lambda r: _arrays(r, X=(3, 4), W=(2, 4), b=(2,)),
    ("X", "W", "b"), {"X": (1,), "W": (0, 1), "b": (0,)}))
add("gpulib.reference.dense_backward", _ref_entry(
    lambda a: reference.dense_backward(a["X"], a["W"], a["H"], a["dH"]),
    lambda r: _arrays(r, X=(3, 4), W=(2, 4), H=(3, 2), dH=(3, 2)), ("X", "W", "H", "dH"),
    {"X": (0, 1), "W": (0, 1), "H": (0, 1), "dH": (0, 1)}))
add("gpulib.reference.softmax", _ref_entry(lambda a: reference.softmax(a["Z"]), lambda r: _arrays(r, Z=(3, 5)), ("Z",), {}))
for _name in ("softmax_cross_entropy", "softmax_cross_entropy_grad"):
    add(f"gpulib.reference.{_name}", _ref_entry(
        lambda a, fn=getattr(reference, _name): fn(a["Z"], a["labels"]), lambda r: dict(_arrays(r, Z=(3, 5)), labels=_labels(3)),
        ("Z",), {"Z": (0,)}, others={"labels": [("out of range", np.array([0, 5, 1])), ("negative", np.array([0, -1, 1])),
                                                ("floats", np.array([0.0, 1.0, 2.0])), ("too few", np.array([0, 1])),
                                                ("None", None)]}))


def _mlp_params(r):
    return [(r.standard_normal((5, 4)), r.standard_normal(5)), (r.standard_normal((3, 5)), r.standard_normal(3))]


_PARAMS_CASES = [("empty", []), ("None", None), ("unchained", [(np.ones((5, 4)), np.ones(5)), (np.ones((3, 4)), np.ones(3))])]
add("gpulib.reference.mlp_forward", Entry(lambda r: dict(params=_mlp_params(r), X=r.standard_normal((6, 4))),
                                          lambda a: reference.mlp_forward(a["params"], a["X"]),
                                          others={"params": _PARAMS_CASES, "X": [("other features", np.ones((6, 5))),
                                                                                 ("None", None)]},
                                          speaks={"X": ("features", "params")}))
for _name in ("mlp_loss", "mlp_loss_and_grads"):
    add(f"gpulib.reference.{_name}", Entry(
        lambda r: dict(params=_mlp_params(r), X=r.standard_normal((6, 4)), labels=_labels(6, 3)),
        lambda a, fn=getattr(reference, _name): fn(a["params"], a["X"], a["labels"]),
        others={"params": _PARAMS_CASES, "X": [("other features", np.ones((6, 5))), ("None", None)],
                "labels": [("out of range", np.array([0, 1, 2, 3, 0, 1])), ("too few", np.array([0, 1]))]},
        speaks={"X": ("features", "params"), "labels": ("classes",)}))
add("gpulib.reference.numerical_grad", Entry(lambda r: dict(f=lambda: 0.0, x=r.standard_normal(3), eps=1e-6),
                                             lambda a: reference.numerical_grad(a["f"], a["x"], a["eps"]),
                                             reals={"eps": "positive"},
                                             others={"f": [("None", None), ("a number", 3)], "x": [("None", None),
                                                                                                   ("a string", "x")]}))
for _fn in (reference.conv2d, reference.conv2d_magnitude):
    add(_qualified(_fn), conv_entry(_fn, launches=False, numeric=("X", "W", "b")))
add("gpulib.reference.conv2d_backward", backward_entry(reference.conv2d_backward, launches=False, numeric=("X", "W", "dY")))
for _name in ("max_pool2d", "avg_pool2d"):
    add(f"gpulib.reference.{_name}", _ref_entry(lambda a, fn=getattr(reference, _name): fn(a["X"], a["size"]),
                                                lambda r: dict(_arrays(r, X=(2, 3, 4, 4)), size=2), ("X",), {},
                                                ints={"size": 1}, others={"size": [("larger than the image", 5)]}))
    add(f"gpulib.reference.{_name}_backward", _ref_entry(
        lambda a, fn=getattr(reference, f"{_name}_backward"): fn(a["X"], a["dY"], a["size"]),
        lambda r: dict(_arrays(r, X=(2, 3, 4, 4), dY=(2, 3, 2, 2)), size=2), ("X", "dY"), {"X": (0, 1), "dY": (0, 1, 2, 3)},
        ints={"size": 1}, speaks={"size": ("dY",), "X": ("dY",)}))
add("gpulib.reference.im2col", _ref_entry(lambda a: reference.im2col(a["X"], a["R"], 3, a["padding"], a["stride"]),
                                          lambda r: dict(_arrays(r, X=(2, 3, 6, 5)), R=3, padding=1, stride=1), ("X",), {},
                                          ints={"R": 1, "padding": 0, "stride": 1}))
add("gpulib.reference.col2im", _ref_entry(
    lambda a: reference.col2im(a["dX_col"], (2, 3, 6, 5), a["R"], 3, a["padding"], a["stride"]),
    lambda r: dict(_arrays(r, dX_col=(27, 60)), R=3, padding=1, stride=1), ("dX_col",), {"dX_col": (0, 1)},
    ints={"R": 1, "padding": 0, "stride": 1}))

# ---------------------------------------------------------------- files (their corrupt contents: test_bad_input.py)
FILES = Path(tempfile.mkdtemp(prefix="gpulib-sweep-"))


def mnist_files(directory: Path, images=(12, 28, 28), test_images=(4, 28, 28)) -> Path:
    """The four MNIST files (random pixels) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for stem, shape in (("train", images), ("t10k", test_images)):
        gpulib.data.write_idx(directory / f"{stem}-images-idx3-ubyte", rng.integers(0, 256, shape, dtype=np.uint8))
        gpulib.data.write_idx(directory / f"{stem}-labels-idx1-ubyte", rng.integers(0, 10, shape[0], dtype=np.uint8))
    return directory


mnist_files(FILES / "mnist")
add("gpulib.data.read_idx", Entry(lambda r: dict(path=FILES / "mnist" / "t10k-labels-idx1-ubyte"),
                                  lambda a: gpulib.data.read_idx(a["path"]),
                                  others={"path": [("None", None), ("an int", 3), ("a list", ["a"])]}))
add("gpulib.data.load_mnist", Entry(lambda r: dict(directory=FILES / "mnist", test_fraction=None),
                                    lambda a: gpulib.data.load_mnist(a["directory"], a["test_fraction"]),
                                    optional=("test_fraction",),
                                    others={"directory": [("None", None), ("an int", 3)],
                                            "test_fraction": [("2", 2.0), ("NaN", float("nan")), ("a string", "0.2")]}))


# ---------------------------------------------------------------- public, but not entry points
INTERNAL = {
    # whole modules: the machinery every entry point goes through, called by gpulib's own code
    "gpulib.arrays.": "the argument checks themselves (require, require_int, ...) and transfers every wrapper uses",
    "gpulib.launch.": "the launch hook and bound launches that every kernel call of gpulib passes through",
    "gpulib.simulator.": "gpulib's patches of Numba's simulator, installed once at import",
    "gpulib.trace.": "the grader's tracer (its own refusals: test_the_tracer_refuses_launches_it_cannot_trace)",
    "gpulib.style.": "matplotlib settings of the figures",
    # records: dataclasses that gpulib fills and returns
    "gpulib.check.Validation": "a record validate returns",
    "gpulib.conv.autotune.Result": "a record the auto-tuner returns",
    "gpulib.gemm.autotune.Result": "a record the GEMM auto-tuner returns",
    "gpulib.conv.tensorcore.Operands": "what prepare returns (launch checks it: swept)",
    "gpulib.conv.tensorcore.launch_plan": "the launch of versions 3-7 worked out from operands conv2d_tc_nhwc16 and "
                                          "launch have checked (16.5's benchmark times v7's patch shapes through it)",
    "gpulib.data.Split": "a record of arrays; train and check_split refuse a bad one (swept)",
    "gpulib.mlp.train.History": "a record train returns",
    "gpulib.playbook.memory.Estimate": "a record estimate returns",
    "gpulib.playbook.profile.Launch": "a record the profiler keeps",
    "gpulib.playbook.profile.Op": "a record the profiler keeps",
    "gpulib.playbook.profile.Profiler.launch": "the watcher hook gpulib.launch calls",
    "gpulib.playbook.replay.Recording": "what record() yields",
    "gpulib.playbook.replay.Graph": "what Recording.graph returns",
    "gpulib.timing.Timing": "a record benchmark returns (its tflops is swept)",
    "gpulib.tensorcore.wgmma.Descriptor": "a Numba type of the wgmma instructions",
    "gpulib.tensorcore.tma.TensorMap": "what tensor_map returns (its constructor is tensor_map_box's, swept)",
    # decorators and the checks other entry points call
    "gpulib.tensorcore.wmma.kernel": "a decorator that compiles a kernel (as cuda.jit)",
    "gpulib.tensorcore.wgmma.kernel": "a decorator that compiles a kernel (as cuda.jit)",
    "gpulib.tensorcore.tma.kernel": "a decorator that compiles a kernel (as cuda.jit)",
    "gpulib.shapes.check_conv_inputs": "the convolutions' argument check (every convolution above is swept through it)",
    "gpulib.shapes.bias_or_zeros": "called after check_conv_inputs",
    "gpulib.conv.front.require_choice": "the algorithm argument's check (swept through get and conv2d)",
    "gpulib.env.number_setting": "reads gpulib's numeric settings (test_numeric_settings_are_checked_by_name)",
    "gpulib.book_layers.check_layer": "the layer dict's check (swept through shapes, flop, describe, ...)",
    "gpulib.cnn.model.check_grads": "step's check (swept through ImageClassifier.step)",
    "gpulib.cnn.model.reference_params": "the reference networks' check (swept through reference_loss and reference_grads)",
    "gpulib.cnn.model.check_model_shape": "the CNNs' constructor check (swept through SmallCNN and BookCNN)",
    "gpulib.gemm.api.check_operands": "the GEMM launchers' check (swept through launch_v3/4/5 and library_matmul)",
    "gpulib.shapes.": "the shape rules and their checks, swept through every function that uses them",
    "gpulib.conv.direct.conv2d_v3_kernel": "version 3's kernel factory, called by conv2d_direct after its checks (swept)",
    "gpulib.cnn.layers.grid_nchw": "the launch grid of the kernels over [N, C, H, W] planes, worked out after their "
                                   "callers' checks (swept through them)",
    "gpulib.reductions.staged.staged_floats": "the shared memory one staged image takes, worked out by conv2d_backward "
                                              "after its checks (swept)",
}


def internal(name: str) -> str | None:
    """Why ``name`` is not an entry point, or None."""
    for key, why in INTERNAL.items():
        if name == key or (key.endswith(".") and name.startswith(key)):
            return why
    return None


# ---------------------------------------------------------------- wrong-looking input taken on purpose
def _product_is_right(result, args) -> None:
    """C holds A·B (float32 tolerance): a transposed view (unit stride along rows) read correctly."""
    A, B = (np.asarray(args[k].copy_to_host() if hasattr(args[k], "copy_to_host") else args[k], np.float64) for k in "AB")
    gpulib.validate(args["C"], A @ B)


def _conv_is_right(result, args) -> None:
    gpulib.validate(result, reference.conv2d(args["X"], args["W"], args["b"], 1, 1),
                    scale=4 * float(reference.conv2d_magnitude(args["X"], args["W"], args["b"], 1, 1).max()))


def _sized_returns_its_choice(result, args) -> None:
    assert result is (args["gpu"] if gpulib.on_gpu() else args["sim"])


def _fp16_product_is_right(result, args) -> None:
    """C (fp16) holds A·Bᵀ rounded to fp16: v8 writes C in the operands' type when given so."""
    A, Bt = (np.asarray(args[k].copy_to_host(), np.float64) for k in ("A", "Bt"))
    gpulib.validate(args["C"], A @ Bt.T, scale=float((np.abs(A) @ np.abs(Bt).T).max()), name="v8 fp16 C")


def _v8_config_is_named(result, args) -> None:
    assert result == tc_gemm.V8_DEFAULT, result


ACCEPTED: dict = {  # (entry point, argument, label) -> (why, check(result, args))
    ("gpulib.gemm.tensorcore.launch#7", "C", "float16"): (
        "v8 writes C in the operands' 16-bit type (as cuBLAS does for fp16 operands) when C is given so",
        _fp16_product_is_right),
    ("gpulib.gemm.tensorcore.check_launch#7", "C", "float16"): (
        "v8 takes a C in the operands' 16-bit type", _v8_config_is_named),
    ("gpulib.gemm.tensorcore.launch#8", "C", "float16"): (
        "v9 writes C in the operands' 16-bit type, as v8 does", _fp16_product_is_right),
    ("gpulib.gemm.tensorcore.check_launch#8", "C", "float16"): (
        "v9 takes a C in the operands' 16-bit type", _v8_config_is_named),
    **{(f"gpulib.gemm.{fn}#0", op, "not C-order"): (
        "a transposed view (unit stride along its rows) is an operand every GEMM kernel reads, as cuBLAS takes "
        "transposed operands; matmul's trans_a/trans_b pass them", _product_is_right)
       for fn in ("api.launch_v3", "api.launch_v4", "api.launch_v5", "api.launch_v6", "api.library_matmul",
                  "autotune.launch_chosen") for op in "AB"},
    ("gpulib.conv.implicit_gemm.conv2d_implicit_precomp_gemm#1", "table", "a NumPy table"): (
        "row_table(C, R, S) as NumPy is the same table: compared, then copied over", _conv_is_right),
    **{("gpulib.env.sized#0", which, "None"): ("sized returns one of its two arguments, whatever they are",
                                             _sized_returns_its_choice) for which in ("gpu", "sim")},
}


def accepted(variant: str) -> dict:
    """(argument, label) -> the check of what the entry point ``variant`` ("name#i") returns for an input it
    takes on purpose."""
    return {(target, label): check for (entry, target, label), (_, check) in ACCEPTED.items() if entry == variant}


# ---------------------------------------------------------------- keyword arguments: versions, tiles, switches
def _keyword_entry(fn, extra: dict, *, ints=None, shapes=None, **kinds) -> Entry:
    """A convolution with only its keyword arguments ``extra`` (their valid values) swept: the
    arrays, padding and stride are conv_entry's own variant's."""
    return conv_entry(fn, shapes=shapes, keywords=extra,
                      **{"arrays": (), "ints": ints or {}, "optional": (), "tied": {}, "speaks": {}, **kinds})


add("gpulib.conv.direct.conv2d_direct", _keyword_entry(
    direct.conv2d_direct, dict(version="v2", channels_per_block=4, tile=8), ints={"channels_per_block": 1, "tile": 1},
    choices=("version",), optional=("version",), others={"tile": [("33 (1089 threads a block)", 33)],
                                                          "channels_per_block": [("33", 33)]}))
add("gpulib.conv.implicit_gemm.conv2d_implicit_gemm", _keyword_entry(
    implicit_gemm.conv2d_implicit_gemm, dict(tile=dict(implicit_gemm.tile_shape())), optional=("tile",),
    others={"tile": [("4096 threads a block", _TOO_BIG), ("a string", "64x64"), ("missing TN", dict(BM=16, BN=16, BK=4,
                                                                                                       TM=2))]},
    speaks={"tile": ("threads", "TN")}))
add("gpulib.conv.implicit_gemm.conv2d_implicit_precomp_gemm", _keyword_entry(
    implicit_gemm.conv2d_implicit_precomp_gemm, dict(table=None), optional=("table",),
    others={"table": [("a NumPy table", implicit_gemm.row_table(3, 3, 3)),
                      ("another layer's", dev(implicit_gemm.row_table(27, 1, 1))), ("a string", "table")]}))
add("gpulib.conv.im2col.conv2d_im2col", _keyword_entry(im2col.conv2d_im2col, dict(gemm="library"), choices=("gemm",)))
add("gpulib.conv.im2col.im2col", Entry(lambda r: dict(_arrays(r, X=(2, 3, 6, 5)), version="v3"),
                                       lambda a: im2col.im2col(a["X"], 3, 3, 1, 1, version=a["version"]),
                                       choices=("version",), optional=("version",), launches=True))
add("gpulib.conv.tensorcore.conv2d_tc", _keyword_entry(tc_conv.conv2d_tc, dict(version="v2"), choices=("version",),
                                                       shapes=TC_SHAPES))
add("gpulib.cnn.layers.conv2d_backward", Entry(
    lambda r: dict(_conv_args(r), dY=r.standard_normal((2, 4, 6, 5)).astype(f32), need_dX=False),
    lambda a: layers.conv2d_backward(a["X"], a["W"], a["dY"], 1, 1, need_dX=a["need_dX"]), others={"need_dX": _BOOL_CASES},
    launches=True))
add("gpulib.conv.im2col.conv2d_im2col_backward", Entry(
    lambda r: dict(_conv_args(r), dY=r.standard_normal((2, 4, 6, 5)).astype(f32), need_dX=False, gemm="library"),
    lambda a: im2col.conv2d_im2col_backward(a["X"], a["W"], a["dY"], 1, 1, need_dX=a["need_dX"], gemm=a["gemm"]),
    others={"need_dX": _BOOL_CASES}, choices=("gemm",), launches=True))
add("gpulib.mlp.layers.dense_backward", Entry(
    lambda r: dict(_arrays(r, X=(3, 4), W=(2, 4), H=(3, 2), dH=(3, 2)), need_dX=False, activation="relu"),
    lambda a: mlp_layers.dense_backward(a["X"], a["W"], a["H"], a["dH"], a["activation"], need_dX=a["need_dX"]),
    others={"need_dX": _BOOL_CASES}, choices=("activation",), launches=True))
for _name in ("softmax_cross_entropy", "softmax_cross_entropy_backward"):
    add(f"gpulib.mlp.layers.{_name}", Entry(
        lambda r: dict(Z=np.full((3, 5), 0.2, f32), labels=_labels(3), check_labels=True),
        lambda a, fn=getattr(mlp_layers, _name): fn(a["Z"], a["labels"], check_labels=a["check_labels"]),
        others={"check_labels": _BOOL_CASES}, launches=True))
add("gpulib.cnn.layers.max_pool2d_backward", Entry(
    lambda r: dict(_arrays(r, dY=(2, 3, 2, 2)), argmax=np.zeros((2, 3, 2, 2), np.int32), check_argmax=True),
    lambda a: layers.max_pool2d_backward(a["dY"], a["argmax"], (2, 3, 4, 4), 2, check_argmax=a["check_argmax"]),
    others={"check_argmax": _BOOL_CASES}, launches=True))
add("gpulib.cnn.book_model.BookCNN", Entry(lambda r: dict(inplace_relu=False, reduction="tree", input_grad="gather",
                                                         fused=False),
                                           lambda a: book_model.BookCNN(inplace_relu=a["inplace_relu"], reduction=a["reduction"],
                                                                        input_grad=a["input_grad"], fused=a["fused"]),
                                           others={"inplace_relu": _BOOL_CASES, "fused": _BOOL_CASES},
                                           choices=("reduction", "input_grad"), optional=("reduction",)),
    Entry(lambda r: dict(classes=10, fused=True), lambda a: book_model.BookCNN(classes=a["classes"], fused=a["fused"]),
          others={"classes": [("more than the fused loss kernel's 32", 33)]}, speaks={"classes": ("32",)}))
