"""Write an nbgrader source notebook from a list of cells (used to create assignments/source/).

    cells = [md("# 제목"), code("import gpulib", locked=True),
             solution("def f():\n    ### BEGIN SOLUTION\n    ...\n    ### END SOLUTION", "ex1"),
             tests("check(f)", "ex1_check", points=2)]
    write(cells, "assignments/source/16_1_mlp/16_1_mlp.ipynb")

The notebooks are the source of truth once written; edit them in JupyterLab (nbgrader's
"Create Assignment" toolbar shows the same metadata) or with this helper.
"""

from __future__ import annotations

import json
from pathlib import Path


def _meta(grade_id, *, grade=False, solution=False, locked=False, points=None, task=False):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": task}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _lines(text: str) -> list[str]:
    text = text.strip("\n")
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


_count = {"md": 0, "code": 0}


def md(text: str, locked: bool = True) -> dict:
    _count["md"] += 1
    return {"cell_type": "markdown", "metadata": _meta(f"md_{_count['md']}", locked=locked) if locked else {},
            "source": _lines(text)}


def code(text: str, locked: bool = True) -> dict:
    _count["code"] += 1
    return {"cell_type": "code", "execution_count": None,
            "metadata": _meta(f"code_{_count['code']}", locked=locked) if locked else {},
            "outputs": [], "source": _lines(text)}


def solution(text: str, grade_id: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": _meta(grade_id, solution=True),
            "outputs": [], "source": _lines(text)}


def tests(text: str, grade_id: str, points: int) -> dict:
    return {"cell_type": "code", "execution_count": None,
            "metadata": _meta(grade_id, grade=True, locked=True, points=points), "outputs": [], "source": _lines(text)}


def write(cells: list[dict], path) -> None:
    nb = {"cells": cells, "metadata": {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:02d}"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
