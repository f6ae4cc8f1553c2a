"""Independent references for register-tile element arithmetic (docs/register-tiles.md): each
element in plain Python, exact values as Fractions rounded by the textbook rule (nearest, ties to
the even significand).  Nothing here calls asyncdsl, so the tests compare two derivations."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
BF16, E4M3, E5M2 = (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn),
                    np.dtype(ml_dtypes.float8_e5m2))
FLOATS = (F32, BF16, F16)

# dtype: (explicit mantissa bits, smallest normal exponent, largest finite, saturates instead of inf)
FORMATS = {
    F32: (23, -126, (2 - Fraction(1, 2**23)) * 2**127, False),
    F16: (10, -14, Fraction(65504), False),
    BF16: (7, -126, (2 - Fraction(1, 2**7)) * 2**127, False),
    E4M3: (3, -6, Fraction(448), True),
    E5M2: (2, -14, Fraction(57344), True),
}
CANONICAL_NAN = {F32: 0x7FFFFFFF, F16: 0x7FFF, BF16: 0x7FFF, E4M3: 0x7F, E5M2: 0x7F}


def unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")


def bits(array: np.ndarray) -> np.ndarray:
    return np.asarray(array).view(unsigned(array.dtype))


def round_fraction(q: Fraction, dtype: np.dtype, negative_zero: bool = False) -> float:
    """`q` rounded to nearest even in `dtype` (overflow: inf, or the largest finite value for
    the saturating float8 conversions), as a Python float holding that exact value."""
    if q == 0:
        return -0.0 if negative_zero else 0.0
    mantissa, lowest, largest, saturates = FORMATS[np.dtype(dtype)]
    sign, size = (-1.0 if q < 0 else 1.0), abs(q)
    exponent = size.numerator.bit_length() - size.denominator.bit_length()
    while Fraction(2) ** exponent > size:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= size:
        exponent += 1
    step = Fraction(2) ** (max(exponent, lowest) - mantissa)
    whole, rest = divmod(size / step, 1)
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1):
        whole += 1
    value = whole * step
    if value > largest:
        return sign * (float(largest) if saturates else math.inf)
    return sign * float(value)


def to_array(values: list[float], dtype: np.dtype) -> np.ndarray:
    """Python floats (exactly representable, or NaN meaning the canonical NaN) as `dtype`."""
    out = np.array([0.0 if math.isnan(v) else v for v in values], np.float64).astype(dtype)
    out_bits = bits(out)
    out_bits[[math.isnan(v) for v in values]] = CANONICAL_NAN[np.dtype(dtype)]
    return out


def _rounded(exact: Fraction, float64_result: float, dtype) -> float:
    # An exactly zero result takes IEEE's sign, which float64 arithmetic on these inputs gets
    # right (it is exact whenever the result is zero).
    return round_fraction(exact, dtype, negative_zero=math.copysign(1.0, float64_result) < 0)


def add(a: float, b: float, dtype) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return a + b  # inf, or NaN (NaN inputs, inf - inf)
    return _rounded(Fraction(a) + Fraction(b), a + b, dtype)


def subtract(a: float, b: float, dtype) -> float:
    return add(a, -b, dtype)


def multiply(a: float, b: float, dtype) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b
    return round_fraction(Fraction(a) * Fraction(b), dtype, negative_zero=math.copysign(1.0, a * b) < 0)


def divide(a: float, b: float, dtype) -> float:
    if math.isnan(a) or math.isnan(b) or (math.isinf(a) and math.isinf(b)) or (a == 0 and b == 0):
        return math.nan
    negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
    if math.isinf(a) or b == 0:
        return -math.inf if negative else math.inf
    if math.isinf(b):
        return -0.0 if negative else 0.0
    return round_fraction(Fraction(a) / Fraction(b), dtype, negative_zero=negative)


def sqrt(a: float, dtype) -> float:
    """The square root of `a` rounded to nearest in `dtype`, decided exactly: of the two values of
    `dtype` around the float64 root's rounding, the nearer to sqrt(a) is the one on its side of
    their midpoint m, which m * m against a tells (a root is never a midpoint)."""
    if math.isnan(a) or a < 0:
        return math.nan
    if a == 0 or math.isinf(a):
        return a
    guess = np.array(math.sqrt(a)).astype(dtype)
    step = np.array(1, unsigned(np.dtype(dtype)))
    below, above = ((guess.view(unsigned(guess.dtype)) + d).view(guess.dtype) for d in (-step, step))
    exact = Fraction(a)
    low, high = (below, guess) if Fraction(float(guess)) ** 2 > exact else (guess, above)
    middle = (Fraction(float(low)) + Fraction(float(high))) / 2
    return float(high) if middle * middle < exact else float(low)


def fma(a: float, b: float, c: float, dtype) -> float:
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c  # the special cases only: products of finite values do not matter here
    return _rounded(Fraction(a) * Fraction(b) + Fraction(c), a * b + c, dtype)


def maximum(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0:
        return 0.0 if math.copysign(1.0, a) > 0 or math.copysign(1.0, b) > 0 else -0.0
    return max(a, b)


def minimum(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0:
        return -0.0 if math.copysign(1.0, a) < 0 or math.copysign(1.0, b) < 0 else 0.0
    return min(a, b)


def compare(predicate: str, a: float, b: float) -> bool:
    unordered = math.isnan(a) or math.isnan(b)
    relation = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b,
                "ne": a != b and not unordered}
    if predicate in ("true", "false"):
        return predicate == "true"
    if predicate == "ord":
        return not unordered
    if predicate == "uno":
        return unordered
    if predicate == "une":
        return unordered or a != b
    if predicate == "one":
        return not unordered and a != b
    kind, name = predicate[0], predicate[1:]
    return relation[name] if kind == "o" else (unordered or relation[name])


def float_values(dtype: np.dtype, count: int, rng: np.random.Generator) -> np.ndarray:
    """Special values (±0, ±inf, NaN, subnormals, extremes) then `count` values with random bits
    and with narrow exponents (so that sums of them round)."""
    dtype = np.dtype(dtype)
    info = ml_dtypes.finfo(dtype)
    special = [0.0, -0.0, math.inf, -math.inf, math.nan, float(info.smallest_subnormal),
               -float(info.smallest_subnormal), float(info.smallest_normal) - float(info.smallest_subnormal),
               float(info.smallest_normal), float(info.max), -float(info.max), 1.0, -1.0, 1.5, 3.0]
    random_bits = rng.integers(0, 2 ** (dtype.itemsize * 8),
                               size=count // 2).astype(unsigned(dtype)).view(dtype)
    moderate = (rng.standard_normal(count - count // 2) * 2.0 ** rng.integers(-12, 12, count - count // 2))
    return np.concatenate([np.array(special).astype(dtype), random_bits, moderate.astype(dtype)])


def reference_array(function, dtype, *arrays: np.ndarray) -> np.ndarray:
    """`function` (on Python floats, returning one) applied elementwise, as a `dtype` array."""
    return to_array(
        [function(*(float(x) for x in xs)) for xs in zip(*(a.reshape(-1) for a in arrays))], dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(bits(a), bits(b))
