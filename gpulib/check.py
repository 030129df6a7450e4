"""Checking a kernel's output against its float64 NumPy reference.

The workflow every test and notebook follows::

    out = poisoned((n, k))            # every element holds a marked NaN
    some_kernel_wrapper(..., out=out) # the kernel should overwrite all of them
    validate(out, reference(...))     # unwritten, NaN or wrong elements all fail, loudly

Poisoning matters: device memory that a kernel forgot to write may still hold the right
answer from an earlier run, and a check on such memory passes by luck.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpulib.arrays import require_bool, require_positive, to_host

# A NaN with a payload that arithmetic does not produce (computed NaNs are canonical), so an
# element that still carries it was never written.
_POISON_BITS = {
    np.dtype(np.float16): (np.uint16, 0x7E5D),
    np.dtype(np.float32): (np.uint32, 0x7FC0DEAD),
    np.dtype(np.float64): (np.uint64, 0x7FF8DEADDEADDEAD),
}

# Default relative tolerances: the error allowed, relative to the largest reference value.
DEFAULT_RTOL = {
    np.dtype(np.float16): 1e-2,
    np.dtype(np.float32): 1e-5,
    np.dtype(np.float64): 1e-12,
}


class ValidationError(AssertionError):
    """A kernel's output disagrees with its reference (or was never written)."""


def poison_value(dtype) -> np.ndarray:
    """The marked NaN (as a 0-d array) used to fill outputs of this dtype before a launch."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a NumPy dtype, not {dtype!r}") from None
    if dtype in _POISON_BITS:
        utype, bits = _POISON_BITS[dtype]
        return np.array(bits, dtype=utype).view(dtype)
    if dtype.kind in "iu":
        return np.array(np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max, dtype)
    raise ValueError(f"dtype: cannot poison {dtype} (floating-point and integer dtypes only)")


def unwritten_mask(arr: np.ndarray) -> np.ndarray:
    """True where ``arr`` still holds the poison value bit for bit."""
    if not hasattr(arr, "dtype") or np.dtype(arr.dtype).kind not in "fiu":
        raise ValueError(f"arr must be an array of floats or integers, not {type(arr).__name__}")
    arr = np.asarray(arr)
    marker = poison_value(arr.dtype)
    if arr.dtype in _POISON_BITS:
        utype, _ = _POISON_BITS[arr.dtype]
        return arr.view(utype) == marker.view(utype)
    return arr == marker


def poisoned(shape, dtype=np.float32, device: bool = True):
    """A new output array filled with the poison value; on the device unless ``device=False``."""
    require_bool(device, "device")
    sizes = (shape,) if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool) else shape
    if not isinstance(sizes, (tuple, list)) or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0
                                                   for d in sizes):
        raise ValueError(f"shape must be a tuple of non-negative integers, not {shape!r}")
    host = np.full(shape, poison_value(dtype), dtype=dtype)
    if not device:
        return host
    from numba import cuda

    return cuda.to_device(host)


@dataclass
class Validation:
    """What ``validate`` found: the worst error relative to the reference's largest value."""

    name: str
    max_abs_err: float
    rel_err: float
    rtol: float
    worst_index: tuple

    def __str__(self) -> str:
        return (
            f"{self.name}: OK, relative error {self.rel_err:.1e} "
            f"(tolerance {self.rtol:.0e})"
        )


def _first(mask: np.ndarray) -> tuple:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def validate(out, ref, rtol: float | None = None, name: str = "output",
             scale: float | None = None) -> Validation:
    """Compare a kernel's output with its float64 reference; raise ValidationError if it is off.

    Every element must have been written (no poison left). Where the reference is NaN the
    output must be NaN, where it is +inf or -inf the output must be the same infinity, and
    where it is finite the output must be finite: non-finite values are compared by position,
    exactly. The finite elements are compared by max|out - ref| / scale, with scale =
    max|ref| over the finite reference by default: relative to the reference's size, so
    elements near zero do not fail on rounding. When a result is small because large terms
    cancel (a sum of ±1s that comes to 1e-4), rounding error follows the terms, not the
    result: pass their size as ``scale`` (e.g. max of |X|·|W|ᵀ). A scale of 0 says every
    summed term is zero, so the output must be exactly the reference. A negative, NaN or
    infinite ``scale``, and an ``rtol`` that is not a positive number, are ValueErrors.
    """
    if scale is not None:
        require_positive(scale, "scale", zero_ok=True, note=" (the size of the summed terms)")
    if rtol is not None:
        require_positive(rtol, "rtol")
    for what, a in (("out", out), ("ref", ref)):
        if not hasattr(a, "shape"):
            raise ValueError(f"{what} must be a NumPy or device array, not {type(a).__name__}")
    got = to_host(out)
    want = np.asarray(ref, dtype=np.float64)
    if got.shape != want.shape:
        raise ValidationError(f"{name}: shape {got.shape}, reference has {want.shape}")
    if rtol is None:
        rtol = DEFAULT_RTOL.get(got.dtype, 1e-5)

    if got.dtype.kind in "fiu" and got.size:
        unwritten = unwritten_mask(got)
        if unwritten.any():
            raise ValidationError(
                f"{name}: {int(unwritten.sum())} of {got.size} elements were never written "
                f"(still poisoned), the first at index {_first(unwritten)}"
            )
    got64 = got.astype(np.float64)
    finite = np.isfinite(want)
    same_special = (np.isnan(got64) & np.isnan(want)) | (~finite & (got64 == want))
    bad = (~np.isfinite(got64) | ~finite) & ~same_special
    if bad.any():
        idx = _first(bad)
        if finite[idx]:
            what = "NaN or infinite where the reference is finite"
        elif np.isnan(want[idx]):
            what = "a number where the reference is NaN"
        else:
            what = f"not {want[idx]} where the reference is {want[idx]}"
        raise ValidationError(
            f"{name}: {int(bad.sum())} elements are {what} (non-finite values must match by position), "
            f"the first at index {idx}: got {got64[idx]!r}, reference {want[idx]!r}"
        )
    if not finite.any():  # nothing finite to compare, and every NaN and inf matched
        return Validation(name, 0.0, 0.0, rtol, ())
    diff = np.where(finite, np.abs(got64 - np.where(finite, want, 0.0)), 0.0)
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    if scale is None:
        scale = float(np.max(np.abs(want[finite]), initial=0.0)) or 1.0
    max_abs = float(diff[worst])
    rel = max_abs / float(scale) if scale else (0.0 if max_abs == 0 else np.inf)
    if not rel <= rtol:
        raise ValidationError(
            f"{name}: relative error {rel:.2e} exceeds tolerance {rtol:.0e}; worst at index "
            f"{worst}: got {got64[worst]!r}, reference {want[worst]!r}"
        )
    return Validation(name, max_abs, rel, rtol, worst)
