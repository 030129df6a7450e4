"""The screen a solution cell passes before it runs: what a solution has no business touching.

The separate process is the first line of defence (the verdict is not computed where this code
runs); this is the second. ``screen(source)`` returns the refusals, each with its line, in
Korean; an empty list means the cell may run. The same lists serve the worker at run time
(``ALLOWED_IMPORTS`` through a guarded ``__import__``, ``FORBIDDEN_BUILTINS`` left out of the
cell's builtins).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# what a solution may import (its names must also be imported by name, never a parent package)
ALLOWED_IMPORTS = frozenset({
    "math", "cmath", "numpy", "numba", "numba.cuda", "numba.types", "itertools", "functools", "collections",
    "dataclasses", "typing", "operator", "warnings", "time", "gpulib.tensorcore.wmma",
})
# builtins that reach around the namespace, the file system or the interpreter
FORBIDDEN_BUILTINS = frozenset({
    "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr", "hasattr", "globals",
    "locals", "vars", "dir", "breakpoint", "input", "help", "exit", "quit", "memoryview", "__build_class__",
    "copyright", "credits", "license",
})
# names of modules and objects of the grader a solution must not name, even if it could reach them
FORBIDDEN_NAMES = frozenset({
    "sys", "os", "gc", "inspect", "builtins", "ctypes", "threading", "_thread", "subprocess", "multiprocessing",
    "importlib", "signal", "socket", "pickle", "marshal", "shutil", "pathlib", "io", "gpulib", "reference",
    "nbgrader", "Mistake", "greenlet",
})
# attributes that lead to raw memory, files, the interpreter or the CUDA driver
FORBIDDEN_ATTRIBUTES = frozenset({
    "ctypes", "ctypeslib", "cudadrv", "simulator", "kernelapi", "config", "testing", "f2py", "distutils",
    "load", "loads", "save", "savez", "savetxt", "loadtxt", "fromfile", "tofile", "memmap", "frombuffer",
    "modules", "system", "popen", "environ", "core", "lib",
})


@dataclass(frozen=True)
class Refusal:
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.line}번째 줄: {self.what}"


class _Screen(ast.NodeVisitor):
    def __init__(self):
        self.refusals: list[Refusal] = []
        self.in_function = 0

    def refuse(self, node, what):
        self.refusals.append(Refusal(getattr(node, "lineno", 0), what))

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name not in ALLOWED_IMPORTS:
                self.refuse(node, f"'import {alias.name}'은(는) 풀이에 쓸 수 없다 (쓸 수 있는 모듈: "
                                  f"{', '.join(sorted(ALLOWED_IMPORTS))})")
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        if node.level or node.module not in ALLOWED_IMPORTS:
            self.refuse(node, f"'from {'.' * node.level}{node.module or ''} import ...'은(는) 풀이에 쓸 수 없다")
        for alias in node.names:
            if alias.name == "*" or alias.name.startswith("_"):
                self.refuse(node, f"'from {node.module} import {alias.name}'은(는) 쓸 수 없다: 이름을 하나씩 가져와라")
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in FORBIDDEN_BUILTINS:
            self.refuse(node, f"'{node.id}'은(는) 풀이에 쓸 수 없다 (이름공간, 파일, 인터프리터를 건드린다)")
        elif node.id in FORBIDDEN_NAMES:
            self.refuse(node, f"'{node.id}'은(는) 풀이에서 쓸 수 없는 이름이다 (채점기나 인터프리터의 것이다)")
        elif node.id.startswith("__") and node.id not in ("__name__",):
            self.refuse(node, f"'{node.id}': 밑줄 두 개로 시작하는 이름은 쓸 수 없다")
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr.startswith("_"):
            self.refuse(node, f"'.{node.attr}': 밑줄로 시작하는 속성은 쓸 수 없다 (다른 객체의 내부다)")
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self.refuse(node, f"'.{node.attr}'은(는) 풀이에 쓸 수 없다 (메모리, 파일, 드라이버, 인터프리터에 닿는다)")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            owner = node.value
            if not (self.in_function and isinstance(owner, ast.Name) and owner.id == "self"):
                self.refuse(node, f"'{ast.unparse(node)}'에 대입할 수 없다: 풀이가 바꿀 수 있는 속성은 메서드 안의 "
                                  f"self.속성뿐이다 (모듈이나 다른 객체를 바꾸지 말라)")
        self.generic_visit(node)

    def _function(self, node):
        self.in_function += 1
        self.generic_visit(node)
        self.in_function -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Global(self, node):
        self.refuse(node, "'global'은 쓸 수 없다: 함수는 값을 돌려주어라")

    def visit_Constant(self, node):
        if isinstance(node.value, str) and "__" in node.value and any(
                word in node.value for word in ("__class__", "__subclasses__", "__globals__", "__builtins__", "__dict__")):
            self.refuse(node, "문자열에 인터프리터 내부 이름이 있다")


def screen(source: str) -> list[Refusal]:
    """The refusals of one solution cell's source (a syntax error is one refusal)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Refusal(exc.lineno or 0, f"문법 오류: {exc.msg}")]
    visitor = _Screen()
    visitor.visit(tree)
    return visitor.refusals


def defined_names(source: str) -> list[str]:
    """The top-level names a cell defines (functions, classes, assignments), in order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                stack = [target]
                while stack:  # names, and names inside tuples and lists; never the base of x.attr or x[i]
                    t = stack.pop()
                    if isinstance(t, ast.Name):
                        names.append(t.id)
                    elif isinstance(t, (ast.Tuple, ast.List)):
                        stack += t.elts
                    elif isinstance(t, ast.Starred):
                        stack.append(t.value)
    return list(dict.fromkeys(names))
