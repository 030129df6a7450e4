"""16.3-16.5 assignments, speed graded on a GPU: what the clean room gives the instructor's solution and
slower correct solutions, each graded as nbgrader's autograde grades it (``judge.grade_parts``:
the solutions in the sandboxed worker, the check in the grader's process), in one run.

``benchmarks/speed_grading.py`` is the command-line front end; the results are stored in
benchmarks/results/speed_grading.json (with the device and date), and assignments/README.md
quotes them from there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpulib.bench import measure as measuring
from gpulib.grading import core
from gpulib.grading.cleanroom import judge

RESULTS = measuring.RESULTS_DIR / "speed_grading.json"
SOURCE = Path(__file__).resolve().parents[2] / "assignments" / "source"

# (assignment, solution cell, speed check cell, {variant: [(old, new), ...] edits of the solution})
# Each variant is a correct solution that the exercise's other checks accept; only its speed differs.
EXERCISES = [
    (
        "16_3_tiled_conv",
        "conv_tiled_kernel",
        "speed_tiled",
        {
            "every product added as four quarters": [
                (
                    "                    acc += W[k, c, r, s] * tile[ty + r, tx + s]\n",
                    "                    for rep in range(4):\n"
                    "                        acc += 0.25 * (W[k, c, r, s] * tile[ty + r, tx + s])\n",
                )
            ],
            "16 of the 64 threads load the tile": [
                (
                    "for i in range(ty * TILE + tx, IN_TILE * IN_TILE, TILE * TILE):",
                    "for i in range(ty * TILE + tx, IN_TILE * IN_TILE if ty * TILE + tx < 16 else 0, 16):",
                )
            ],
        },
    ),
    (
        "16_4_im2col",
        "sgemm_kernel",
        "speed_sgemm",
        {
            "every product added as two halves": [
                (
                    "                    acc[i, j] += a[i] * b[j]\n",
                    "                    acc[i, j] += 0.5 * (a[i] * b[j])\n"
                    "                    acc[i, j] += 0.5 * (a[i] * b[j])\n",
                )
            ],
            "the B tile loaded down its columns": [("kk, j = e // BN, e % BN", "kk, j = e % BK, e // BK")],
        },
    ),
    (
        "16_5_cudnn",
        "tc_gemm_kernel",
        "speed_tc_gemm",
        {
            "tiles loaded column by column": [("            r, c = i // 16, i % 16\n", "            r, c = i % 16, i // 16\n")],
            "half the warp loads the tiles": [
                ("for i in range(lane, 256, 32):", "for i in range(lane, 256 if lane < 16 else 0, 16):")
            ],
        },
    ),
]


def _notebook(assignment: str) -> dict:
    return json.loads((SOURCE / assignment / f"{assignment}.ipynb").read_text())


def _solution(nb: dict, grade_id: str) -> str:
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            return re.sub(r"(?m)^\s*### (BEGIN|END) SOLUTION\n?", "", "".join(cell["source"]))
    raise KeyError(grade_id)


def variant(assignment: str, solution_id: str, edits) -> str:
    """The solution cell with ``edits`` made (each must apply)."""
    source = _solution(_notebook(assignment), solution_id)
    for old, new in edits:
        if old not in source:
            raise ValueError(f"{assignment}/{solution_id}: the edit {old!r} does not apply")
        source = source.replace(old, new)
    return source


def grade_speed(assignment: str, solution_id: str, speed_id: str, source: str) -> dict:
    """The speed check ``speed_id`` in the clean room on the solution notebook with ``source`` as
    its ``solution_id`` cell: the points and the times the check measured."""
    nb = _notebook(assignment)
    submitted = json.loads(json.dumps(nb))
    for cell in submitted["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == solution_id:
            cell["source"] = source
    setup, solutions, tests = judge.notebook_parts(submitted, nb)
    before = len(core.SPEED_LOG)
    verdict = judge.grade_parts(setup, solutions, [t for t in tests if t[0] == speed_id])[speed_id]
    timed = core.SPEED_LOG[before:]
    row = {
        "passed": verdict.passed,
        "kind": verdict.kind,
        "message": verdict.message[:300],
        "points": verdict.score if verdict.passed else 0.0,
    }
    if timed:
        row.update({k: timed[-1][k] for k in ("ms", "reference_ms", "ratio", "of")})
    return row


def measure(repeat: int = 20) -> dict:
    """Every speed-graded exercise: the instructor's solution, then each slower variant; GPU only."""
    measuring.require_gpu()
    rows = []
    for assignment, solution_id, speed_id, variants in EXERCISES:
        cases = {"the instructor's solution": _solution(_notebook(assignment), solution_id)}
        cases.update({name: variant(assignment, solution_id, edits) for name, edits in variants.items()})
        for name, source in cases.items():
            row = grade_speed(assignment, solution_id, speed_id, source)
            rows.append(dict(exercise=f"{assignment}/{speed_id}", solution=name, **row))
            print(f"{assignment}/{speed_id} {name}: {row}", flush=True)
    return dict(
        measuring.header(repeat),
        bands={"full_within": core.SPEED_FULL, "floor_from": core.SPEED_FLOOR_AT, "floor": core.SPEED_FLOOR},
        rows=rows,
    )


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)


def table(results: dict) -> str:
    b = results["bands"]
    lines = [
        f"{results['device']}, {results['date']}: points against the instructor's kernel timed in the same run "
        f"(full within {b['full_within']}x, falling to {b['floor']:.0%} at {b['floor_from']}x)",
        f"{'exercise':30} {'solution':46} {'ms':>9} {'ref ms':>9} {'ratio':>6} {'points':>11}",
    ]
    for r in results["rows"]:
        if "ms" in r:
            lines.append(
                f"{r['exercise']:30} {r['solution']:46} {r['ms']:9.3f} {r['reference_ms']:9.3f} {r['ratio']:6.2f} "
                f"{r['points']:5.2f}/{r['of']:<5g}"
            )
        else:
            lines.append(f"{r['exercise']:30} {r['solution']:46} not timed: [{r['kind']}] {r['message'][:80]}")
    return "\n".join(lines)
