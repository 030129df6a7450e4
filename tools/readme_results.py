"""The README's table of measured speed, written from benchmarks/results/*.json.

    python tools/readme_results.py          # rewrite the table in README.md
    python tools/readme_results.py --check  # exit 1 if README.md's table is not what the results say

Every number in the table comes from a stored result, so the README cannot drift from the
measurements (tests/test_claims.py runs --check). Each row names the device and date it was
measured on; a part measured on another day or device says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

from claims import result as load  # the stored results, read as the claims table reads them
from claims import select

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BEGIN, END = "<!-- measured-speed table: tools/readme_results.py writes it -->", "<!-- end of the measured-speed table -->"


def row(rows: list[dict], contains: str) -> dict:
    return select(rows, f"name~{contains}")


def short_device(name: str) -> str:
    return name.replace("NVIDIA ", "").split(" 80GB")[0].split(" NVL")[0]


def when(part: dict, top: dict | None = None) -> str:
    """"H200, 2026-12-03", or only what differs from ``top``."""
    if top and part.get("device") == top.get("device") and part.get("date") == top.get("date"):
        return ""
    return f"{short_device(part['device'])}, {part['date']}"


def pct(r: dict) -> str:
    return f"{r['vs_library']:.0%}"


def direct() -> str:
    R = load("conv_direct")
    rows = R["rows"]
    v3 = [r for r in rows if r.get("version") == "v3"]
    text = (f"v1 {row(rows, 'direct v1')['ms']:.1f} ms, v2 (16 channels a block) "
            f"{row(rows, 'v2, 16 channel')['ms']:.2f} ms")
    if v3:
        text += f", v3 (filters in constant memory) {v3[0]['ms']:.2f} ms"
    return f"{when(R)}: {text}, {rows[-1]['name'].split(' (')[0]} {rows[-1]['ms']:.2f} ms"


def gemm() -> str:
    R = load("conv_gemm")
    g, layer = R["gemm"], R["layer"]["rows"]
    lib = g["rows"][-1]
    best = {v: max((r for r in g["rows"] if r["name"].startswith(f"gpulib gemm {v} ")), key=lambda r: r["vs_library"])
            for v in ("v3", "v4", "v5")}
    parts = [f"SGEMM {v} {r['ms']:.2f} ms = {pct(r)}" for v, r in best.items()]
    precomp = max((r for r in layer if r["name"].startswith("implicit precomp")), key=lambda r: r["vs_library"])
    cudnn = layer[-1]
    return (f"{when(R)}: {', '.join(parts)} of cuBLAS {lib['ms']:.2f} ms; the layer: im2col + cuBLAS "
            f"{row(layer, 'im2col + cuBLAS')['ms']:.2f} ms, implicit precomp GEMM {precomp['ms']:.2f} ms "
            f"= {precomp['ms'] / cudnn['ms']:.2f}x the time of cuDNN's {cudnn['ms']:.2f} ms")


def tensor_cores() -> str:
    R = load("cudnn_tensorcore")
    w = R["wgmma"]
    at = {s["size"]: s for s in w["sizes"]}
    v6 = lambda n: row(at[n]["rows"], "v6 (wgmma, TMA), 128x256, 4 stages")  # noqa: E731
    v7 = lambda n: row(at[n]["rows"], "v7 (wgmma, TMA, producer warpgroup), 128x256, 4")  # noqa: E731
    wmma = at[4096]["wmma_rows"][0]
    conv = w["conv"]
    best = conv["cudnn_best"]["ms"]
    text = (f"{when(w)}: HGEMM 4096³ (fp16, C = A·Bᵀ) v4 (WMMA) {pct(wmma)}, "
            f"v5 (wgmma, cp.async) {pct(row(at[4096]['rows'], 'v5 (wgmma, cp.async), 128x128, 4'))}, "
            f"v6 (wgmma, TMA, 128x256) {v6(4096)['ms']:.3f} ms = {pct(v6(4096))} of cuBLAS "
            f"{at[4096]['rows'][-1]['ms']:.3f} ms and {pct(v6(8192))} at 8192³, v7 (a producer warpgroup) "
            f"{pct(v7(4096))} / {pct(v7(8192))}; tensor-core conv v3 {conv['v3_ms']:.3f} ms = "
            f"{best / conv['v3_ms']:.0%} of cuDNN's fastest plan ({best:.3f} ms)")
    tuned = R["autotune"]
    picks = ", ".join(f"{t['title'].split(',')[0]}: {t['ranking'][0]['name']}" for t in tuned)
    text += f"; the auto-tuner's picks ({when(tuned[0].get('measured', R), w) or 'same run'}): {picks}"
    engines = R.get("cudnn_engines", {})
    timed = [r["ms"] for r in engines.get("rows", []) if r.get("ms")]
    if timed:
        text += f"; {len(engines['rows'])} cuDNN plans listed, {min(timed):.3f}-{max(timed):.1f} ms"
    p = R.get("persistent")
    if p:  # the persistent rungs, measured apart from the ladder
        sizes = {s["size"]: s for s in p["sizes"]}
        v9 = lambda n: row(sizes[n]["rows"], "v9 (persistent, TMA, producer warpgroup), fp16 C")  # noqa: E731
        c = p["conv"]
        best = min((w for w in c["whole_call"] if "fp16_out_kernel_ms" in w), key=lambda w: w["fp16_out_kernel_ms"])
        text += (f"; `--part persistent` ({when(p)}): HGEMM v9 (persistent, a producer warpgroup, fp16 C) "
                 f"{pct(v9(4096))} of cuBLAS fp16 at 4096³ and {pct(v9(8192))} at 8192³, conv {best['version']} "
                 f"(fp16 Y) {best['fp16_out_kernel_ms']:.3f} ms = {c['cudnn_best']['ms'] / best['fp16_out_kernel_ms']:.0%} "
                 f"of cuDNN's fastest plan, its NHWC call {best['nhwc_vs_kernel']:.2f}x its kernel")
    return text


def book_model() -> str:
    R = load("book_model")
    t, p = R["training"], R["pytorch"]
    text = (f"{when(R)}: {t['steps']} training steps in {t['seconds']:.1f} s, test accuracy {t['test_acc'][-1]:.1%}; "
            f"one step at batch {p['batch']} against PyTorch eager ({when(p['measured'], R) or 'same run'}): "
            f"{p['gpulib_ms']:.2f} ms as written against {p['torch_ms']:.2f} ms ({p['ratio']:.2f}x), "
            f"{p['replayed_ms']:.2f} ms ({p['replayed_ms'] / p['torch_ms']:.2f}x) recorded once and replayed")
    if p.get("graph_built"):
        text += f", {p['graph_ms']:.2f} ms ({p['graph_ms'] / p['torch_ms']:.2f}x) as one CUDA graph"
    return text + f"; the step's kernels take {p['gpu_ms']:.2f} ms"


def speed_grading() -> str:
    R = load("speed_grading")
    mine = [r for r in R["rows"] if r["solution"] == "the instructor's solution"]
    ratios = [r["ratio"] for r in mine]
    full = all(r["points"] == r["of"] for r in mine)
    slowest = []
    for exercise in dict.fromkeys(r["exercise"] for r in R["rows"]):
        r = max((r for r in R["rows"] if r["exercise"] == exercise and r not in mine), key=lambda r: r["ratio"])
        slowest.append(f"{exercise.split('_')[0]}.{exercise.split('_')[1]} {r['solution']} {r['ratio']:.2f}x, "
                       f"{r['points']:.2f}/{r['of']:g} points")
    return (f"{when(R)}: the instructor's solutions {min(ratios):.2f}-{max(ratios):.2f}x the reference kernel's time"
            f"{', full points' if full else ''}; the slowest correct ones: " + "; ".join(slowest))


def scoreboard() -> str:
    if not (ROOT / "benchmarks" / "results" / "scoreboard.json").exists():
        return "not measured yet"
    R = load("scoreboard")
    parts = []
    for part, what in (("step", "the step at batch 256"), ("conv", "the 16.3 layer"), ("gemm", "SGEMM 4096³")):
        r = R[part]
        unit = "x PyTorch's time" if part == "step" else f"x {r['library'].split(' (')[0]}'s speed"
        measured = when(r["measured"], R if "device" in R else None) if "measured" in r else ""
        parts.append(f"{what}{f' ({measured})' if measured else ''}: {r['ours']} {r['ours_ms']:.3f} ms = "
                     f"{r['value']:.2f}{unit}{'' if r['met'] else ' (target not met)'}")
    return (f"{when(R)}: " if "device" in R else "") + "; ".join(parts)


ROWS = [
    ("16.3 direct conv vs cuDNN (N=32, C=64, 56x56, K=64, 3x3, pad 1, fp32)",
     "`python benchmarks/conv_direct.py --save`", "conv_direct", direct),
    ("16.4 SGEMM 4096³ vs cuBLAS; the same layer as im2col + GEMM and implicit GEMM vs cuDNN; im2col's memory",
     "`python benchmarks/conv_gemm.py --save` (one part: `--part gemm`, `layer` or `memory`)", "conv_gemm", gemm),
    ("16.5 tensor cores vs cuBLAS/cuDNN fp16, auto-tuner on four layers, cuDNN's own plans, fp32/TF32/fp16/bf16",
     "`python benchmarks/cudnn_tensorcore.py --save` (one part: `--part tensor_cores`, `resources`, `autotune`, "
     "`cudnn_engines`, `winograd_f4`, `wgmma` or `persistent`)", "cudnn_tensorcore", tensor_cores),
    ("16.6 the model trained and profiled, GPU limits, memory estimate, PyTorch playbook, im2col, CUDA C",
     "`python benchmarks/book_model.py --save` (one part: `--part pytorch`, `softmax`, ...)", "book_model", book_model),
    ("16.4-16.6 the book's fastest step, fp32 convolution and SGEMM against PyTorch eager, cuDNN and cuBLAS, "
     "in one run", "`python benchmarks/scoreboard.py --save` (one part: `--part step`, `conv` or `gemm`)", "scoreboard",
     scoreboard),
    ("speed-graded exercises: the clean room's points for the instructor's solutions and slower correct ones",
     "`python benchmarks/speed_grading.py --save`", "speed_grading", speed_grading),
]


def table() -> str:
    lines = [BEGIN, "| benchmark | command | stored result |", "|---|---|---|"]
    for what, command, name, summary in ROWS:
        lines.append(f"| {what} | {command} | `benchmarks/results/{name}.json` ({summary()}) |")
    return "\n".join(lines + [END])


def rewritten(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + table() + text[end:]


def main(argv: list[str]) -> int:
    text = README.read_text()
    if "--check" in argv:
        if rewritten(text) != text:
            print("README.md's measured-speed table differs from benchmarks/results: run python tools/readme_results.py")
            return 1
        return 0
    README.write_text(rewritten(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
