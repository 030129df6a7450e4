"""How a stored result reads: the ratio to the library and a row's short name, for tables and plots alike."""

from __future__ import annotations


def ratio_text(vs_library: float | None) -> str:
    """How tables print the ratio: the percentage of the library's speed."""
    return "-" if vs_library is None else f"{vs_library:.1%}"


_SHORT = (("gpulib ", ""), (" (torch, benchmark=True, TF32 off)", ""), (" (torch, channels_last, benchmark=True)", " (torch)"),
          (" (CuPy, TF32 off)", ""), (" (CuPy)", ""), ("/thread", ""), ("tensor-core ", "TC "))


def short_name(name: str) -> str:
    """A row's name as a plot labels it: without "gpulib " and the library's settings."""
    for long, short in _SHORT:
        name = name.replace(long, short)
    return name
