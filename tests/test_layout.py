"""The package's layout holds: no module imports the package it lives in or another module's
private name, every section module says which section it serves, every convolution takes the
same arguments, and the notebooks use public names only."""

import ast
import inspect
import json
from pathlib import Path

import pytest

import gpulib
from gpulib.conv.algorithms import ALGORITHMS

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted((ROOT / "gpulib").rglob("*.py"))
PACKAGE_NAMES = set(gpulib.__all__)  # what gpulib/__init__.py itself defines or re-exports


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                yield node.lineno, node.module, alias.name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_module_imports_the_package_or_a_private_name(path):
    where = path.relative_to(ROOT).as_posix()
    for line, module, name in _imports(path):
        assert module != "gpulib" or name is not None, f"{where}:{line}: 'import gpulib' inside the package"
        assert not (module == "gpulib" and name in PACKAGE_NAMES), (
            f"{where}:{line}: 'from gpulib import {name}' goes back up to gpulib/__init__.py; "
            f"import it from the module that defines it")
        if module.startswith("gpulib") and name is not None:
            package_private_module = (ROOT / module.replace(".", "/") / f"{name}.py").exists()  # gpulib._backend
            assert not name.startswith("_") or package_private_module, (
                f"{where}:{line}: imports the private name {name} of {module}")
    tree = ast.parse(path.read_text())
    modules = set()  # names under which this file holds another gpulib module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpulib"):
            modules |= {a.asname or a.name for a in node.names
                        if (ROOT / node.module.replace(".", "/") / f"{a.name}.py").exists()
                        or (ROOT / node.module.replace(".", "/") / a.name).is_dir()}
    private = [f"{n.value.id}.{n.attr}" for n in ast.walk(tree)
               if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
               and isinstance(n.value, ast.Name) and n.value.id in modules]
    assert not private, f"{where}: reaches into private names of other modules: {private}"


SECTION_FOLDERS = ("mlp", "cnn", "conv", "gemm", "tensorcore", "bench")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_module_opens_with_what_it_serves(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc, f"{path} has no docstring"
    folder = path.parent.name
    if (folder in SECTION_FOLDERS and path.name != "__init__.py" or folder == "figures" and path.name != "__init__.py"
            or folder == "grading" and path.stem not in ("core", "__init__")):
        assert doc.startswith("16."), f"{path}: the docstring should open with the section it serves"


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_convolution_takes_the_same_arguments(name):
    run = ALGORITHMS[name].run
    run = getattr(run, "func", run)  # functools.partial for the tensor-core versions
    params = inspect.signature(run).parameters
    assert list(params)[:5] == ["X", "W", "b", "padding", "stride"], name
    assert params["b"].default is None and params["padding"].default == 0 and params["stride"].default == 1
    assert params["out"].kind is inspect.Parameter.KEYWORD_ONLY and params["out"].default is None


def test_notebooks_use_public_names_only():
    for nb in sorted((ROOT / "book").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            tree = ast.parse("\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpulib"):
                    assert not any(a.name.startswith("_") for a in node.names), f"{nb.name} cell {i}: private import"
                if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                    raise AssertionError(f"{nb.name} cell {i}: uses the private name {node.attr}")
