"""Input checks and device transfers shared by every kernel wrapper.

Wrappers call ``require`` on each argument before anything is launched, so a wrong shape,
dtype or layout is a ValueError that names the argument, never a wrong answer or a crash
inside a kernel.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
from numba import cuda


def is_device_array(a) -> bool:
    """True for Numba device arrays (and the simulator's) and CuPy arrays."""
    return hasattr(a, "copy_to_host") or hasattr(a, "__cuda_array_interface__")


def _c_contiguous(a) -> bool:
    if hasattr(a, "is_c_contiguous"):
        return a.is_c_contiguous()
    if hasattr(a, "flags"):
        return bool(a.flags["C_CONTIGUOUS"])
    return True


def require(a, name: str, ndim: int | None, dtype=np.float32, layout: str = "", contiguous: bool = True) -> None:
    """Raise ValueError unless ``a`` is a C-contiguous ``ndim``-D array of ``dtype`` (any number
    of dimensions for ``ndim=None``; any strides with ``contiguous=False``).

    ``layout`` (e.g. "[N, n_in]") is quoted in the message so the reader sees what was meant.
    """
    what = f"{name} {layout}".strip()
    if not (hasattr(a, "shape") and hasattr(a, "dtype")):
        raise ValueError(f"{what} must be a NumPy or device array, not {type(a).__name__}")
    if ndim is not None and len(a.shape) != ndim:
        raise ValueError(f"{what} must be {ndim}-D, but has shape {tuple(a.shape)}")
    if dtype is not None and np.dtype(a.dtype) != np.dtype(dtype):
        if np.dtype(a.dtype).newbyteorder("=") == np.dtype(dtype):
            raise ValueError(f"{what} must be {np.dtype(dtype).name} in the machine's byte order, not "
                             f"byte-swapped ({np.dtype(a.dtype).str}); convert with {name}.astype(np.{np.dtype(dtype).name})")
        raise ValueError(
            f"{what} must have dtype {np.dtype(dtype).name}, not {np.dtype(a.dtype).name}"
            + (" (convert with .astype(np.float32))" if np.dtype(dtype) == np.float32 else "")
        )
    if contiguous and not _c_contiguous(a):
        raise ValueError(
            f"{what} must be C-contiguous (row-major); pass np.ascontiguousarray({name})"
        )
    if any(d == 0 for d in a.shape):
        raise ValueError(f"{what} is empty (shape {tuple(a.shape)})")


def require_real(a, name: str, layout: str | None = None) -> np.ndarray:
    """``a`` as float64 (any real numbers, NumPy arrays or lists: the NumPy references and models take
    them): ValueError naming ``name`` for None, text, complex numbers, an empty array, or another
    number of dimensions than ``layout`` ("[N, C, H, W]") names."""
    try:
        x = np.asarray(a)
    except Exception as err:  # ragged lists
        raise ValueError(f"{name} must be an array of real numbers: {err}") from None
    if x.dtype.kind not in "biuf" or x.dtype.kind == "b":
        raise ValueError(f"{name} must hold real numbers, not {type(a).__name__} of {x.dtype}")
    if layout is not None and x.ndim != len(layout.strip("[]").split(", ")):
        raise ValueError(f"{name} must be {layout}, a {len(layout.strip('[]').split(', '))}-D array, not shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} is empty (shape {x.shape})")
    return x.astype(np.float64)


def require_int(value, name: str, minimum: int = 1) -> int:
    """An integer argument (a size, stride, padding...) of at least ``minimum``; returned as int.
    2.0 is refused like "2": a kernel given a float index computes with floats."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer of at least {minimum}, not {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer of at least {minimum}, not {value}")
    return int(value)


def integer_arguments(**least):
    """Decorator: the named arguments of the function must be integers of at least the given value
    (``require_int``'s ValueError before the body runs); e.g. ``@integer_arguments(rows=1, cols=1)``."""
    def decorate(fn):
        parameters = inspect.signature(fn).parameters
        where = {name: list(parameters).index(name) for name in least}  # positions, found once
        optional = {name for name in least if parameters[name].default is None}  # None is their default

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            args = list(args)
            for name, minimum in least.items():
                if where[name] < len(args):
                    if not (args[where[name]] is None and name in optional):
                        args[where[name]] = require_int(args[where[name]], name, minimum)
                elif name in kwargs and not (kwargs[name] is None and name in optional):
                    kwargs[name] = require_int(kwargs[name], name, minimum)
            return fn(*args, **kwargs)  # (a default left out is valid; a missing argument is Python's TypeError)
        return checked
    return decorate


def require_positive(value, name: str, *, zero_ok: bool = False, note: str = "") -> float:
    """A real number, finite and above 0 (at least 0 with ``zero_ok``): not a bool, not text, not
    NaN; returned as float. ``note`` ("(the size of the summed terms)") follows the rule in the message."""
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating))
            or not np.isfinite(value) or value < 0 or (value == 0 and not zero_ok)):
        rule = "a finite number of at least 0" if zero_ok else "a positive finite number"
        raise ValueError(f"{name} must be {rule}{note}, not {value!r}")
    return float(value)


def require_bool(value, name: str) -> bool:
    """A switch: True or False (NumPy's too), not 1, "yes" or None; returned as bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, not {type(value).__name__} {value!r}")
    return bool(value)


def require_finite(a, name: str, why: str) -> None:
    """ValueError if ``a`` holds NaN or an infinity (checked on the device with CuPy where it
    can be, else on a host copy); ``why`` says why this operation cannot take them."""
    try:
        import cupy

        finite = bool(cupy.isfinite(cupy.asarray(a)).all()) if is_device_array(a) and hasattr(a, "gpu_data") else None
    except ImportError:
        finite = None
    if finite is None:
        finite = bool(np.isfinite(to_host(a)).all())
    if not finite:
        raise ValueError(f"{name} holds NaN or infinite values, which {why}")


def require_int_labels(labels, name: str, n: int, num_classes: int, dtype=np.int32) -> None:
    """Labels: a 1-D array of n class numbers in [0, num_classes), of ``dtype`` (None: any
    integer type). The values are checked on the device too (a copy of n integers comes back):
    a label out of range would make a kernel read outside its row."""
    require(labels, name, 1, dtype, "[N]")
    if dtype is None and np.dtype(labels.dtype).kind not in "iu":
        raise ValueError(f"{name} [N] must hold integers (class numbers), not {np.dtype(labels.dtype).name}")
    if labels.shape[0] != n:
        raise ValueError(f"{name} has {labels.shape[0]} entries but there are {n} samples")
    values = to_host(labels)
    lo, hi = int(values.min()), int(values.max())
    if lo < 0 or hi >= num_classes:
        raise ValueError(f"{name} must lie in [0, {num_classes}), found values {lo}..{hi}")


def require_learning_rate(lr, name: str = "lr") -> float:
    """A learning rate: a positive finite real number (not a string, not NaN); returned as float."""
    if isinstance(lr, (bool, np.bool_)) or not isinstance(lr, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} (the learning rate) must be a positive number, not {type(lr).__name__} {lr!r}")
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"{name} (the learning rate) must be a positive finite number, not {lr}")
    return float(lr)


def to_device(a):
    """``a`` on the device: device arrays pass through, NumPy arrays are copied over."""
    return a if is_device_array(a) else cuda.to_device(a)


def to_host(a) -> np.ndarray:
    """``a`` as a NumPy array: Numba device arrays and CuPy arrays are copied back."""
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    if hasattr(a, "get"):  # CuPy
        return a.get()
    return np.asarray(a)


def output(out, shape, name: str = "out", dtype=np.float32):
    """The output array: ``out`` checked against ``shape``, or a fresh device array."""
    if out is None:
        return cuda.device_array(shape, dtype=dtype)
    require(out, name, len(shape), dtype)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, not {tuple(out.shape)}")
    if not is_device_array(out):
        raise ValueError(f"{name} must be a device array (see gpulib.poisoned)")
    return out


def outputs(out, names: tuple[str, ...]) -> tuple:
    """The output arrays of a function with several results: ``out`` is None or a tuple with
    one entry (an array or None) per result, in the order of ``names``."""
    if out is None:
        return (None,) * len(names)
    if not isinstance(out, (tuple, list)) or len(out) != len(names):
        raise ValueError(f"out must be a tuple of {len(names)} arrays or Nones ({', '.join(names)}), "
                         f"not {type(out).__name__}" + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""))
    return tuple(out)


MAX_GRID_Z = 65535  # CUDA's limit on gridDim.y and gridDim.z (gridDim.x may reach 2³¹ - 1)


def blocks(n: int, threads: int) -> int:
    """Number of blocks of ``threads`` threads that cover ``n`` items (rounded up)."""
    return (n + threads - 1) // threads


def block_edge(n: int, most: int = 16) -> int:
    """The smallest power of two ≥ n, at most ``most``: small images launch no idle threads."""
    edge = 1
    while edge < min(n, most):
        edge *= 2
    return edge


def transposed(a):
    """The transpose of a 2-D array as a view (nothing is copied), on the device or the host.

    Numba's own ``DeviceNDArray.T`` launches a transpose kernel and returns a copy; GEMM
    operands such as X_colᵀ in the backward pass are too big for that, and every gpulib
    kernel (and cuBLAS through CuPy) reads strided arrays anyway.
    """
    if not is_device_array(a):
        return np.asarray(a).T
    if hasattr(a, "gpu_data"):  # a Numba device array on a GPU
        from gpulib.launch import strided_view

        return strided_view(a, a.shape[::-1], a.strides[::-1])
    if hasattr(a, "_ary"):  # the simulator's device array wraps a NumPy array
        from gpulib.simulator import device_view

        return device_view(a, lambda x: x.T)
    return a.T  # CuPy


def batch_of_one(a):
    """A 2-D device (or NumPy) array as a 3-D view [1, rows, columns] of the same memory, strides
    kept (a transposed view stays one): for kernels that take a batch of matrices."""
    if hasattr(a, "gpu_data"):  # a Numba device array on a GPU
        from gpulib.launch import strided_view

        return strided_view(a, (1, *a.shape), (a.strides[0] * a.shape[0], *a.strides))
    if hasattr(a, "_ary"):  # the simulator's device array wraps a NumPy array
        from gpulib.simulator import device_view

        return device_view(a, lambda x: x[np.newaxis])
    return a[np.newaxis]
