"""Every measured number in the book's prose, the README and CONTRIBUTING is bound to the stored
result it quotes (book/claims.toml, read by tools/claims.py), or listed as not a measurement with
the reason. A stored result that changes without its sentence fails here, and so does a sentence
that changes without its result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import claims  # noqa: E402
import readme_results  # noqa: E402
import time_ci  # noqa: E402

CLAIMS = claims.load_claims()
PROSE = {doc: claims.prose(doc) for doc in claims.DOCUMENTS}


def _id(claim: dict) -> str:
    return f"{Path(claim['file']).stem}: {claim['text'][:40]}"


def test_every_measured_number_is_covered():
    missing = [f"{doc.relative_to(ROOT)}: {m.group(0)!r} in …{text[max(0, m.start() - 50):m.end() + 10]}…"
               for doc, text, m in claims.uncovered(CLAIMS)]
    assert not missing, "numbers that book/claims.toml does not cover (python tools/claims.py):\n" + "\n".join(missing)


@pytest.mark.parametrize("claim", CLAIMS["bound"] + CLAIMS["unbound"], ids=_id)
def test_the_claimed_text_is_in_its_document(claim):
    doc = ROOT / claim["file"]
    assert doc in PROSE, f"{claim['file']} is not one of the documents tools/claims.py reads"
    assert claim["text"] in PROSE[doc], f"{claim['file']} no longer says: {claim['text']}"


@pytest.mark.parametrize("claim", CLAIMS["unbound"], ids=_id)
def test_an_unbound_number_says_why(claim):
    assert len(claim.get("why", "").split()) >= 2, claim


@pytest.mark.parametrize("claim", CLAIMS["bound"], ids=_id)
def test_a_bound_number_is_its_stored_result(claim):
    printed = claims.numbers(claim["text"])
    values = claim["values"]
    assert len(values) == len(printed), (
        f"{len(printed)} numbers in the text ({[m.group(0) for m in printed]}) but {len(values)} values")
    for m, expr in zip(printed, values):
        if expr == "-":
            continue
        shown, slack = claims.printed_value(m)
        stored = claims.evaluate(expr)
        assert abs(stored - shown) <= claim.get("tol", slack) + 1e-9, (
            f"{m.group(0)!r} in {claim['file']}, but {expr} = {stored:.6g}")


@pytest.mark.parametrize("claim", [c for c in CLAIMS["bound"] if "tol" in c], ids=_id)
def test_a_wider_tolerance_stays_narrow(claim):
    """A claim that says "about" may widen its tolerance, but to no more than a tenth of what it prints."""
    for m, expr in zip(claims.numbers(claim["text"]), claim["values"]):
        if expr != "-":
            assert claim["tol"] <= 0.1 * claims.printed_value(m)[0], (m.group(0), claim["tol"])


def test_a_bound_claim_binds_at_least_one_number():
    for claim in CLAIMS["bound"]:
        assert any(v != "-" for v in claim["values"]), claim


def test_the_readme_table_is_written_from_the_stored_results():
    assert readme_results.rewritten(readme_results.README.read_text()) == readme_results.README.read_text(), (
        "run python tools/readme_results.py")


def test_the_stored_ci_times_cover_what_ci_runs():
    """CONTRIBUTING's CI figures come from a run of every target .ci/run calls, on a machine without a GPU."""
    stored = json.loads(time_ci.OUT.read_text())
    assert [s["target"] for s in stored["steps"]] == time_ci.read_run() == time_ci.TARGETS
    assert stored["gpu"] is False and stored["cores"] == 2
    assert abs(stored["all_seconds"] - sum(s["seconds"] for s in stored["steps"])) < 1


def test_values_read_dotted_keys_and_work_groups_first(monkeypatch):
    monkeypatch.setitem(claims._results_cache, "fake", {
        "metrics": {"sm__throughput.avg.pct": 56.0},
        "rows": [{"name": "v4 (128x256 tile", "ms": 2.0}, {"name": "v5", "ms": 3.0}]})
    assert claims.resolve("fake: metrics['sm__throughput.avg.pct']") == 56.0
    assert claims.evaluate("fake: rows[name~v4 (128x256].ms * (fake: rows[name=v5].ms + 1)") == 8.0
    assert claims.evaluate("2 * 3 + 4") == 10.0 and claims.evaluate("2 * (3 + 4)") == 14.0
