"""16.3 speed: the direct convolution ladder against cuDNN, measured live on a GPU or read from
the results stored in benchmarks/results/conv_direct.json (with the device and date).

``benchmarks/conv_direct.py`` is the command-line front end; notebooks call ``measure`` on a
GPU and ``load`` elsewhere, and ``plot`` either way.
"""

from __future__ import annotations

from gpulib.bench import measure as measuring
from gpulib.book_layers import LAYER, flop, layer_inputs
from gpulib.check import poisoned
from gpulib.conv.direct import conv2d_direct
from gpulib.env import cuda

RESULTS = measuring.RESULTS_DIR / "conv_direct.json"
# (version, channels_per_block): 1 channel is the chapter's tile; more reuse each loaded input
LADDER = [("v1", 1), ("v2", 1), ("v2", 4), ("v2", 8), ("v2", 16)]


def measure(layer=LAYER, ladder=LADDER, repeat: int = 20) -> dict:
    """Check every version against a float64 reference, then time it and cuDNN; GPU only."""
    measuring.require_gpu()
    X, W, b = layer_inputs(layer)
    want, ref_name = measuring.reference_conv(X, W, b, layer)
    scale = measuring.magnitude(X, W, b, layer)
    X_dev, W_dev, b_dev = (cuda.to_device(a) for a in (X, W, b))
    p, s, total = layer["padding"], layer["stride"], flop(layer)
    rows = []
    for version, group in ladder:
        name = "direct v1" if version == "v1" else f"direct v2, {group} channel(s)/block"
        out = poisoned(want.shape)
        run = lambda: conv2d_direct(X_dev, W_dev, b_dev, p, s, out=out, version=version, channels_per_block=group)  # noqa: E731
        rows.append(measuring.checked_row(f"gpulib {name}", run, want, out=out, flop=total, scale=scale, repeat=repeat,
                                  version=version, channels_per_block=group))
    library, run = measuring.cudnn_conv(X_dev, W_dev, b_dev, layer)
    rows.append(measuring.checked_row(library, run, want, flop=total, scale=scale, repeat=repeat, version="cudnn",
                              channels_per_block=None))
    return dict(measuring.header(repeat), layer=layer, gflop=total / 1e9, reference=ref_name, library=library,
                rows=measuring.with_ratio(rows, rows[-1]["ms"]))


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)


def table(results: dict) -> str:
    """The results as a text table: time, TFLOP/s, speed as a share of cuDNN's, error."""
    head = (f"{results['device']}, {results['date']}, layer {results['layer']}, {results['gflop']:.2f} GFLOP, "
            f"checked against {results['reference']}")
    return "\n".join([head] + measuring.rows_table(results["rows"], "cuDNN", width=46, indent=""))
