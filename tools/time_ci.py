"""Time CI the way it runs: a fresh clone of HEAD, then .ci/run's make targets one after another,
each timed from the outside, its pytest items counted, and the test modules that took longest
summed from pytest's JUnit XML. Writes benchmarks/results/ci_time.json; CONTRIBUTING.md's
"Where it stands" paragraph quotes it, and book/claims.toml binds those figures to it.

    python tools/time_ci.py          # 10-20 minutes on two cores; run it alone on the machine
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "ci_time.json"
TARGETS = ["test", "browser-test", "html-test", "hub-test"]  # the order of .ci/run
SUMMARY = re.compile(r"(\d+) passed.*? in ([\d.]+)s")


def read_run() -> list[str]:
    """The make targets .ci/run calls, in its order (so that this script cannot drift from it)."""
    return re.findall(r"^make (\S+)$", (ROOT / ".ci" / "run").read_text(), re.M)


def slowest_modules(xml: Path, n: int = 4) -> list[dict]:
    """Test modules (or notebooks) by the summed time of their tests, longest first."""
    if not xml.exists():
        return []
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(xml).iter("testcase"):
        seconds[case.get("classname", "?")] += float(case.get("time", 0))
    return [{"module": m, "seconds": round(s, 1)} for m, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:n]]


def time_target(clone: Path, target: str, scratch: Path) -> dict:
    xml = scratch / f"{target}.xml"
    env = dict(os.environ, PYTEST_ADDOPTS=f"--junitxml={xml}")
    start = time.perf_counter()
    run = subprocess.run(["make", target], cwd=clone, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    out = run.stdout + run.stderr
    if run.returncode:
        lines = [line for line in out.splitlines() if not line.startswith("WARNING: Location")]  # pip's index notes
        sys.stdout.write("\n".join(lines[-80:]) + "\n")
        raise SystemExit(f"make {target} failed (exit {run.returncode})")
    found = SUMMARY.findall(out)
    items, pytest_s = (int(found[-1][0]), float(found[-1][1])) if found else (None, None)
    print(f"make {target}: {seconds:.0f} s (pytest {pytest_s} s, {items} passed)", flush=True)
    return {"target": target, "seconds": round(seconds, 1), "pytest_seconds": pytest_s, "passed": items,
            "slowest": slowest_modules(xml)}


def main() -> int:
    targets = read_run()
    assert targets == TARGETS, f".ci/run calls {targets}; update TARGETS"
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                                text=True).stdout.strip()
        steps = [time_target(clone, t, Path(tmp)) for t in targets]
    result = {"date": datetime.date.today().isoformat(), "commit": commit, "cores": os.cpu_count(),
              "gpu": shutil.which("nvidia-smi") is not None,
              "all_seconds": round(sum(s["seconds"] for s in steps), 1), "steps": steps}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f".ci/run: {result['all_seconds']:.0f} s in all -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
