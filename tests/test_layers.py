"""The layers' contracts (pyproject.toml, [tool.importlinter]) hold for gpulib, and break when a
lower layer imports a higher one: import-linter run on gpulib as it is, then on a copy with one
planted upward import (the base's shapes.py importing 16.6's profiler)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(where: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-cache", "--config", str(where / "pyproject.toml")], cwd=where,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(where)}, capture_output=True, text=True,
                          timeout=300)


def test_every_import_points_down_the_layers():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_planted_upward_import_breaks_the_layers(tmp_path):
    shutil.copytree(ROOT / "gpulib", tmp_path / "gpulib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shapes = tmp_path / "gpulib" / "shapes.py"
    shapes.write_text(shapes.read_text() + "\n\ndef _planted():\n    from gpulib.playbook import profile  # noqa\n")
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "gpulib's layers, top to bottom BROKEN" in result.stdout
    assert "gpulib.shapes -> gpulib.playbook.profile" in result.stdout, result.stdout


def test_every_module_sits_in_a_layer():
    """A module no layer names would escape the contracts: each one of gpulib is in a layer (or
    inside a package that is)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    named = {m.strip() for layer in config["layers"] for m in layer.replace("|", ":").split(":")}
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "gpulib").rglob("*.py")}
    outside = sorted(m for m in modules - {"gpulib"}
                     if not any(m == n or m.startswith(n + ".") for n in named)
                     and not any(n.startswith(m + ".") for n in named))  # a package whose modules are named one by one
    assert not outside, outside


def test_numba_s_private_names_live_in_two_modules():
    """Numba's insides (its dispatcher, driver, device arrays, compiler paths, the simulator's
    kernels) are named in gpulib/launch.py and gpulib/simulator.py only: when Numba changes them,
    those two files are the ones to mend."""
    import re

    private = re.compile(r"numba\.cuda\.(simulator|cudadrv|dispatcher|cuda_paths)|_LaunchConfiguration|_codelibrary")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "gpulib").rglob("*.py"))
             if p.name not in ("launch.py", "simulator.py") or p.parent != ROOT / "gpulib"
             for n, line in enumerate(p.read_text().splitlines(), 1) if private.search(line)]
    assert not found, found
