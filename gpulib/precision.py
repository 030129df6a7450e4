"""16.5: the number formats of mixed precision, emulated on the CPU to the size of their error.

    format  bits  exponent  mantissa  largest    smallest normal  used for
    fp32    32    8         23        3.4e38     1.2e-38          the default
    tf32    19    8         10        3.4e38     1.2e-38          tensor-core inputs when fp32 is asked for
    fp16    16    5         10        65504      6.1e-5           tensor cores; needs loss scaling
    bf16    16    8          7        3.4e38     1.2e-38          tensor cores; fp32's range, fewer digits

``round_to`` rounds float32 values to a format (round to nearest, ties to even) and returns
them as float32, so a NumPy float32 product of rounded operands has the error of what a tensor
core computes: rounded inputs, products exact, sums in fp32. It is not the same bits: a tensor
core adds its products in its own order and width and does not round each partial sum as an
IEEE fp32 addition does, and PTX's conversion to TF32 (``cvt.rna.tf32.f32``) rounds ties away from
zero, not to even, so the emulation reproduces the size of the error, not its digits. ``gemm_errors`` uses that to put each
format's error against a float64 reference side by side, on any machine; ``fp16_underflow``
shows why fp16 training multiplies the loss by a scale factor before backpropagation.
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import require_positive, require_real

FORMATS = ("fp32", "tf32", "fp16", "bf16")
MANTISSA_BITS = dict(fp32=23, tf32=10, fp16=10, bf16=7)


def _round_mantissa(x: np.ndarray, keep: int) -> np.ndarray:
    """Round float32 values to ``keep`` mantissa bits (8-bit exponent kept), ties to even."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    drop = 23 - keep
    half = np.uint32(1 << (drop - 1))
    lsb = (bits >> np.uint32(drop)) & np.uint32(1)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    rounded = (bits + half - np.uint32(1) + lsb) & ~np.uint32((1 << drop) - 1)
    return np.where(finite, rounded, bits).astype(np.uint32).view(np.float32)


def round_to(x, fmt: str) -> np.ndarray:
    """``x`` rounded to the format ``fmt`` and stored as float32."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, not {fmt!r}")
    x = require_real(x, "x").astype(np.float32)
    if fmt == "fp32":
        return x.copy()
    if fmt == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    return _round_mantissa(x, MANTISSA_BITS[fmt])


def bf16_bits(x) -> np.ndarray:
    """``x`` rounded to bf16 (ties to even), as the 16-bit words a GPU stores (NumPy has no bf16
    type: the upper half of each float32)."""
    return (round_to(x, "bf16").view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def from_bf16_bits(words) -> np.ndarray:
    """The float32 values of bf16 words (``bf16_bits``' inverse, exact)."""
    w = np.asarray(words) if not isinstance(words, str) else np.asarray([], np.float32)
    if w.dtype != np.uint16:
        raise ValueError(f"words must be uint16 bf16 words (as bf16_bits returns them), not {type(words).__name__} "
                         f"of {w.dtype}")
    return (np.asarray(words, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def unit_roundoff(fmt: str) -> float:
    """The largest relative error of rounding one value to ``fmt`` (normal range): 2^-(mantissa+1)."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, not {fmt!r}")
    return 2.0 ** -(MANTISSA_BITS[fmt] + 1)


def gemm_errors(A, B) -> dict:
    """For each format: max |C - C64| / max |C64| of the product with operands rounded to the
    format and fp32 accumulation (what tensor cores do), C64 the float64 product. An all-zero
    product is a ValueError: a relative error of it means nothing."""
    A, B = require_real(A, "A", "[M, K]").astype(np.float32), require_real(B, "B", "[K, N]").astype(np.float32)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"inner dimensions do not match: A is {A.shape} and B is {B.shape}")
    exact = A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(exact).max()
    if not np.isfinite(scale) or scale == 0:
        raise ValueError(f"A·B is {'all zero' if scale == 0 else 'not finite'}: its relative error is not defined "
                         "(A and B need finite, not all-zero values)")
    return {fmt: float(np.abs(round_to(A, fmt) @ round_to(B, fmt) - exact).max() / scale) for fmt in FORMATS}


def fp16_underflow(values, scale: float = 1.0) -> float:
    """The fraction of non-zero ``values`` that become 0 in fp16 after multiplying by ``scale``."""
    v = require_real(values, "values").astype(np.float32)
    require_positive(scale, "scale")
    nonzero = v != 0
    with np.errstate(over="ignore"):
        lost = (v * np.float32(scale)).astype(np.float16) == 0
    return float((lost & nonzero).sum() / max(1, nonzero.sum()))
