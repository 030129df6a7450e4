"""16.3 speed: the direct convolution ladder against cuDNN, measured live on a GPU or read from
the results stored in benchmarks/results/conv_direct.json (with the device and date).

``benchmarks/conv_direct.py`` is the command-line front end; notebooks call ``measure`` on a
GPU and ``load`` elsewhere, and ``plot`` either way.
"""

from __future__ import annotations

from gpulib.bench import measure as measuring
from gpulib.book_layers import LAYER, flop, layer_inputs
from gpulib.check import poisoned
from gpulib.conv import direct
from gpulib.conv.direct import conv2d_direct
from gpulib.env import cuda

RESULTS = measuring.RESULTS_DIR / "conv_direct.json"
# (version, channels_per_block): 1 channel is the chapter's tile; more reuse each loaded input;
# version 3 is version 2 with its filters in constant memory
LADDER = [("v1", 1), ("v2", 1), ("v2", 4), ("v2", 8), ("v2", 16), ("v3", 16)]
STRIDE_2 = dict(LAYER, stride=2)  # the same layer at stride 2: version 2's shared reads then conflict


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
        name = ("direct v1" if version == "v1" else f"direct v2, {group} channel(s)/block" if version == "v2"
                else f"direct v3 (filters in constant memory), {group} channel(s)/block")
        out = poisoned(want.shape)
        run = lambda: conv2d_direct(X_dev, W_dev, b_dev, p, s, out=out, version=version, channels_per_block=group)  # noqa: E731
        rows.append(measuring.checked_row(f"gpulib {name}", run, want, out=out, flop=total, scale=scale, repeat=repeat,
                                  version=version, channels_per_block=group))
    library, run = measuring.cudnn_conv(X_dev, W_dev, b_dev, layer)
    rows.append(measuring.checked_row(library, run, want, flop=total, scale=scale, repeat=repeat, version="cudnn",
                              channels_per_block=None))
    return dict(measuring.header(repeat), layer=layer, gflop=total / 1e9, reference=ref_name, library=library,
                rows=measuring.with_ratio(rows, rows[-1]["ms"]), resources=resources(layer, X_dev, W_dev, b_dev),
                stride_2=measure_stride_2(repeat))


def resources(layer: dict, X, W, b) -> dict:
    """What the compiler gave each version's kernel as the ladder ran it: registers and shared
    memory per thread and block, the blocks an SM holds, and the instruction mix (static SASS).
    Each version is launched once here first, with the arguments the ladder gives it, so that the
    kernel read is the one compiled for this layer."""
    R, S, stride, p = layer["R"], layer["S"], layer["stride"], layer["padding"]
    for version, group in (("v1", 1), ("v2", 1), ("v2", 16), ("v3", 16)):
        conv2d_direct(X, W, b, p, stride, version=version, channels_per_block=group)
    cuda.synchronize()
    kernels = {"v1": (direct.conv2d_v1_kernel, 256)}
    for KB in (1, 16):
        kernels[f"v2 KB={KB}"] = (direct.conv2d_v2_kernel(R, S, stride, KB, int(direct.TILE)), direct.TILE**2)
    W_host = W.copy_to_host() if hasattr(W, "copy_to_host") else W
    fit = direct.constant_group(layer["C"], R, S, 16)
    kernels["v3 KB=16"] = (direct.conv2d_v3_kernel(W_host[:fit], stride, 16, int(direct.TILE)), direct.TILE**2)
    out = {}
    for name, (kernel, threads) in kernels.items():
        try:
            row = measuring.kernel_resources(kernel, threads)
        except ValueError as e:  # not one compiled specialization: say so, keep the others
            out[name] = dict(error=str(e))
            continue
        try:
            row["sass"] = measuring.sass_mix(kernel, ("FFMA", "LDG", "LDS", "LDC", "BAR", "all"))
        except Exception as e:  # nvdisasm missing: the resources still stand
            row["sass_error"] = str(e).splitlines()[0][:80]
        out[name] = row
    return out


def measure_stride_2(repeat: int = 20) -> dict:
    """Version 2 (16 channels a block) on the layer at stride 1 and at stride 2, each checked; the
    time per output element says what stride 2's shared-memory reads cost."""
    rows = []
    for layer in (LAYER, STRIDE_2):
        X, W, b = layer_inputs(layer)
        want, _ = measuring.reference_conv(X, W, b, layer)
        scale = measuring.magnitude(X, W, b, layer)
        X_dev, W_dev, b_dev = (cuda.to_device(a) for a in (X, W, b))
        out = poisoned(want.shape)
        row = measuring.checked_row(f"gpulib direct v2, 16 channel(s)/block, stride {layer['stride']}",
                                    lambda: conv2d_direct(X_dev, W_dev, b_dev, layer["padding"], layer["stride"], out=out,
                                                          version="v2", channels_per_block=16),
                                    want, out=out, flop=flop(layer), scale=scale, repeat=repeat)
        rows.append(dict(row, stride=layer["stride"], outputs=int(want.size), ns_per_output=1e6 * row["ms"] / want.size))
    return dict(rows=rows)


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)


def table(results: dict) -> str:
    """The results as a text table: time, TFLOP/s, speed as a share of cuDNN's, error."""
    head = (f"{results['device']}, {results['date']}, layer {results['layer']}, {results['gflop']:.2f} GFLOP, "
            f"checked against {results['reference']}")
    lines = [head] + measuring.rows_table(results["rows"], "cuDNN", width=60, indent="")
    for name, k in results.get("resources", {}).items():
        if "error" in k:
            lines.append(f"  {name:<9} {k['error']}")
            continue
        mix = ", ".join(f"{op} {n}" for op, n in k.get("sass", {}).items()) or k.get("sass_error", "")
        lines.append(f"  {name:<9} {k['registers']:>3} registers, {k['shared_bytes']:>5} B shared, "
                     f"{k['blocks_per_sm']} blocks/SM ({k['blocks_per_sm'] * k['threads'] // 32} warps); SASS: {mix}")
    for r in results.get("stride_2", {}).get("rows", []):
        lines.append(f"  stride {r['stride']}: {r['ms']:.3f} ms for {r['outputs']:,} outputs = {r['ns_per_output']:.3f} ns each")
    return "\n".join(lines)
