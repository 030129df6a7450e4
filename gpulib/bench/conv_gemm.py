"""16.4 speed and memory: GEMM and convolution-as-GEMM against cuBLAS and cuDNN, measured on a
GPU or read from the results stored in benchmarks/results/conv_gemm.json.

Three parts, each a list of rows:

    gemm     C = A·B, 4096³ fp32: gemm v1 to v6 (several tile shapes for v3 to v6), the auto-tuner's
             pick (matmul(version="auto"), tuned before it is timed) and cuBLAS (CuPy, TF32 off);
             for the default tiles of v3 to v6, registers and the SASS instruction mix
    layer    the 16.3 layer (N=32, C=64, 56x56, K=64, 3x3, padding 1): im2col alone, GEMM alone,
             im2col + GEMM, implicit GEMM (both variants), direct v2 and cuDNN fp32
    memory   bytes of X against bytes of X_col, measured as the drop in the device's free
             memory when X_col is allocated, as the filter grows and as the batch grows; and
             what implicit GEMM allocates for the same layer

Every timed row is checked against a float64 reference first. ``benchmarks/conv_gemm.py`` is
the command-line front end (``--part gemm|layer|memory`` measures one part); notebooks call
``measure`` on a GPU and ``load`` elsewhere.
"""

from __future__ import annotations

import math

import numpy as np

from gpulib import reference as ref
from gpulib.arrays import to_host
from gpulib.bench import measure as measuring
from gpulib.book_layers import LAYER, flop, layer_inputs
from gpulib.check import poisoned
from gpulib.conv.direct import conv2d_direct
from gpulib.conv.im2col import conv2d_im2col, im2col
from gpulib.conv.implicit_gemm import TILE, conv2d_implicit_gemm, conv2d_implicit_precomp_gemm, row_table
from gpulib.env import cuda
from gpulib.gemm import autotune as gemm_autotune
from gpulib.gemm import kernels as gemm_kernels
from gpulib.gemm import matmul
from gpulib.results import is_part_of_call

RESULTS = measuring.RESULTS_DIR / "conv_gemm.json"
GEMM_SIZE = 4096
# version 3 tile shapes tried on the GPU; the first is gemm.kernels.V3, the default
_P = dict(PREFETCH=True)
V3_SHAPES = [gemm_kernels.V3, dict(gemm_kernels.V3, PREFETCH=False), dict(BM=64, BN=64, BK=8, TM=4, TN=4, **_P),
             dict(BM=64, BN=64, BK=16, TM=4, TN=4, **_P), dict(BM=64, BN=64, BK=32, TM=4, TN=4, **_P),
             dict(BM=128, BN=64, BK=16, TM=8, TN=4, **_P), dict(BM=64, BN=128, BK=16, TM=4, TN=8, **_P)]
# version 4 tile shapes; the first is gemm.kernels.V4, the default
V4_SHAPES = [gemm_kernels.V4, dict(BM=128, BN=256, BK=8, TM=8, TN=16), dict(BM=256, BN=128, BK=8, TM=16, TN=8),
             dict(BM=128, BN=128, BK=16, TM=8, TN=8), dict(BM=128, BN=128, BK=4, TM=8, TN=8),
             dict(BM=64, BN=128, BK=8, TM=4, TN=8), dict(BM=64, BN=256, BK=8, TM=4, TN=16)]
# version 5 tile shapes (TM and TN multiples of 4); the first is gemm.kernels.V5, the default
V5_SHAPES = [gemm_kernels.V5, dict(BM=128, BN=128, BK=16, TM=8, TN=8), dict(BM=128, BN=64, BK=8, TM=8, TN=4),
             dict(BM=64, BN=128, BK=8, TM=4, TN=8), dict(BM=128, BN=256, BK=8, TM=8, TN=16),
             dict(BM=256, BN=128, BK=8, TM=16, TN=8), dict(BM=64, BN=64, BK=8, TM=4, TN=4)]
# version 6 tile shapes: the auto-tuner's candidates on a GPU; the first is gemm.kernels.V6, the default
V6_SHAPES = [tile for version, tile in gemm_autotune.GPU_CANDIDATES if version == "v6"]
IMPLICIT_SHAPES = [TILE, dict(TILE, PREFETCH=False), dict(BM=64, BN=64, BK=8, TM=4, TN=4, **_P),
                   dict(BM=64, BN=64, BK=16, TM=4, TN=4, **_P), dict(BM=64, BN=128, BK=8, TM=4, TN=8, **_P),
                   dict(BM=64, BN=32, BK=8, TM=4, TN=2, **_P)]
FILTERS = (1, 3, 5, 7)
BATCHES = (1, 2, 4, 8, 16, 32, 64)


def _shape_name(t: dict) -> str:
    prefetch = ", prefetch" if t.get("PREFETCH", True) else ""
    cap = "" if "REGISTERS" not in t else f", registers {t['REGISTERS'] or 'uncapped'}"
    return f"{t['BM']}x{t['BN']} tile, BK {t['BK']}, {t['TM']}x{t['TN']}/thread{prefetch}{cap}"


def measure_gemm(size: int = GEMM_SIZE, repeat: int = 20, shapes=V3_SHAPES, shapes_v4=V4_SHAPES,
                 shapes_v5=V5_SHAPES, shapes_v6=V6_SHAPES) -> list[dict]:
    """The GEMM ladder on size³ fp32, each version checked against a float64 product (cuBLAS dgemm);
    the auto-tuner's row runs what it picked for size³ (tuned first, untimed: its ranking is the
    ``tuned`` part of the results)."""
    import cupy

    rng = np.random.default_rng(1)
    A = rng.standard_normal((size, size)).astype(np.float32)
    B = rng.standard_normal((size, size)).astype(np.float32)
    A_dev, B_dev = cuda.to_device(A), cuda.to_device(B)
    cA, cB = cupy.asarray(A_dev).astype(cupy.float64), cupy.asarray(B_dev).astype(cupy.float64)
    want = cupy.asnumpy(cA @ cB)
    scale = float((cupy.abs(cA) @ cupy.abs(cB)).max())
    cA = cB = None  # freed now (the timed lambdas hold them otherwise)
    runs = [("gpulib gemm v1 (naive)", "v1", None), ("gpulib gemm v2 (shared tiles 16x16)", "v2", None)]
    runs += [(f"gpulib gemm v3 ({_shape_name(t)})", "v3", t) for t in shapes]
    runs += [(f"gpulib gemm v4 ({_shape_name(t)}, double-buffered)", "v4", t) for t in shapes_v4]
    runs += [(f"gpulib gemm v5 ({_shape_name(t)}, 128-bit shared loads)", "v5", t) for t in shapes_v5]
    runs += [(f"gpulib gemm v6 ({_shape_name(t)}, warp tiling)", "v6", t) for t in shapes_v6]
    pick = gemm_autotune.choose(size, size, size)
    runs += [(f"gpulib gemm auto (picked {pick.label})", "auto", None)]
    runs += [("cuBLAS sgemm (CuPy, TF32 off)", "library", None)]
    rows = []
    for name, version, shape in runs:
        out = poisoned((size, size))
        run = lambda: matmul(A_dev, B_dev, version=version, out=out, shape=shape)  # noqa: E731
        reps = 3 if version == "v1" else repeat  # version 1 takes a fifth of a second a run
        rows.append(measuring.checked_row(name, run, want, out=out, flop=2.0 * size**3, scale=scale, repeat=reps,
                                  kind=version, tile=shape))
    return measuring.with_ratio(rows, rows[-1]["ms"])


def measure_layer(layer=LAYER, repeat: int = 20, shapes=IMPLICIT_SHAPES) -> tuple[list[dict], str]:
    """Every way of computing the layer, checked against float64 and timed; plus cuDNN."""
    L = layer
    X, W, b = layer_inputs(L)
    want, ref_name = measuring.reference_conv(X, W, b, L)
    scale = measuring.magnitude(X, W, b, L)
    X_dev, W_dev, b_dev = (cuda.to_device(a) for a in (X, W, b))
    p, s, R, S, K = L["padding"], L["stride"], L["R"], L["S"], L["K"]
    total = flop(L)
    rows = []

    # im2col alone (its first 4096 columns checked), then the GEMM alone on its output
    X_col = cuda.device_array((L["C"] * R * S, want.shape[0] * want.shape[2] * want.shape[3]), np.float32)
    rows.append(measuring.checked_row("im2col alone", lambda: im2col(X_dev, R, S, p, s, out=X_col),
                              ref.im2col(X[:2], R, S, p, s)[:, :4096], view=lambda Xc: to_host(Xc)[:, :4096],
                              repeat=repeat, kind="im2col", bytes=X_col.nbytes))
    W_mat = W_dev.reshape(K, W[0].size)
    Y_mat = cuda.device_array((K, X_col.shape[1]), np.float32)
    want_mat = (want - b.reshape(1, K, 1, 1)).transpose(1, 0, 2, 3).reshape(K, -1)  # Y_mat = W_mat · X_col
    for version, label in (("library", "cuBLAS"), ("v3", "gpulib gemm v3"), ("v2", "gpulib gemm v2")):
        rows.append(measuring.checked_row(f"GEMM alone: {label} on X_col",
                                  lambda: matmul(W_mat, X_col, version=version, out=Y_mat), want_mat,
                                  flop=total, scale=scale, repeat=repeat, kind="gemm"))
    X_col = Y_mat = None  # freed now (the timed lambdas hold them otherwise)

    def add(name, kind, conv, **options):
        out = poisoned(want.shape)
        rows.append(measuring.checked_row(name, lambda: conv(X_dev, W_dev, b_dev, p, s, out=out, **options), want, out=out,
                                  flop=total, scale=scale, repeat=repeat, kind=kind))

    add("im2col + cuBLAS", "im2col+gemm", conv2d_im2col, gemm="library")
    add("im2col + gpulib gemm v3", "im2col+gemm", conv2d_im2col, gemm="v3")
    add("implicit GEMM (indices on the fly)", "implicit", conv2d_implicit_gemm)
    for tile in shapes:
        add(f"implicit precomp GEMM ({_shape_name(tile)})", "implicit", conv2d_implicit_precomp_gemm, tile=tile)
        rows[-1].update(tile=tile)
    add("direct v2, 16 channels/block (16.3)", "direct", conv2d_direct, version="v2")
    library, run = measuring.cudnn_conv(X_dev, W_dev, b_dev, L)
    rows.append(measuring.checked_row(library, run, want, flop=total, scale=scale, repeat=repeat, kind="cudnn"))
    return measuring.with_ratio(rows, rows[-1]["ms"]), ref_name


def _free_bytes() -> int:
    import gc

    gc.collect()  # arrays held in reference cycles are freed only by the cycle collector
    ctx = cuda.current_context()
    ctx.deallocations.clear()  # Numba frees lazily; make the free count current
    cuda.synchronize()
    return ctx.get_memory_info().free


def measure_memory(layer=LAYER, filters=FILTERS, batches=BATCHES) -> list[dict]:
    """Bytes of X and of X_col for each filter size (batch of the layer) and each batch size
    (3x3), X_col measured as the drop in free device memory when im2col allocates it; and
    the same drop for implicit GEMM's forward pass (Y given), which should be ~0."""
    rows = []
    cases = [(R, layer["N"], "filter") for R in filters] + [(3, n, "batch") for n in batches]
    for R, N, sweep in cases:
        L = dict(layer, N=N, R=R, S=R, padding=R // 2)
        X = cuda.to_device(np.random.default_rng(R).standard_normal((N, L["C"], L["H"], L["W"])).astype(np.float32))
        before = _free_bytes()
        X_col = im2col(X, R, R, L["padding"], 1)
        used = before - _free_bytes()
        rows.append(dict(sweep=sweep, R=R, N=N, x_bytes=X.nbytes, x_col_bytes=X_col.nbytes,
                         x_col_measured_bytes=used, method="im2col"))
        X_col = None  # freed now (the timed lambdas hold them otherwise)
        W = cuda.to_device(np.ones((L["K"], L["C"], R, R), np.float32) / (L["C"] * R * R))
        Y = cuda.device_array((N, L["K"], L["H"], L["W"]), np.float32)
        bias = cuda.to_device(np.zeros(L["K"], np.float32))
        table = cuda.to_device(row_table(L["C"], R, R))
        before = _free_bytes()
        conv2d_implicit_precomp_gemm(X, W, bias, L["padding"], 1, out=Y, table=table)
        used = before - _free_bytes()
        rows.append(dict(sweep=sweep, R=R, N=N, x_bytes=X.nbytes, x_col_bytes=0, x_col_measured_bytes=used,
                         method="implicit", table_bytes=table.nbytes))
        X = W = Y = table = bias = None  # freed now (the timed lambdas hold them otherwise)
    return rows


def kernel_report() -> list[dict]:
    """For the default tiles of GEMM v3 to v6 (compiled by the ladder's runs): registers,
    blocks per SM, and the instruction mix of the SASS (how many 32-bit and 128-bit shared
    loads against FFMAs), the profile behind the ladder's speeds."""
    from gpulib.gemm import api

    rows = []
    for version, factory, tile in (("v3", gemm_kernels.gemm_v3_kernel, gemm_kernels.V3),
                                   ("v4", gemm_kernels.gemm_v4_kernel, gemm_kernels.V4),
                                   ("v5", gemm_kernels.gemm_v5_kernel, gemm_kernels.V5),
                                   ("v6", gemm_kernels.gemm_v6_kernel, gemm_kernels.V6)):
        kernel = factory(**tile)
        if not kernel.overloads:  # not compiled yet: one small product compiles it
            A = cuda.to_device(np.ones((8, 8), np.float32))
            api.matmul(A, A, version=version, shape=tile)
        threads = math.prod(gemm_kernels.block_threads(tile))
        row = dict(version=version, tile=_shape_name(tile), **measuring.kernel_resources(kernel, threads))
        try:
            row["sass"] = measuring.sass_mix(kernel)
        except Exception as err:  # no nvdisasm: the resources still count
            row["sass_error"] = f"{type(err).__name__}: {err}"
        rows.append(row)
    return rows


PARTS = ("gemm", "layer", "memory")


def _measure_one(part: str, repeat: int) -> dict:
    """One part's results, as ``measure`` stores it."""
    if part == "gemm":
        rows = measure_gemm(repeat=repeat)
        tuned = [dict(label=r.label, version=r.version, tile=r.tile, status=r.status, ms=r.ms, rel_err=r.rel_err)
                 for r in gemm_autotune.cached_ranking(GEMM_SIZE, GEMM_SIZE, GEMM_SIZE)]
        return dict(size=GEMM_SIZE, gflop=2 * GEMM_SIZE**3 / 1e9, library=rows[-1]["name"], rows=rows,
                    tuned=tuned, kernels=kernel_report())
    if part == "layer":
        rows, ref_name = measure_layer(repeat=repeat)
        return dict(layer=LAYER, gflop=flop(LAYER) / 1e9, reference=ref_name, library=rows[-1]["name"], rows=rows)
    return dict(layer=LAYER, rows=measure_memory())


def measure_part(part: str, repeat: int = 20) -> dict:
    """One part of ``measure`` alone (``benchmarks/conv_gemm.py --part NAME --save``), carrying
    its own device and date, since the stored results around it may come from another run."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; choose one of {PARTS}")
    measuring.require_gpu()
    return dict(_measure_one(part, repeat), measured=measuring.header(repeat))


def measure(repeat: int = 20, progress=print) -> dict:
    """All three parts; GPU only."""
    measuring.require_gpu()
    results = dict(measuring.header(repeat))
    for part, what in zip(PARTS, ("GEMM ladder", "layer", "memory")):
        progress(f"{what} ...")
        results[part] = _measure_one(part, repeat)
    return results


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)


def table(results: dict) -> str:
    """The three parts as text tables (speed as a share of cuBLAS's or cuDNN's)."""
    g, lay = results["gemm"], results["layer"]
    lines = [f"{results['device']}, {results['date']}, {results['timing']}",
             f"GEMM {g['size']}^3 fp32 ({g['gflop']:.0f} GFLOP)"]
    lines += measuring.rows_table(g["rows"], "cuBLAS", width=64)
    if g.get("tuned"):
        lines.append("  auto-tuner at this size (tuned once, 10 runs each): "
                     + "; ".join(f"{t['label']} {t['ms']:.3f} ms" if t["ms"] is not None else f"{t['label']} {t['status']}"
                                 for t in g["tuned"]))
    for k in g.get("kernels", []):
        mix = ", ".join(f"{op} {n}" for op, n in k.get("sass", {}).items()) or k.get("sass_error", "")
        lines.append(f"  {k['version']} {k['tile']}: {k['registers']} registers, {k['blocks_per_sm']} blocks/SM; "
                     f"SASS: {mix}")
    lines += [f"Layer {lay['layer']} ({lay['gflop']:.2f} GFLOP), checked against {lay['reference']}"]
    # im2col alone and the GEMM alone are parts of a convolution: a share of cuDNN's whole
    # convolution would compare unlike work, so those rows show none
    whole = [dict(r, vs_library=None) if is_part_of_call(r["name"]) else r for r in lay["rows"]]
    lines += measuring.rows_table(whole, "cuDNN", width=64)
    lines.append("  (the rows marked alone are one part of the convolution: no share of cuDNN's whole call)")
    lines += ["Memory (MB = 10^6 bytes; X_col measured as the drop in free device memory)",
              f"  {'sweep':<7} {'R':>2} {'N':>3} {'method':<9} {'X MB':>8} {'X_col MB':>9} {'measured MB':>12}"]
    for r in results["memory"]["rows"]:
        lines.append(f"  {r['sweep']:<7} {r['R']:>2} {r['N']:>3} {r['method']:<9} {r['x_bytes'] / 1e6:8.1f} "
                     f"{r['x_col_bytes'] / 1e6:9.1f} {r['x_col_measured_bytes'] / 1e6:12.1f}")
    return "\n".join(lines)
