"""Measured numbers in prose, bound to the stored results they quote (book/claims.toml).

Every number with a unit of speed, time, share or size (ms, µs, TFLOP/s, GB/s, %, x, KB, ...) or in
e-notation (an error: 3e-4) in the markdown cells of the book and the assignments, the READMEs and
CONTRIBUTING.md lies inside a claim of book/claims.toml:

    [[bound]]                      # the numbers of ``text`` come from benchmarks/results/*.json
    file = "book/16_5b_hopper_wgmma.ipynb"
    text = "4096³에서 cuBLAS fp16의 76%, 8192³에서 89%다"
    values = ["cudnn_tensorcore: wgmma.sizes[size=4096].rows[name~v6 (wgmma, TMA), 128x256, 4].vs_library * 100",
              "cudnn_tensorcore: wgmma.sizes[size=8192].rows[name~v6 (wgmma, TMA), 128x256, 4].vs_library * 100"]

    [[unbound]]                    # numbers that are not a stored measurement, and why
    file = "README.md"
    text = "H200 (141 GB, 4.8 TB/s)"
    why = "the datasheet"

A value is ``results-file: path`` (keys joined by dots; ``[3]`` an index, ``[key=value]`` the
first element whose key equals value, ``[key~text]`` the first whose key contains text,
``[a=1&b~x]`` the first that meets both, ``['a.b']`` a key that holds dots, as Nsight Compute's
metric names do),
optionally followed by `` * ``, `` / ``, `` + `` or `` - `` and a number or another result,
worked from left to right (``a / b * 100``: a ratio as a percentage) except inside ``( ... )``; ``py: module.NAME`` is a
constant of the code (a grading threshold the prose states).
``"-"`` skips a number of the text that is not measured (a size, a datasheet figure). Each
value must round to the number as the text prints it (a tolerance of half its last digit, or
``tol``). tests/test_claims.py checks it all, so a stored result that changes without its prose,
or prose that changes without its result, fails.

    python tools/claims.py            # the numbers no claim covers yet, with stored values near them
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CLAIMS = ROOT / "book" / "claims.toml"
RESULTS = ROOT / "benchmarks" / "results"
DOCUMENTS = [*sorted((ROOT / "book").glob("*.ipynb")), *sorted((ROOT / "assignments" / "source").glob("*/*.ipynb")),
             ROOT / "README.md", ROOT / "assignments" / "README.md", ROOT / "CONTRIBUTING.md"]

_UNIT = r"(?:min|s|ms|µs|us|ns|GB/s|TB/s|TFLOP/s|GFLOP/s|FLOP/B|TFLOPS|MB|GB|KB|TF|배(?!경)|분(?!의)|초)"
NUMBER = re.compile(rf"(?<![\w.^/])(\d+(?:,\d{{3}})*(?:\.\d+)?)(?:\s?{_UNIT}(?![A-Za-z0-9_/])|\s?%|x(?![A-Za-z0-9_²³]))")
_NOT_PROSE = re.compile(r"<!-- [^>]*writes it -->.*?<!-- end of [^>]*-->"  # a generated table (tools/readme_results.py)
                        r"|```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|<!--.*?-->|\(https?://[^)]*\)", re.S)


def prose(path: Path) -> str:
    """A document's prose: markdown cells of a notebook (or the whole markdown file), code and
    mathematics blanked, whitespace runs made one space (claims may break lines anywhere)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    return re.sub(r"\s+", " ", _NOT_PROSE.sub(" ", text))


SCIENTIFIC = re.compile(r"(?<![\w.^/])(\d(?:\.\d+)?e[-+]?\d+)(?![0-9A-Za-z_.])")  # an error or a format's range: 3e-4


def numbers(text: str) -> list[re.Match]:
    """The measured-looking numbers of a text, in order: those with a unit, and those in e-notation."""
    return sorted([*NUMBER.finditer(text), *SCIENTIFIC.finditer(text)], key=lambda m: m.start())


def load_claims(path: Path = CLAIMS) -> dict:
    data = tomllib.loads(path.read_text())
    return {"bound": data.get("bound", []), "unbound": data.get("unbound", [])}


_results_cache: dict[str, object] = {}


def result(name: str):
    if name not in _results_cache:
        _results_cache[name] = json.loads((RESULTS / f"{name}.json").read_text())
    return _results_cache[name]


_SEGMENT = re.compile(r"([^.\[\]]+)?((?:\[[^\]]*\])*)")


def resolve(spec: str):
    """The stored value ``results-file: path`` names."""
    name, _, path = spec.partition(":")
    node, path = result(name.strip()), path.strip()
    for part in _split_outside_brackets(path, lambda i: path[i] == ".")[::2]:
        m = _SEGMENT.fullmatch(part)
        if m is None:
            raise KeyError(f"bad path segment {part!r} in {spec!r}")
        key, selectors = m.groups()
        if key:
            node = node[key]
        for sel in re.findall(r"\[([^\]]*)\]", selectors or ""):
            node = select(node, sel, spec)
    return node


def _split_outside_brackets(text: str, at) -> list[str]:
    """``text`` cut at every position ``at(i)`` accepts outside ``[...]`` (a selector may hold any
    character but a bracket) and outside ``(...)`` written between selectors: the pieces with the
    separating characters between them, as ``re.split`` with a group."""
    pieces, depth, groups, current = [], 0, 0, ""
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        groups += depth == 0 and (ch == "(") - (ch == ")")  # parentheses count only outside selectors
        if depth == 0 and groups == 0 and at(i):
            pieces += [current, ch]
            current = ""
        else:
            current += ch
    return pieces + [current]


def select(node, selector: str, spec: str = ""):
    """The element of the list ``node`` that ``[selector]`` names (see the module's docstring), or
    the entry of the dict ``node`` that a quoted key names (``['a.key.with.dots']``)."""
    if selector.lstrip("-").isdigit():
        return node[int(selector)]
    if len(selector) >= 2 and selector[0] == selector[-1] == "'":
        return node[selector[1:-1]]
    conditions = []
    for condition in selector.split("&"):
        op = next((op for op in ("~", "=") if op in condition), None)
        if op is None:
            raise KeyError(f"bad selector [{selector}] in {spec!r}")
        key, want = (s.strip() for s in condition.split(op, 1))
        conditions.append((key, op, want))

    def matches(item) -> bool:
        for key, op, want in conditions:
            have = item.get(key) if isinstance(item, dict) else None
            if have is None or not (want in str(have) if op == "~" else str(have) == want):
                return False
        return True

    for item in node:
        if matches(item):
            return item
    raise KeyError(f"no element with [{selector}] in {spec!r}")


def evaluate(expr: str) -> float:
    """A value of a bound claim: a stored number, scaled or divided as the expression says."""
    terms = _split_outside_brackets(expr, lambda i: expr[i] in "*/+-" and expr[i - 1:i] == " " == expr[i + 1:i + 2])
    value = _term(terms[0])
    for op, term in zip(terms[1::2], terms[2::2]):
        t = _term(term)
        value = {"*": value * t, "/": value / t if t else float("nan"), "+": value + t, "-": value - t}[op]
    return value


def _term(term: str) -> float:
    term = term.strip()
    if term.startswith("(") and term.endswith(")"):  # a group: fixed / (fixed + 128 * step)
        return evaluate(term[1:-1])
    if term.startswith("py:"):  # a constant of the code the prose describes: py: gpulib.grading.core.SPEED_FULL
        module, _, name = term[3:].strip().rpartition(".")
        return float(getattr(importlib.import_module(module), name))
    try:
        return float(term)
    except ValueError:
        return float(resolve(term))


def printed_value(match: re.Match) -> tuple[float, float]:
    """The number as printed and half its last digit (the rounding it allows)."""
    text = match.group(1).replace(",", "")
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return float(text), 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def uncovered(claims: dict | None = None) -> list[tuple[Path, str, re.Match]]:
    """(document, prose, number) for every unit-bearing number that no claim's text covers."""
    claims = claims or load_claims()
    out = []
    for doc in DOCUMENTS:
        text = prose(doc)
        spans = []
        for claim in claims["bound"] + claims["unbound"]:
            if ROOT / claim["file"] == doc:
                start = text.find(claim["text"])
                while start >= 0:
                    spans.append((start, start + len(claim["text"])))
                    start = text.find(claim["text"], start + 1)
        for m in numbers(text):
            if not any(a <= m.start() and m.end() <= b for a, b in spans):
                out.append((doc, text, m))
    return out


def _leaves(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = v.get("name") if isinstance(v, dict) and "name" in v else None
            yield from _leaves(v, f"{path}[name~{label}]" if label else f"{path}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, float(node)


def near(value: float, slack: float) -> list[str]:
    """Stored leaves that print as ``value`` (as is, x100 or inverted), for a new claim."""
    hits = []
    for f in sorted(RESULTS.glob("*.json")):
        for path, v in _leaves(json.loads(f.read_text())):
            for shown, how in ((v, ""), (100 * v, " * 100"), (1 / v if v else 0, " (inverted)")):
                if abs(shown - value) <= slack:
                    hits.append(f"{f.stem}: {path}{how}")
    return hits


def main() -> int:
    missing = uncovered()
    for doc, text, m in missing:
        value, slack = printed_value(m)
        context = text[max(0, m.start() - 60):m.end() + 20]
        print(f"{doc.relative_to(ROOT)}: {m.group(0)!r} in …{context}…")
        for hit in near(value, slack)[:6]:
            print(f"    {hit}")
    print(f"{len(missing)} numbers not covered by {CLAIMS.relative_to(ROOT)}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
