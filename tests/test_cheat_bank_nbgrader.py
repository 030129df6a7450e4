"""The banks of cheats and correct alternatives of tests/test_cleanroom.py, graded by nbgrader:
each submission a student of its own, all autograded in one run with the clean room installed by
assignments/nbgrader_config.py. A module of its own (its own course folder) so that it runs
beside tests/test_assignments_nbgrader.py on another worker.
"""

from __future__ import annotations

import json

import pytest
from test_assignments_nbgrader import make_course, run_nbgrader


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return make_course(tmp_path_factory)


def test_every_cheat_and_alternative_submitted_gets_what_it_should(course):
    """The banks of tests/test_cleanroom.py, each submission a student of its own, autograded by
    nbgrader in one run (feedback run off: the scores never come from it, see above): every test
    cell of a cheating or non-solving exercise scores zero with the clean room's kind of mistake,
    every other test cell, and every cell of a correct alternative, scores its full points."""
    import nbformat
    from nbgrader.api import Gradebook
    from test_cleanroom import ALTERNATIVES, CHEATS, exercise_tests, submission

    course, env = course
    bank = {f"bank{i:02d}": (a, r, e) for i, (a, r, e) in enumerate(CHEATS)}
    bank.update({f"bank{len(CHEATS) + i:02d}": (a, r, {}) for i, (a, r) in enumerate(ALTERNATIVES)})
    for student, (assignment, replaced, _) in bank.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        (folder / f"{assignment}.ipynb").write_text(json.dumps(submission(assignment, replaced)))
    run_nbgrader(course, "autograde", "*", "--create", "--CourseDirectory.student_id=bank*",
              "--CleanRoomExecute.feedback_run=False", env=dict(env, GPULIB_GRADING_TIMEOUT="60"))  # the usual limit
    wrong = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, (assignment, replaced, expected) in bank.items():
            graded = nbformat.read(course / "autograded" / student / assignment / f"{assignment}.ipynb", as_version=4)
            kinds = {
                c.metadata["nbgrader"]["grade_id"]: next((o.get("ename", "") for o in c.outputs if o.output_type == "error"), "")
                for c in graded.cells
                if c.metadata.get("nbgrader", {}).get("grade")
            }
            for grade_id, test_ids in exercise_tests(assignment).items():
                for test_id in test_ids:
                    grade = gb.find_grade(test_id, assignment, assignment, student)
                    if grade_id in expected:
                        ok = grade.score == 0 and kinds[test_id].removeprefix("Mistake[").rstrip("]") in expected[grade_id]
                    else:
                        ok = grade.score == grade.max_score
                    if not ok:
                        wrong.append((student, sorted(replaced), test_id, grade.score, kinds[test_id]))
    assert not wrong, wrong
