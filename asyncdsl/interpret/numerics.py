"""The arithmetic of register-tile elements, bit for bit (docs/register-tiles.md), as numpy functions.

Every function takes and returns numpy arrays (0-d ones too) of the tile dtypes: float32,
bfloat16, float16, float8_e4m3fn, float8_e5m2 (ml_dtypes), int/uint 8-32, bool.  What the GPU
does, and how it is computed here:

- A float op is the exact result rounded once to nearest even in the operands' dtype.  The exact
  result is held in float64 as an error-free pair (a product of two elements of at most 24 bits is
  exact in float64's 53; a sum is `two_sum`), squeezed to one float64 by rounding to odd, then
  rounded to the dtype; rounding to odd first makes the second rounding equal a direct one as
  long as the intermediate has two bits more than the target (53 and 24 >= 24 + 2, 11 + 2, 8 + 2).
  Python's `math.fma` (3.13) is not needed, nor available on the 3.11 floor.
- A NaN that arithmetic or a narrowing conversion produces is `canonical_nan(dtype)`.
- Integers wrap, and read signed or unsigned by their dtype (int8-32 signed, uint8-32 unsigned);
  a bool (i1) reads as 0 or 1.
- The float conversions saturate where the hardware does: float8 to its largest finite value
  (`.satfinite`), integers to their range with NaN to 0 (`cvt.rzi`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from numpy.typing import DTypeLike

from asyncdsl.dialects.tile_functions import TILE_FUNCTIONS

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
_E5M2 = np.dtype(ml_dtypes.float8_e5m2)


@dataclass(frozen=True)
class FloatFormat:
    """The bit fields of a float dtype."""

    bits: int
    mantissa: int  # explicit mantissa bits
    nan: int  # the canonical NaN's bit pattern

    @property
    def unsigned(self) -> np.dtype:
        return np.dtype(f"uint{self.bits}")

    @property
    def sign(self) -> int:
        return 1 << (self.bits - 1)


# The canonical NaNs: what PTX documents for f32 and the 16-bit types; for float8, the NaN with
# every exponent and mantissa bit set (e4m3fn has no other).  To be confirmed on the H200.
FORMATS: dict[np.dtype, FloatFormat] = {
    np.dtype(np.float32): FloatFormat(32, 23, 0x7FFFFFFF),
    np.dtype(np.float16): FloatFormat(16, 10, 0x7FFF),
    _BFLOAT16: FloatFormat(16, 7, 0x7FFF),
    _E4M3: FloatFormat(8, 3, 0x7F),
    _E5M2: FloatFormat(8, 2, 0x7F),
}
SATURATING = {_E4M3: 448.0, _E5M2: 57344.0}  # float8 conversions clamp to these (`.satfinite`)


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype) in FORMATS


def canonical_nan(dtype: np.dtype) -> np.ndarray:
    """The NaN the GPU's arithmetic produces in `dtype` (a 0-d array)."""
    form = FORMATS[np.dtype(dtype)]
    return np.array(form.nan, form.unsigned).view(dtype)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(FORMATS[x.dtype].unsigned)


def _canonical(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), canonical_nan(x.dtype), x)


def _wide(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # ml_dtypes warns on NaNs it converts exactly
        return np.asarray(x).astype(np.float64)


# -- rounding ----------------------------------------------------------------------------------


def _odd(rounded: np.ndarray, inexact: np.ndarray, toward_positive: np.ndarray) -> np.ndarray:
    """`rounded` (a nearest rounding) turned into the rounding to odd: an inexact result whose
    last bit is even moves one step toward the exact value (the neighbour with an odd last bit)."""
    even = (rounded.view(f"uint{rounded.dtype.itemsize * 8}") & 1) == 0
    toward = np.where(toward_positive, np.inf, -np.inf).astype(rounded.dtype)
    return np.where(inexact & even & np.isfinite(rounded), np.nextafter(rounded, toward), rounded)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = a + b rounded, and e with s + e == a + b exactly (Knuth; float64, no overflow here)."""
    s = a + b
    virtual_b = s - a
    e = (a - (s - virtual_b)) + (b - virtual_b)
    return s, e


def _sum_to_odd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b (float64) rounded to odd."""
    s, e = _two_sum(a, b)
    return _odd(s, e != 0, e > 0)


def round_float(exact: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """`exact` (float64: the exact value, or its rounding to odd) rounded to nearest even into
    the float `dtype`: overflow to ±inf (float8: saturated), NaN canonical."""
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == np.float32:
            return _canonical(np.asarray(exact.astype(np.float32)))
        if dtype in SATURATING:
            exact = np.clip(exact, -SATURATING[dtype], SATURATING[dtype])
        single = exact.astype(np.float32)
        # float32 keeps 24 bits, enough to round to odd in before rounding to a 16- or 8-bit type.
        single = _odd(single, single.astype(np.float64) != exact, exact > single)
        return _canonical(np.asarray(single.astype(dtype)))


# -- float arithmetic -------------------------------------------------------------------------


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not is_float(a.dtype):
        return _wrapping(np.add, a, b)
    with np.errstate(invalid="ignore"):
        return round_float(_sum_to_odd(_wide(a), _wide(b)), a.dtype)


def subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not is_float(a.dtype):
        return _wrapping(np.subtract, a, b)
    with np.errstate(invalid="ignore"):
        return round_float(_sum_to_odd(_wide(a), -_wide(b)), a.dtype)


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not is_float(a.dtype):
        return _wrapping(np.multiply, a, b)
    with np.errstate(invalid="ignore"):
        return round_float(_wide(a) * _wide(b), a.dtype)  # exact: at most 48 significant bits


def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`div.rn.f32`; 16-bit floats divide their float32 widenings and round once more, which is
    their exact quotient rounded once (24 >= 2 * 11 + 2)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        quotient = np.asarray(a.astype(np.float32) / b.astype(np.float32))
        return round_float(quotient.astype(np.float64), a.dtype)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once: the product is exact in float64, the sum an error-free pair."""
    with np.errstate(invalid="ignore"):
        return round_float(_sum_to_odd(_wide(a) * _wide(b), _wide(c)), a.dtype)


def sqrt(x: np.ndarray) -> np.ndarray:
    """`sqrt.rn.f32` (16-bit floats through float32): the float64 root is correctly rounded, and
    rounding it again to 24 bits or fewer is too (53 >= 2 * 24 + 2); sqrt(-0) is -0, a negative
    number's root the canonical NaN."""
    with np.errstate(invalid="ignore"):
        return round_float(np.sqrt(_wide(x)), x.dtype)


def _extremum(a: np.ndarray, b: np.ndarray, larger: bool) -> np.ndarray:
    if not is_float(a.dtype):
        return np.asarray(np.maximum(a, b) if larger else np.minimum(a, b))
    wa, wb = _wide(a), _wide(b)
    picked = np.where(wa > wb if larger else wa < wb, a, b)
    # Equal values have equal bits except ±0, where max takes +0 (sign bits and-ed) and min -0.
    merged = _bits(a) & _bits(b) if larger else _bits(a) | _bits(b)
    result = np.where(wa == wb, merged.view(a.dtype), picked)
    return np.where(np.isnan(wa) | np.isnan(wb), canonical_nan(a.dtype), result)


def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`max.NaN` for floats (NaN if either is, -0 < +0); `max.s32`/`max.u32` for integers."""
    return _extremum(a, b, True)


def minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`min.NaN` for floats (NaN if either is, -0 < +0); `min.s32`/`min.u32` for integers."""
    return _extremum(a, b, False)


def negate(x: np.ndarray) -> np.ndarray:
    """A float with its sign bit flipped (NaNs too: `neg` is a bit operation)."""
    form = FORMATS[x.dtype]
    return np.asarray(_bits(x) ^ form.unsigned.type(form.sign)).view(x.dtype)


def absolute(x: np.ndarray) -> np.ndarray:
    """A float with its sign bit cleared; an integer's `abs.s32` (read signed, wrapping)."""
    if not is_float(x.dtype):
        signed = x.view(f"int{x.dtype.itemsize * 8}").astype(np.int64)
        return _from_integers(np.where(signed < 0, -signed, signed), x.dtype)
    form = FORMATS[x.dtype]
    return np.asarray(_bits(x) & form.unsigned.type(form.sign - 1)).view(x.dtype)


_RELATIONS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
              "eq": np.equal, "ne": np.not_equal}


def compare(comparison: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A bool array: `a <comparison> b`, for `hw.options.Comparison`'s lt, le, gt, ge, eq, ne.
    Floats compare ordered, false when either is NaN, except `ne`, true then (numpy's operators
    do exactly this)."""
    relation = _RELATIONS[comparison]
    if is_float(a.dtype):
        with np.errstate(invalid="ignore"):
            return np.asarray(relation(_wide(a), _wide(b)))
    return np.asarray(relation(_as_integers(a), _as_integers(b)))


# -- integers ----------------------------------------------------------------------------------


def _as_integers(x: np.ndarray) -> np.ndarray:
    """The values of an integer (or bool: 0 and 1) array as int64."""
    return np.asarray(x).astype(np.int64)


def _from_integers(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """int64 `values` wrapped to the width of the integer `dtype` (bool: the low bit)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray((values & 1) == 1)
    return np.asarray(values.astype(f"uint{dtype.itemsize * 8}")).view(dtype)


def _wrapping(ufunc, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _from_integers(ufunc(_as_integers(a), _as_integers(b)), a.dtype)


def floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Python's floor division of integers, wrapped (int32's -2**31 // -1 is -2**31); the
    caller refuses zero divisors, whose quotient PTX leaves unspecified."""
    return _wrapping(np.floor_divide, a, b)


# PTX's `shl`/`shr` read the shift amount as unsigned and clamp it at the register's width.
def shift_left(a: np.ndarray, amount: np.ndarray) -> np.ndarray:
    amount = _as_integers(amount) & 0xFFFFFFFF
    width = 8 * np.dtype(a.dtype).itemsize
    shifted = np.where(amount < width, _as_integers(a) << np.minimum(amount, width - 1), 0)
    return _from_integers(shifted, a.dtype)


def shift_right(a: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Arithmetic for signed dtypes (the sign's copies come in), logical for unsigned."""
    amount = _as_integers(amount) & 0xFFFFFFFF
    width = 8 * np.dtype(a.dtype).itemsize
    values = _as_integers(a)
    shifted = np.where(amount < width, values >> np.minimum(amount, width - 1), np.where(values < 0, -1, 0))
    return _from_integers(shifted, a.dtype)


# -- conversions -------------------------------------------------------------------------------


def float_to_float(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round to nearest even (exact when widening).  NaNs become the canonical NaN, except a
    bfloat16 NaN widened to float32, which keeps its sign and payload (the mantissa bits,
    shifted to the top): on the H200 `cvt.f32.bf16` is a shift and `cvt.f32.f16` and the
    float8 conversions canonicalise (measured: docs/register-tiles.md, NaNs)."""
    dtype = np.dtype(dtype)
    result = round_float(_wide(x), dtype)
    if dtype.itemsize <= x.dtype.itemsize or x.dtype != np.dtype(ml_dtypes.bfloat16):
        return result
    source, target = FORMATS[x.dtype], FORMATS[dtype]
    bits = _bits(x).astype(target.unsigned)
    sign = (bits >> (source.bits - 1)) << (target.bits - 1)
    exponent = (target.sign - 1) & ~((1 << target.mantissa) - 1)
    payload = (bits & ((1 << source.mantissa) - 1)) << (target.mantissa - source.mantissa)
    widened = np.asarray(sign | exponent | payload).astype(target.unsigned).view(dtype)
    return np.where(np.isnan(x), widened, result)


def float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Truncate toward zero, saturate to the range of the integer `dtype`, NaN to 0."""
    low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    with np.errstate(invalid="ignore"):
        values = np.clip(np.trunc(_wide(x)), low, high)
        values = np.where(np.isnan(values), 0, values).astype(np.int64)
    return _from_integers(values, dtype)


def int_to_float(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The integer rounded to nearest even."""
    return round_float(_as_integers(x).astype(np.float64), dtype)  # exact: at most 32 bits


def int_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The integer wrapped to `dtype`: sign- or zero-extended by the source's signedness, or
    truncated to the low bits (a bool is 0 or 1; to bool, the low bit)."""
    return _from_integers(_as_integers(x), dtype)


# -- approximate functions ---------------------------------------------------------------------

# The float64 function each approximate instruction is held to: the tile functions' own
# (`dialects/tile_functions.py`) and `sqrt.approx`.
APPROXIMATED: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sqrt": np.sqrt, **{function.name: function.reference for function in TILE_FUNCTIONS}}
_SMALLEST_NORMAL = float(np.finfo(np.float32).tiny)


def _flushed(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _SMALLEST_NORMAL, np.copysign(0.0, x), x).astype(x.dtype)


def approximate(name: str, x: np.ndarray, ftz: bool) -> np.ndarray:
    """The float64 function `name` of float32 `x`, rounded to float32; `ftz` flushes subnormal
    inputs and results to zero of the same sign (the `.ftz` forms).  The GPU's `.approx`
    instructions are within a measured bound of this, not equal to it."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        wide = _wide(_flushed(x) if ftz else x)
        result = round_float(np.asarray(APPROXIMATED[name](wide)), np.float32)
        return _flushed(result) if ftz else result
