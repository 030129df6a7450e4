"""16.4-16.6: where the book's own kernels stand against the libraries a user would pick, in one
run on one GPU, measured or read from benchmarks/results/scoreboard.json.

Three rows, each the book's fastest correct form against the library in the same run:

    step     one training step of 16.6's model at batch 256 (the fastest of the recorded step's
             forms: replayed or as a CUDA graph, default, staged or fused) against PyTorch eager
             (cuDNN, fp32, TF32 off); and torch.compile's step where it compiles here
    conv     the 16.3 layer's fastest fp32 algorithm by the auto-tuner (gpulib.conv.autotune)
             against cuDNN fp32 (TF32 off)
    gemm     SGEMM 4096³ by the GEMM auto-tuner's pick (gpulib.gemm.autotune) against cuBLAS fp32
             (CuPy, TF32 off)

Each row is checked against float64 (or against PyTorch's gradients, for the step) before it is
timed, and says whether it meets the book's target (TARGETS). ``benchmarks/scoreboard.py`` is
the command line; ``measure`` needs a GPU and PyTorch.
"""

from __future__ import annotations

import numpy as np

from gpulib.bench import book_model
from gpulib.bench import measure as measuring
from gpulib.book_layers import LAYER, flop, layer_inputs
from gpulib.check import poisoned
from gpulib.conv import autotune as conv_autotune
from gpulib.env import cuda
from gpulib.gemm import autotune as gemm_autotune
from gpulib.gemm import matmul
from gpulib.timing import benchmark

RESULTS = measuring.RESULTS_DIR / "scoreboard.json"
GEMM_SIZE = 4096
# the book's targets, as the library's speed over ours would put them: at most 1.0 of PyTorch's
# step time; at least 1.0x cuDNN's speed; at least 80 % of cuBLAS's
TARGETS = {"step": ("time against PyTorch eager", "<=", 1.0), "conv": ("speed against cuDNN fp32", ">=", 1.0),
           "gemm": ("speed against cuBLAS fp32", ">=", 0.8)}
STEP_FORMS = ("replayed", "graph") + tuple(f"{name}_{how}" for name in book_model.VARIANTS for how in ("replayed", "graph"))


def _met(part: str, value: float | None) -> bool:
    _, sense, target = TARGETS[part]
    return value is not None and (value <= target if sense == "<=" else value >= target)


def measure_step(repeat: int = 20) -> dict:
    """16.6's step at batch 256 against PyTorch eager (gpulib.bench.book_model.measure_pytorch)."""
    r = book_model.measure_pytorch(batch=book_model.PYTORCH_BATCH, repeat=repeat)
    return step_row(r, r["torch_compile"])


def step_row(r: dict, compiled: dict) -> dict:
    """The step's row from measure_pytorch's results ``r``: the fastest recorded form, and the
    median over the rounds of its time over PyTorch's in the same round."""
    forms = {form: r[f"{form}_ms"] for form in STEP_FORMS if r.get(f"{form}_ms") is not None}
    best = min(forms, key=forms.get)
    round_ratios = [t[best] / t["torch"] for t in r["rounds"]]
    value = float(np.median(round_ratios))
    return dict(ours=best, ours_ms=forms[best], library="PyTorch eager", library_ms=r["torch_ms"], value=value,
                round_values=round_ratios, met=_met("step", value), forms_ms=forms, torch_compile=compiled, pytorch=r)


def measure_conv(repeat: int = 10) -> dict:
    """The 16.3 layer: the auto-tuner's fp32 ranking and cuDNN fp32, on the same inputs."""
    L = LAYER
    X, W, b = layer_inputs(L)
    want, _ = measuring.reference_conv(X, W, b, L)
    scale = measuring.magnitude(X, W, b, L)
    timer = lambda fn, label: benchmark(fn, repeat=repeat, label=label).median_ms  # noqa: E731
    ranking = conv_autotune.find_algorithms(X, W, b, L["padding"], L["stride"], timer=timer, reference=want, scale=scale)
    best = ranking[0]
    name, run = measuring.cudnn_conv(X, W, b, L)
    library = measuring.checked_row(name, run, want, flop=flop(L), scale=scale, repeat=repeat)
    value = library["ms"] / best.ms
    return dict(ours=best.label, ours_ms=best.ms, library=name, library_ms=library["ms"], value=value,
                met=_met("conv", value), layer=L, ranking=measuring.with_ratio([vars(r) for r in ranking], library["ms"]))


def measure_gemm(size: int = GEMM_SIZE, repeat: int = 10) -> dict:
    """SGEMM size³: the GEMM auto-tuner's ranking (each candidate checked against float64) and
    cuBLAS fp32, checked against the same float64 product."""
    import cupy

    timer = lambda fn, label: benchmark(fn, repeat=repeat, label=label).median_ms  # noqa: E731
    ranking = gemm_autotune.find_tiles(size, size, size, timer=timer)
    best = ranking[0]
    rng = np.random.default_rng(1)
    A = cuda.to_device(rng.standard_normal((size, size)).astype(np.float32))
    B = cuda.to_device(rng.standard_normal((size, size)).astype(np.float32))
    a, b = cupy.asarray(A).astype(cupy.float64), cupy.asarray(B).astype(cupy.float64)
    want, scale = cupy.asnumpy(a @ b), float((cupy.abs(a) @ cupy.abs(b)).max())
    a = b = None
    out = poisoned((size, size))
    library = measuring.checked_row("cuBLAS sgemm (CuPy, TF32 off)", lambda: matmul(A, B, version="library", out=out),
                                    want, out=out, flop=2.0 * size**3, scale=scale, repeat=repeat)
    value = library["ms"] / best.ms
    return dict(ours=best.label, ours_ms=best.ms, library=library["name"], library_ms=library["ms"], value=value,
                met=_met("gemm", value), size=size,
                ranking=[dict(label=r.label, version=r.version, tile=r.tile, status=r.status, ms=r.ms, rel_err=r.rel_err,
                              vs_library=(library["ms"] / r.ms if r.ms else None)) for r in ranking])


PARTS = ("step", "conv", "gemm")


def measure_part(part: str, repeat: int = 20) -> dict:
    """One row alone (``benchmarks/scoreboard.py --part NAME --save``), with its own device and date."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; choose one of {PARTS}")
    measuring.require_gpu()
    run = {"step": measure_step, "conv": measure_conv, "gemm": measure_gemm}[part]
    return dict(run(repeat=repeat if part == "step" else max(5, repeat // 2)), measured=measuring.header(repeat))


def measure(repeat: int = 20, progress=print) -> dict:
    """The three rows in one run; GPU and PyTorch needed."""
    measuring.require_gpu()
    results = dict(measuring.header(repeat))
    for part in PARTS:
        progress(f"{part} ...")
        results[part] = measure_part(part, repeat)
    return results


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)


def table(results: dict) -> str:
    """The rows as text: ours, the library, the value against the target, met or not."""
    lines = [f"{results.get('device', '?')}, {results.get('date', '?')}"]
    lines.append(f"  {'row':<5} {'ours':<48} {'ms':>8} {'library':<40} {'ms':>8} {'value':>6} {'target':>8}  met")
    for part in PARTS:
        r = results.get(part)
        if r is None:
            lines.append(f"  {part:<5} (not measured)")
            continue
        what, sense, target = TARGETS[part]
        lines.append(f"  {part:<5} {r['ours'][:48]:<48} {r['ours_ms']:8.3f} {r['library'][:40]:<40} {r['library_ms']:8.3f} "
                     f"{r['value']:6.3f} {sense + ' ' + str(target):>8}  {'yes' if r['met'] else 'no'}   ({what})")
        if part == "step":
            compiled = r["torch_compile"]
            lines.append("        torch.compile: " + (f"{compiled['ms']:.3f} ms" if compiled["ms"] else compiled["note"]))
            lines.append("        forms: " + ", ".join(f"{k} {v:.3f}" for k, v in r["forms_ms"].items()))
        elif "ranking" in r:
            for row in r["ranking"][:6]:
                label = row.get("label") or row.get("name")
                ms = "-" if row.get("ms") is None else f"{row['ms']:.3f} ms"
                lines.append(f"        {str(label)[:50]:<50} {row['status']:<13} {ms}")
    return "\n".join(lines)
