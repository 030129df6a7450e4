"""How a stored result reads: the ratio to the library and a row's short name, for tables and plots alike."""

from __future__ import annotations

from gpulib.arrays import require_positive


def ratio_text(vs_library: float | None) -> str:
    """How tables print the ratio: the percentage of the library's speed."""
    if vs_library is not None:
        require_positive(vs_library, "vs_library", note=" (a ratio to the library), or None")
    return "-" if vs_library is None else f"{vs_library:.1%}"


_SHORT = (("gpulib ", ""), (" (torch, benchmark=True, TF32 off)", ""), (" (torch, channels_last, benchmark=True)", " (torch)"),
          (" (CuPy, TF32 off)", ""), (" (CuPy)", ""), ("/thread", ""), ("tensor-core ", "TC "))


def short_name(name: str) -> str:
    """A row's name as a plot labels it: without "gpulib " and the library's settings."""
    if not isinstance(name, str):
        raise ValueError(f"name must be a row's name (str), not {type(name).__name__}")
    for long, short in _SHORT:
        name = name.replace(long, short)
    return name


def is_part_of_call(name: str) -> bool:
    """Whether a timed row is one part of a convolution (16.4's "im2col alone", "GEMM alone: ..."),
    whose time as a share of a library's whole convolution would compare unlike work."""
    if not isinstance(name, str):
        raise ValueError(f"name must be a row's name (a str), not {type(name).__name__} {name!r:.40}")
    return name.endswith(" alone") or " alone:" in name
