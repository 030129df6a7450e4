"""The stored run of the speed-graded exercises (benchmarks/speed_grading.py, on a GPU): every
speed check gave the instructor's solution full points and a slower correct solution part of
them, and the READMEs quote that run's numbers. Nothing is timed here."""

from __future__ import annotations

from pathlib import Path

from gpulib.bench import speed_grading as bench

ROOT = Path(__file__).resolve().parents[1]


def test_each_speed_check_gave_full_points_to_the_solution_and_part_to_a_slower_one():
    results = bench.load()
    assert results["device"] and results["date"]
    by_exercise = {}
    for row in results["rows"]:
        assert row["passed"], row  # every variant is a correct solution: only its speed differs
        by_exercise.setdefault(row["exercise"], {})[row["solution"]] = row
    assert set(by_exercise) == {f"{a}/{s}" for a, _, s, _ in bench.EXERCISES}
    for exercise, rows in by_exercise.items():
        mine = rows.pop("the instructor's solution")
        assert mine["points"] == mine["of"], exercise
        assert any(0 < r["points"] < r["of"] for r in rows.values()), (exercise, rows)


def test_the_readmes_quote_the_stored_run():
    results = bench.load()
    rows = results["rows"]
    solutions = [r["ratio"] for r in rows if r["solution"] == "the instructor's solution"]
    quoted = {"README.md": ROOT / "README.md", "assignments/README.md": ROOT / "assignments" / "README.md"}
    for name, path in quoted.items():
        text = " ".join(path.read_text().split())
        assert f"{min(solutions):.2f}-{max(solutions):.2f}" in text, name
        assert results["date"] in text, name
        for ratio in ("2.84", "5.95", "1.90"):
            assert ratio in text and any(f"{r['ratio']:.2f}" == ratio for r in rows), (name, ratio)
        for points in ("1.31", "0.60", "1.70"):
            assert points in text and any(f"{r['points']:.2f}" == points for r in rows), (name, points)
