"""GELU of every 16-bit input, correctly rounded: the table of the 16-bit `gelu` kernels.

``gelu_table(dtype)[bits]`` is the bit pattern of ``GELU(x)`` rounded to nearest-even in
``dtype`` ("fp16" or "bf16"), where x is the value with those bits. GELU is evaluated in float64
as ``x * erfc(-x / sqrt(2)) / 2`` (erfc keeps its relative accuracy in the negative tail, where
``1 + erf`` cancels), then rounded once. So the table is at least as accurate as PyTorch's
float32 ``0.5 x (1 + erff(x / sqrt 2))``, rounded to the dtype: it differs from PyTorch's output
by one ulp on a few inputs, and below x ~ -3.6, where PyTorch's ``1 + erff`` cancels (a few ulps
off, then 0 below ~ -5.5), it keeps the tiny true value (differences under 1e-3 absolute).
Special inputs follow PyTorch: GELU(+inf) = +inf, GELU(-inf) = NaN (0 * inf), NaN stays NaN
(canonical).
"""

from __future__ import annotations

import functools
import math
import struct

#: stored mantissa bits and the smallest normal exponent of each 16-bit format
FORMATS = {"fp16": (10, -14), "bf16": (7, -126)}
_CANONICAL_NAN = {"fp16": 0x7E00, "bf16": 0x7FC0}
_SQRT1_2 = 0.70710678118654752440


def round_to_format(value: float, dtype: str) -> float:
    """The value of ``dtype`` nearest to ``value`` (ties to even), as a float (finite inputs:
    a 16-bit format's largest finite value is never exceeded by GELU's outputs)."""
    mantissa_bits, min_exp = FORMATS[dtype]
    if not math.isfinite(value) or value == 0.0:
        return value
    exponent = math.frexp(value)[1] - 1  # value = m * 2^exponent, 1 <= |m| < 2
    ulp = math.ldexp(1.0, max(exponent, min_exp) - mantissa_bits)
    # exact: ulp is a power of two; round() ties to even; copysign keeps the sign of a zero
    return math.copysign(round(value / ulp) * ulp, value)


def decode(dtype: str) -> tuple[float, ...]:
    """The value of every 16-bit pattern of ``dtype``, indexed by the pattern."""
    if dtype == "fp16":
        return struct.unpack("<65536e", struct.pack("<65536H", *range(65536)))
    return struct.unpack("<65536f", struct.pack("<65536I", *(b << 16 for b in range(65536))))


def encode(values, dtype: str) -> list[int]:
    """Bit patterns of values that ``dtype`` represents exactly (NaN: the canonical NaN)."""
    nan = _CANONICAL_NAN[dtype]
    if dtype == "fp16":
        bits = struct.unpack(f"<{len(values)}H", struct.pack(f"<{len(values)}e", *values))
    else:
        words = struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values))
        bits = [w >> 16 for w in words]
    return [nan if v != v else b for v, b in zip(values, bits, strict=True)]


@functools.cache
def gelu_table(dtype: str) -> tuple[int, ...]:
    """``gelu_table(dtype)[bits]``: GELU of the ``dtype`` value with those bits (module doc)."""
    if dtype not in FORMATS:
        raise ValueError(f"dtype must be one of {sorted(FORMATS)}, got {dtype!r}")
    erfc = math.erfc
    values = [round_to_format(x * 0.5 * erfc(-x * _SQRT1_2), dtype) for x in decode(dtype)]
    return tuple(encode(values, dtype))


def table_source(dtype: str) -> str:
    """The table as the body of a C array initializer, 16 entries a line."""
    table = gelu_table(dtype)
    return "\n".join(
        ", ".join(f"0x{v:04x}" for v in table[i : i + 16]) + "," for i in range(0, 65536, 16)
    )
