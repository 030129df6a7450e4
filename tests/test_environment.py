"""environment.yml (conda) and pyproject.toml (pip) must ask for the same packages and pins."""

import re
import sys
from pathlib import Path

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)$")


def parse(requirement: str) -> tuple[str, str]:
    name, spec = SPEC.match(requirement).groups()
    name = re.sub(r"[-_.]+", "-", name).lower()
    return name, ",".join(sorted(s.strip() for s in spec.split(",") if s.strip()))


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    extras = project["optional-dependencies"]
    for extra in ("book", "classroom", "dev"):
        reqs += [r for r in extras[extra] if not r.startswith("gpulib")]
    return dict(parse(r) for r in reqs)


def conda_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    reqs = {}
    for dep in env["dependencies"]:
        entries = dep["pip"] if isinstance(dep, dict) else [dep]
        for entry in entries:
            if entry.startswith("-e") or entry.split(">")[0].split("=")[0].strip() in ("python", "pip"):
                continue
            name, spec = parse(entry)
            reqs[name] = spec
    return reqs


def test_same_packages_and_pins():
    assert conda_requirements() == pyproject_requirements()


def test_numpy_is_pinned_below_2_5():
    # numba-cuda 0.30 cannot compile any kernel with numpy 2.5 (../shared/gpu-facts.md)
    assert "<2.5" in pyproject_requirements()["numpy"].split(",")


def test_the_environment_installs_gpulib_itself():
    assert "-e ." in (ROOT / "environment.yml").read_text()
