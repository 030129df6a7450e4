"""nbgrader really generates and grades the assignments: the student versions hold no solution
and no hidden test, a solution earns full marks, an untouched student version earns zero
without upsetting the grader, and a submission that hangs loses only the hanging exercises.

This is the instructor's cycle of assignments/README.md on a temporary course folder, with
short time limits so that the hanging submission costs seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments" / "source"
GRADED = ("16_1_mlp", "16_5_cudnn")  # autograded here (the glob below); every assignment is generated


def run_nbgrader(course, *args, env=None):
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def make_course(tmp_path_factory):
    """A temporary course folder with every assignment generated; returns it and nbgrader's environment."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "assignments" / "nbgrader_config.py", course)
    shutil.copytree(SOURCE, course / "source")
    env = dict(os.environ, GPULIB_BACKEND="sim", GPULIB_GRADING_TIMEOUT="3", GPULIB_CLEANROOM_MARGIN_S="3",
               NBGRADER_CELL_TIMEOUT="4",  # the feedback run's limit: its outputs never give the scores
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # nbgrader runs alembic
    run_nbgrader(course, "generate_assignment", "*", "--force", env=env)  # every assignment, one process
    return course, env


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return make_course(tmp_path_factory)


def _code(nb_path):
    return "\n".join("".join(c["source"]) for c in json.loads(Path(nb_path).read_text())["cells"])


def _solution_lines(source_text):
    """The lines between BEGIN and END SOLUTION markers (what students must not see)."""
    lines = []
    for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", source_text, re.S):
        lines += [line.strip() for line in block.splitlines() if len(line.strip()) > 12]
    return lines


def test_student_versions_hold_no_solution_and_no_hidden_test(course):
    course, _ = course
    for source in sorted(SOURCE.glob("*/*.ipynb")):
        release = course / "release" / source.parent.name / source.name
        student, original = _code(release), _code(source)
        assert "BEGIN HIDDEN TESTS" not in student and "hidden=True" not in student, release
        assert "BEGIN SOLUTION" not in student and "raise NotImplementedError()" in student, release
        given = re.sub(r"### BEGIN SOLUTION\n.*?### END SOLUTION", "", original, flags=re.S)
        allowed = {line.strip() for line in given.splitlines()}  # lines the stub gives anyway
        student_lines = {line.strip() for line in student.splitlines()}
        leaked = [line for line in _solution_lines(original) if line in student_lines and line not in allowed]
        assert not leaked, f"{release.name}: solution lines in the student version: {leaked[:3]}"
        assert "hidden=True" in original  # the source does have hidden tests to remove


def _hang(assignment, nb):
    """A submission: the solution, with one exercise stuck in an endless loop; returns the
    points that exercise is worth."""
    if assignment == "16_1_mlp":  # a kernel: the check's watchdog stops it
        cell, old, new = (
            "dense_backward_kernels",
            "    if j < dW.shape[0]",
            "    while j == j:\n        j = j * 1\n    if j < dW.shape[0]",
        )
    else:  # plain Python: nbgrader's cell timeout interrupts it
        cell, old, new = "loss_scaler", "        self.clean_steps += 1\n", "        while True:\n            pass\n"
    for c in nb["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == cell:
            src = "".join(c["source"])
            assert src.count(old) == 1
            c["source"] = src.replace(old, new)
    return {"16_1_mlp": 6, "16_5_cudnn": 4}[assignment]


def add_cheat_cell(cells: list, marker: Path, gradebook: Path) -> None:
    """Inserts, before the first test cell, a cell that patches every check it can reach (the
    student's run then prints only passes) and starts a thread that rewrites the gradebook's
    scores and leaves the file ``marker``."""
    import nbformat

    patch = (
        "from gpulib.grading import core\nimport gpulib.grading\n"
        "for m in [grade, core]:\n"
        "    for n in dir(m):\n"
        "        if n.startswith('check_') or n in ('compare', 'validate'):\n"
        "            setattr(m, n, lambda *a, **k: print('통과'))\n"
        "import threading, time, sqlite3\n"
        "def rewrite():\n"
        "    for _ in range(40):\n"
        "        try:\n"
        f"            open({str(marker)!r}, 'w').write('x')\n"
        f"            db = sqlite3.connect({str(gradebook)!r})\n"
        "            db.execute('UPDATE grade SET auto_score = 99')\n"
        "            db.commit()\n"
        "        except Exception:\n"
        "            pass\n"
        "        time.sleep(0.25)\n"
        "threading.Thread(target=rewrite).start()\n"
    )
    first_test = next(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade"))
    cells.insert(first_test, nbformat.v4.new_code_cell(patch))


def _cheat(assignment, nb, course):
    """A submission that cheats three ways and solves nothing: the cheating cell above, and
    each solution cell holding a wrong answer. Every point of it is lost."""
    wrong = {
        "16_1_mlp": ("Y[n, j] = max(acc, 0.0)", "Y[n, j] = acc"),
        "16_5_cudnn": ("AT @ (U * V) @ AT.T", "AT @ (U @ V) @ AT.T"),
    }
    for c in nb["cells"]:
        src = "".join(c["source"])
        if wrong[assignment][0] in src:
            c["source"] = src.replace(*wrong[assignment])
    add_cheat_cell(nb["cells"], course / "HACKED", course / "gradebook.db")
    return nb


def test_autograde_gives_full_marks_zero_and_partial_credit(course):
    course, env = course
    from nbgrader.api import Gradebook

    lost = {}
    for assignment in GRADED:
        source = SOURCE / assignment / f"{assignment}.ipynb"
        hang = json.loads(source.read_text())
        lost[assignment] = _hang(assignment, hang)
        cheat = _cheat(assignment, json.loads(source.read_text()), course)
        for student, content in (
            ("solution", source.read_text()),
            ("untouched", (course / "release" / assignment / source.name).read_text()),
            ("hangs", json.dumps(hang)),
            ("cheats", json.dumps(cheat)),
        ):
            folder = course / "submitted" / student / assignment
            folder.mkdir(parents=True)
            (folder / source.name).write_text(content)
    # both assignments, one process for each kind of run: the submissions whose own run matters
    # (a hang, a cheat that patches the checks and writes outside) run for the student's feedback
    # first; the solution and the untouched version are graded by the clean room alone (the
    # scores never come from the feedback run, and the solution's would rerun every check)
    run_nbgrader(course, "autograde", "16_[15]_*", "--create", "--CourseDirectory.student_id=[hc]*", env=env)
    run_nbgrader(course, "autograde", "16_[15]_*", "--create", "--CourseDirectory.student_id=[su]*",
                 "--CleanRoomExecute.feedback_run=False", env=env)
    for assignment in GRADED:
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            total = gb.find_assignment(assignment).max_score
            scores = {s: gb.find_submission(assignment, s).score for s in ("solution", "untouched", "hangs", "cheats")}
        assert total >= 15
        lost_by_cheat = {"16_1_mlp": 5, "16_5_cudnn": 4}[assignment]  # the exercise answered wrong: the others are solved
        assert scores == {
            "solution": total,
            "untouched": 0,
            "hangs": total - lost[assignment],
            "cheats": total - lost_by_cheat,
        }, (assignment, scores)
    assert not (course / "HACKED").exists()  # the student's run could write nothing outside its sandbox
    feedback = run_nbgrader(course, "generate_feedback", GRADED[0], "--CourseDirectory.student_id=hangs", env=env)
    assert list((course / "feedback" / "hangs" / GRADED[0]).glob("*.html")), feedback.stdout
