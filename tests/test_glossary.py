"""One word per concept: the glossary page (book/glossary.md) lists the forms the book uses and
the ones it avoids, and no notebook or assignment uses an avoided form in its prose."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "book" / "glossary.md"
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "assignments" / "source").glob("*/*.ipynb"))
# code (fenced, inline) and mathematics are not prose: names such as conv2d or layer_forward stay
NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$", re.S)


def glossary_rows() -> list[tuple[str, str, list[str]]]:
    """(form used, English, forms avoided) for each row of the glossary's table."""
    rows = []
    for line in GLOSSARY.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("쓰는 말", "") or set(cells[0]) <= set("-"):
            continue
        rows.append((cells[0], cells[1], [a.strip() for a in cells[2].split(",") if a.strip()]))
    return rows


def prose(path: Path) -> list[tuple[int, str]]:
    """(cell index, text) of every markdown cell, code spans and mathematics blanked out."""
    cells = json.loads(path.read_text())["cells"]
    return [(i, NOT_PROSE.sub(" ", "".join(c["source"]))) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]


def avoided_pattern(form: str) -> re.Pattern:
    # a Korean word is matched with any particle after it, a Latin one as a whole word
    return re.compile(re.escape(form) if re.search(r"[가-힣]", form) else rf"(?<![\w.]){re.escape(form)}(?!\w)")


def test_the_glossary_has_one_form_per_concept():
    rows = glossary_rows()
    assert len(rows) >= 40
    used = [r[0] for r in rows]
    assert len(used) == len(set(used)), "a form is listed twice"
    avoided = [a for r in rows for a in r[2]]
    assert avoided and not set(avoided) & set(used), "a form is both used and avoided"
    for must in ("층", "편향", "합성곱", "장치", "원문"):
        assert must in [u.split(" (")[0] for u in used]


def test_no_notebook_or_assignment_uses_an_avoided_form():
    found = []
    for form in (a for r in glossary_rows() for a in r[2]):
        pattern = avoided_pattern(form)
        for path in NOTEBOOKS:
            for i, text in prose(path):
                for m in pattern.finditer(text):
                    found.append(f"{path.relative_to(ROOT)} cell {i}: {form!r} in "
                                 f"...{text[max(0, m.start() - 30):m.end() + 30]!r}...")
    assert not found, f"{len(found)} avoided forms (book/glossary.md says which form to use):\n" + "\n".join(found[:20])


def test_the_checker_finds_an_avoided_form_in_prose_and_not_in_code():
    text = NOT_PROSE.sub(" ", "이 레이어의 `layer_forward` 와 $b$ 는 ...")
    assert avoided_pattern("레이어").search(text)
    assert not avoided_pattern("레이어").search(NOT_PROSE.sub(" ", "`레이어` 를 부른다"))
    assert avoided_pattern("conv 층").search("한 conv 층의 forward")
    assert not avoided_pattern("conv 층").search("tensor-core conv v3")


def test_the_machine_like_sentences_are_gone():
    for path in NOTEBOOKS:
        for i, text in prose(path):
            for sentence in ("손잡이가 두 개", "남은 용의자는", "단정하지 않는다"):
                assert sentence not in text, f"{path.name} cell {i}: {sentence!r}"
