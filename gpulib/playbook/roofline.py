"""16.6: the roofline: what a GPU can do at most, and where each of the book's kernels stands.

A kernel that performs F floating-point operations and must move at least B bytes between
HBM and the chip has arithmetic intensity I = F / B. It can run no faster than
min(peak rate, I × bandwidth): below the ridge point I* = peak / bandwidth it is limited by
memory, above it by arithmetic. Its percent of that limit says how much of the machine it used.

    DATASHEET           NVIDIA's numbers for H100 SXM and H200 (dense, no sparsity)
    datasheet(name)     the limits of the GPU of that name
    limit(I, peak, bw)  min(peak, I·bw)
    book_kernels(...)   every measured kernel of the book with its FLOP, compulsory bytes, time,
                        intensity, rate and percent of its limit (from benchmarks/results)

Bytes are the compulsory traffic: each input read once and each output written once. A
kernel that reads more (a re-read that misses L2) runs further below its limit than the
figure shows; the figure is an upper bound on what a better kernel could reach.
"""

from __future__ import annotations

from gpulib.arrays import require_int, require_positive
from gpulib.book_layers import LAYER, output_shape, shapes
from gpulib.book_layers import flop as layer_flop

TB = 1e12
# dense rates in FLOP/s and HBM bandwidth in bytes/s (NVIDIA H100 SXM5 and H200 datasheets;
# their tensor-core figures "with sparsity" are twice these)
DATASHEET = {
    "H100 SXM": dict(fp32=67 * TB, tf32=494.7 * TB, fp16=989.4 * TB, bf16=989.4 * TB, hbm=3.35 * TB),
    "H200": dict(fp32=67 * TB, tf32=494.7 * TB, fp16=989.4 * TB, bf16=989.4 * TB, hbm=4.8 * TB),
}


def datasheet(device: str | None) -> dict:
    """The limits for a device name ("NVIDIA H200", "NVIDIA H100 80GB HBM3"); the H200's, the book's
    GPU, for None. Another GPU is a ValueError: its limits are not in DATASHEET."""
    if device is None:
        return DATASHEET["H200"]
    if not isinstance(device, str):
        raise ValueError(f"device must be a GPU's name (str) or None, not {type(device).__name__}")
    for key in ("H100", "H200"):
        if key in device:
            return DATASHEET["H100 SXM" if key == "H100" else "H200"]
    raise ValueError(f"device {device!r}: no datasheet limits for it; DATASHEET holds {tuple(DATASHEET)}")


def _limits(limits, precision: str | None) -> None:
    if not isinstance(limits, dict) or "hbm" not in limits or (precision is not None and precision not in limits):
        raise ValueError(f"limits must be a dict of peak rates and 'hbm' bandwidth (as datasheet returns), with "
                         f"{precision!r}; not {limits!r:.80}")
    for key in ("hbm",) + ((precision,) if precision else ()):
        require_positive(limits[key], f"limits[{key!r}]")


def limit(intensity: float, peak: float, bandwidth: float) -> float:
    """The most FLOP/s a kernel of this arithmetic intensity (FLOP/byte) can reach."""
    intensity = require_positive(intensity, "intensity", zero_ok=True, note=" (FLOP per byte)")
    return min(require_positive(peak, "peak"), intensity * require_positive(bandwidth, "bandwidth"))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def conv_bytes(layer: dict, in_bytes: int = 4, out_bytes: int = 4) -> int:
    """X and W read once, Y written once."""
    require_int(in_bytes, "in_bytes", 1), require_int(out_bytes, "out_bytes", 1)
    X_shape, W_shape = shapes(layer)
    return in_bytes * (_numel(X_shape) + _numel(W_shape)) + out_bytes * _numel(output_shape(layer))


def gemm_bytes(size: int, in_bytes: int = 4, out_bytes: int = 4) -> int:
    """A and B read once, C written once (square matrices)."""
    require_int(size, "size", 1), require_int(in_bytes, "in_bytes", 1), require_int(out_bytes, "out_bytes", 1)
    return (2 * in_bytes + out_bytes) * size * size


def place(name: str, section: str, precision: str, flop: float, nbytes: float, ms: float, limits: dict) -> dict:
    """One kernel on the roofline; precision names the roof ("fp32", "fp16", "tf32", "bf16")."""
    if precision not in ("fp32", "tf32", "fp16", "bf16"):
        raise ValueError(f"precision must be 'fp32', 'tf32', 'fp16' or 'bf16', not {precision!r}")
    if not isinstance(name, str):
        raise ValueError(f"name must be a str, not {type(name).__name__}")
    _limits(limits, precision)
    flop, nbytes, ms = require_positive(flop, "flop"), require_positive(nbytes, "nbytes"), require_positive(ms, "ms")
    seconds = ms * 1e-3
    intensity = flop / nbytes
    rate = flop / seconds
    roof = limit(intensity, limits[precision], limits["hbm"])
    return dict(name=name, section=section, precision=precision, flop=flop, bytes=nbytes, ms=ms,
                intensity=intensity, tflops=rate / TB, roof_tflops=roof / TB, percent=100 * rate / roof,
                bound="memory" if intensity * limits["hbm"] < limits[precision] else "compute",
                gbps=nbytes / seconds / 1e9)


def memory_kernel(name: str, section: str, nbytes: float, ms: float, limits: dict) -> dict:
    """A kernel that only moves data (im2col): its bandwidth as a percent of HBM's."""
    _limits(limits, None)
    nbytes, ms = require_positive(nbytes, "nbytes"), require_positive(ms, "ms")
    gbps = nbytes / (ms * 1e-3) / 1e9
    return dict(name=name, section=section, precision="-", flop=0.0, bytes=nbytes, ms=ms, intensity=0.0,
                tflops=0.0, roof_tflops=None, percent=100 * gbps * 1e9 / limits["hbm"], bound="memory", gbps=gbps)


def book_kernels(conv_direct: dict, conv_gemm: dict, cudnn_tensorcore: dict, limits: dict) -> list[dict]:
    """Every measured kernel of 16.3-16.5b (and the library next to it) placed under ``limits``: the
    direct and tiled convolutions, the SGEMM ladder, im2col, the implicit GEMMs, Winograd F(4x4), the
    WMMA ladder HGEMM v1-v4 and tensor-core conv v1-v2, HGEMM v5-v7 and conv v3-v4 (wgmma)."""
    _limits(limits, "fp32")
    for name, stored, keys in (("conv_direct", conv_direct, ("layer", "rows")), ("conv_gemm", conv_gemm, ("gemm", "layer")),
                               ("cudnn_tensorcore", cudnn_tensorcore, ("tensor_cores",))):
        if not isinstance(stored, dict) or any(k not in stored for k in keys):
            raise ValueError(f"{name} must be the stored results of benchmarks/{name}.py (a dict with {keys}), "
                             f"not {stored!r:.60}")
    rows = []

    def measured_on(*stored: dict) -> None:
        """The GPU the rows added since the last call were timed on (the stored results mix runs):
        the first of ``stored`` (a part, then its file) that names one."""
        device = next((str(d["device"]) for d in stored if "device" in d), "").removeprefix("NVIDIA ")
        for r in rows:
            r.setdefault("device", device)

    layer = conv_direct["layer"]
    F = layer_flop(layer)
    for r in conv_direct["rows"]:
        section = "library" if "cuDNN" in r["name"] else "16.3"
        rows.append(place(r["name"], section, "fp32", F, conv_bytes(layer), r["ms"], limits))
    measured_on(conv_direct)
    g = conv_gemm["gemm"]
    S = g["size"]
    best_v3 = min((r for r in g["rows"] if r["kind"] == "v3"), key=lambda r: r["ms"])
    for r in g["rows"]:
        if r["kind"] == "v3" and r is not best_v3:
            continue
        section = "library" if r["kind"] == "library" else "16.4"
        rows.append(place(f"GEMM {S}³: {r['name']}", section, "fp32", 2.0 * S**3, gemm_bytes(S), r["ms"], limits))
    L = conv_gemm["layer"]["layer"]
    X_bytes = 4 * _numel(shapes(L)[0])
    implicit = [r for r in conv_gemm["layer"]["rows"] if r["kind"] == "implicit"]
    best_precomp = min((r for r in implicit if "precomp" in r["name"]), key=lambda r: r["ms"])
    for r in conv_gemm["layer"]["rows"]:
        if r["kind"] == "im2col":
            rows.append(memory_kernel(f"{r['name']} (X read, X_col written)", "16.4", X_bytes + r["bytes"], r["ms"],
                                      limits))
        elif r["kind"] == "implicit" and ("precomp" not in r["name"] or r is best_precomp):
            rows.append(place(r["name"], "16.4", "fp32", layer_flop(L), conv_bytes(L), r["ms"], limits))
    measured_on(conv_gemm)
    tc = cudnn_tensorcore["tensor_cores"]
    S = tc["gemm"]["size"]
    for r in tc["gemm"]["rows"]:
        library = "cuBLAS" in r["name"]  # cuBLAS writes C in fp16, gpulib in fp32
        rows.append(place(f"GEMM {S}³: {r['name']}", "library" if library else "16.5", "fp16", 2.0 * S**3,
                          gemm_bytes(S, 2, 2 if library else 4), r["ms"], limits))
    for r in tc["conv"]["rows"]:
        library = "cuDNN" in r["name"]
        rows.append(place(r["name"], "library" if library else "16.5", "fp16", layer_flop(L),
                          conv_bytes(L, 2, 2 if library else 4), r["ms"], limits))
    measured_on(cudnn_tensorcore)
    f4 = cudnn_tensorcore.get("winograd_f4")
    if f4:  # the direct convolution's FLOPs over its time: an effective rate (it multiplies 4x less)
        rows.append(place("Winograd F(4x4, 3x3), whole call (effective rate)", "16.5", "fp32", layer_flop(f4["layer"]),
                          conv_bytes(f4["layer"]), f4["event_ms"], limits))
        measured_on(f4, cudnn_tensorcore)
    wg = cudnn_tensorcore.get("wgmma")
    if wg:  # HGEMM v5-v7: the fastest configuration of each at the first size; conv v3 and v4
        first = wg["sizes"][0]
        S = first["size"]
        for version in ("v5", "v6", "v7"):
            mine = [r for r in first["rows"] if f"GEMM {version} " in r["name"]]
            if mine:
                r = min(mine, key=lambda r: r["ms"])
                rows.append(place(f"GEMM {S}³: {r['name']}", "16.5b", "fp16", 2.0 * S**3, gemm_bytes(S, 2, 4), r["ms"],
                                  limits))
        conv = wg["conv"]
        for version, what in (("v3", "wgmma, cp.async"), ("v4", "wgmma, TMA boxes")):
            rows.append(place(f"gpulib tensor-core conv {version} ({what}, NHWC, fp16)", "16.5b", "fp16",
                              layer_flop(conv["layer"]), conv_bytes(conv["layer"], 2, 4), conv[f"{version}_ms"], limits))
        rows.append(place(f"cuDNN's fastest plan ({conv['cudnn_best']['name'][:24]})", "library", "fp16",
                          layer_flop(conv["layer"]), conv_bytes(conv["layer"], 2, 2), conv["cudnn_best"]["ms"], limits))
        measured_on(wg, cudnn_tensorcore)
    return rows


def table(rows: list[dict]) -> str:
    """The placed kernels as text (rows from ``place``, ``memory_kernel`` or ``book_kernels``)."""
    keys = ("name", "section", "flop", "intensity", "tflops", "roof_tflops", "percent", "bound", "precision", "gbps")
    if not isinstance(rows, (list, tuple)) or any(not isinstance(r, dict) or any(k not in r for k in keys) for r in rows):
        raise ValueError(f"rows must be a list of dicts from place or memory_kernel (with {keys}), not {rows!r:.60}")
    lines = [f"{'kernel':<58} {'sec':>7} {'FLOP/B':>7} {'TFLOP/s':>8} {'limit':>7} {'% of limit':>10}  bound"]
    for r in rows:
        on = f"  [{r['device']}]" if r.get("device") else ""  # where book_kernels knows it
        if r["flop"]:
            lines.append(f"{r['name'][:58]:<58} {r['section']:>7} {r['intensity']:7.1f} {r['tflops']:8.2f} "
                         f"{r['roof_tflops']:7.1f} {r['percent']:9.1f}%  {r['bound']} ({r['precision']}){on}")
        else:
            lines.append(f"{r['name'][:58]:<58} {r['section']:>7} {'0':>7} {r['gbps']:6.0f}GB/s {'':>7} "
                         f"{r['percent']:9.1f}%  memory (of HBM bandwidth){on}")
    return "\n".join(lines)


__all__ = ["DATASHEET", "LAYER", "book_kernels", "datasheet", "limit", "place", "table"]
