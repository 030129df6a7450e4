"""``show``: print the real source of a gpulib kernel or function, so no notebook keeps a copy."""

from __future__ import annotations

import inspect
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def source_of(obj) -> tuple[str, str]:
    """(location, source) of a function, a Numba kernel (its Python function) or a class."""
    target = getattr(obj, "py_func", obj)  # @cuda.jit dispatchers keep the Python function
    target = inspect.unwrap(target)  # kernel factories are wrapped in functools.lru_cache
    if not (inspect.isfunction(target) or inspect.isclass(target) or inspect.ismethod(target)):
        raise ValueError(f"obj must be a function, a kernel or a class of Python source, not {type(obj).__name__}")
    try:
        path = Path(inspect.getsourcefile(target)).resolve()
        lines, first = inspect.getsourcelines(target)
    except (OSError, TypeError) as err:  # made by exec or eval, or built into Python
        raise ValueError(f"obj {getattr(obj, '__name__', obj)!r} has no source file to show ({err})") from None
    try:
        where = path.relative_to(_ROOT)
    except ValueError:
        where = path
    return f"{where.as_posix()}:{first}", "".join(lines)


def show(obj) -> None:
    """Print where ``obj`` is defined and its source, highlighted when running in Jupyter."""
    where, src = source_of(obj)
    header = f"# {where}\n"
    try:
        from IPython import get_ipython
        from IPython.display import Code, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Code(header + src, language="python"))
    else:
        print(header + src, end="")
