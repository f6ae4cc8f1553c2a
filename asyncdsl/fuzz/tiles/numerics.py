"""The reference arithmetic of register tiles, from docs/register-tiles.md alone: every float
op is the exact real result rounded once to the tile's dtype, integers wrap modulo 2^32.

Values are held as float64 (every float32, 16-bit and 8-bit float is one exactly) and rounded
by `round_to`, which scales each value to its quantum and rounds with `np.rint` (ties to even);
nothing here calls asyncdsl's own conversions.  For `+ - * / sqrt` of two p-bit operands,
computing in float64 (53 bits ≥ 2p + 2) and rounding again gives the once-rounded result; an
fma's three terms are summed as an error-free pair and rounded to odd first, which keeps the
later rounding to p ≤ 24 bits exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Format:
    """A float format: significant bits, the quantum of its subnormals, its largest finite value."""

    name: str
    bits: int
    tiny_exponent: int  # the smallest subnormal is 2**tiny_exponent
    largest: float
    numpy: type
    saturates: bool = False  # converting to it clamps to ±largest instead of overflowing to inf


FORMATS = {
    "float32": Format("float32", 24, -149, float(np.finfo(np.float32).max), np.float32),
    "bfloat16": Format(
        "bfloat16", 8, -133, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), ml_dtypes.bfloat16
    ),
    "float16": Format("float16", 11, -24, 65504.0, np.float16),
    "float8_e4m3fn": Format("float8_e4m3fn", 4, -9, 448.0, ml_dtypes.float8_e4m3fn, saturates=True),
    "float8_e5m2": Format("float8_e5m2", 3, -16, 57344.0, ml_dtypes.float8_e5m2, saturates=True),
}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INTEGERS: dict[str, type[np.integer]] = {
    "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "uint16": np.uint16
}


def is_float(dtype: str) -> bool:
    return dtype in FORMATS


def round_to(values: npt.ArrayLike, dtype: str) -> np.ndarray:
    """float64 values rounded to nearest even in `dtype`, as an array of that dtype."""
    fmt = FORMATS[dtype]
    x = np.asarray(values, np.float64)
    with np.errstate(all="ignore"):
        finite = np.isfinite(x) & (x != 0)
        _, exponent = np.frexp(np.where(finite, x, 1.0))  # x = m * 2**exponent, 0.5 <= |m| < 1
        quantum_exponent = np.maximum(exponent - fmt.bits, fmt.tiny_exponent)
        rounded = np.ldexp(np.rint(np.ldexp(x, -quantum_exponent)), quantum_exponent)
        rounded = np.where(finite, rounded, x)
        limit = fmt.largest if fmt.saturates else np.inf
        over = np.abs(rounded) > fmt.largest
        rounded = np.where(over & ~np.isnan(rounded), np.copysign(limit, rounded), rounded)
        if fmt.saturates:  # satfinite: infinities clamp too
            rounded = np.where(np.isinf(x), np.copysign(fmt.largest, x), rounded)
        return rounded.astype(fmt.numpy)


def wide(values: npt.ArrayLike) -> np.ndarray:
    """Any tile's values as float64 (exact for every tile dtype), NaN payloads ignored."""
    with np.errstate(invalid="ignore"):
        return np.asarray(values).astype(np.float64)


def wrap32(values: npt.ArrayLike) -> np.ndarray:
    """Python integers (int64 or float64 holding integers) wrapped to int32."""
    as_int = np.asarray(values).astype(np.int64)
    return ((as_int - INT32_MIN) % (2**32) + INT32_MIN).astype(np.int32)


def _odd(total: np.ndarray, error: np.ndarray) -> np.ndarray:
    """total rounded to odd by the sign of the error it left: a 53-bit value whose later rounding
    to at most 51 bits equals the rounding of the exact sum."""
    inexact = (error != 0) & np.isfinite(total)
    even = (total.view(np.int64) & 1) == 0
    toward = np.where(error > 0, np.inf, -np.inf)
    return np.where(inexact & even, np.nextafter(total, toward), total)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def fma(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike, dtype: str) -> np.ndarray:
    """a·b + c rounded once (a·b is exact in float64 for every float tile dtype)."""
    with np.errstate(all="ignore"):
        product, addend = wide(a) * wide(b), wide(c)
        total, error = _two_sum(product, addend)
        exact = np.where(np.isfinite(total), _odd(total, np.where(np.isfinite(error), error, 0)), total)
    return round_to(exact, dtype)


def arithmetic(op: str, a: npt.ArrayLike, b: npt.ArrayLike, dtype: str) -> np.ndarray:
    """a op b in `dtype` (float: once rounded; int32: wrapping, Python's floor division)."""
    if is_float(dtype):
        x, y = wide(a), wide(b)
        with np.errstate(all="ignore"):
            exact = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](x, y)
        return round_to(exact, dtype)
    x, y = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
    if op in ("<<", ">>"):
        return wrap32(x << y) if op == "<<" else (x >> y).astype(np.int32)
    result = {
        "+": np.add,
        "-": np.subtract,
        "*": np.multiply,
        "//": np.floor_divide,
        "%": np.remainder,
        "&": np.bitwise_and,
        "|": np.bitwise_or,
        "^": np.bitwise_xor,
    }[op](x, y)
    return wrap32(result)


def sqrt(a: npt.ArrayLike, dtype: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return round_to(np.sqrt(wide(a)), dtype)


def negate(a: npt.ArrayLike, dtype: str) -> np.ndarray:
    return round_to(-wide(a), dtype) if is_float(dtype) else wrap32(-np.asarray(a).astype(np.int64))


def absolute(a: npt.ArrayLike, dtype: str) -> np.ndarray:
    return (
        round_to(np.abs(wide(a)), dtype)
        if is_float(dtype)
        else wrap32(np.abs(np.asarray(a).astype(np.int64)))
    )


def extremum(which: str, a: npt.ArrayLike, b: npt.ArrayLike, dtype: str) -> np.ndarray:
    """maximum / minimum: NaN if either is NaN, -0 below +0."""
    if not is_float(dtype):
        return (np.maximum if which == "max" else np.minimum)(a, b).astype(np.int32)
    x, y = np.broadcast_arrays(wide(a), wide(b))
    # -0 < +0: compare (value, sign) so that the zero of the wanted sign wins
    x_key, y_key = x + 0.0, y + 0.0
    pick_x = (
        (x_key > y_key) | ((x_key == y_key) & ~np.signbit(x))
        if which == "max"
        else (x_key < y_key) | ((x_key == y_key) & np.signbit(x))
    )
    result = np.where(pick_x, x, y)
    return round_to(np.where(np.isnan(x) | np.isnan(y), np.nan, result), dtype)


def compare(op: str, a: npt.ArrayLike, b: npt.ArrayLike) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        x, y = wide(a), wide(b)
        return {
            "<": np.less,
            "<=": np.less_equal,
            ">": np.greater,
            ">=": np.greater_equal,
            "==": np.equal,
            "!=": np.not_equal,
        }[op](x, y)


def convert(a: npt.ArrayLike, source: str, target: str) -> np.ndarray:
    """`astype`: floats round to nearest even (float8 saturating), float → int truncates toward
    zero and saturates, NaN → 0; int → int wraps; bool → 0 or 1."""
    if is_float(target):
        return round_to(wide(a), target)
    if source == "bool":
        return np.asarray(a).astype(INTEGERS[target])
    info = np.iinfo(INTEGERS[target])
    if is_float(source):
        with np.errstate(invalid="ignore"):
            x = np.trunc(wide(a))
            x = np.where(np.isnan(x), 0, np.clip(x, info.min, info.max))
        return x.astype(np.int64).astype(INTEGERS[target])
    x = np.asarray(a).astype(np.int64)
    span = info.max - info.min + 1
    return ((x - info.min) % span + info.min).astype(INTEGERS[target])


def constant(value: float | int, dtype: str) -> np.ndarray | np.int32:
    """A Python number taken by a tile of `dtype` (a weak scalar): rounded once to it."""
    return round_to(np.float64(value), dtype) if is_float(dtype) else np.int32(value)


def _lowest_bit_exponent(x: np.ndarray) -> np.ndarray:
    """For each finite nonzero float64, the exponent of its lowest set bit (x is a multiple of
    2**that); a large number for zeros, which divide nothing."""
    nonzero = np.isfinite(x) & (x != 0)
    mantissa, exponent = np.frexp(np.where(nonzero, x, 1.0))
    integer = np.abs(np.ldexp(mantissa, 53)).astype(np.int64)
    low = integer & -integer
    _, low_exponent = np.frexp(low.astype(np.float64))
    return np.where(nonzero, low_exponent - 1 + exponent - 53, 1 << 20)


def sum_any_order(values: np.ndarray, axis, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The sum over `axis` that every order of addition in `dtype` gives, and where it is one.

    Where every term is a multiple of a power of two q and the terms' magnitudes add up to less
    than 2**p · q (p the dtype's significant bits) and the largest value, each partial sum in any
    order is such a multiple too, so exact: the tree the hardware uses cannot show.  A NaN among
    the terms makes the sum NaN in any order.  Elsewhere the sum depends on the order and the
    second array is False there."""
    x = wide(values)
    if not is_float(dtype):  # wrapping integer sums do not depend on the order
        total = np.asarray(values).astype(np.int64).sum(axis=axis)
        return wrap32(total), np.ones(np.shape(total), bool)
    fmt = FORMATS[dtype]
    with np.errstate(all="ignore"):
        finite = np.isfinite(x).all(axis=axis)
        has_nan = np.isnan(x).any(axis=axis)
        q = _lowest_bit_exponent(x).min(axis=axis)
        magnitude = np.where(np.isfinite(x), np.abs(x), 0).sum(axis=axis)
        fits = magnitude < np.minimum(np.ldexp(2.0**fmt.bits, np.minimum(q, 1000)), fmt.largest)
        total = x.sum(axis=axis)
        # an exact zero is -0 only where every term is -0 (x + y rounds to -0 only for -0 + -0);
        # numpy's sum may start from +0
        all_negative_zero = ((x == 0) & np.signbit(x)).all(axis=axis)
        total = np.where((total == 0) & all_negative_zero, -0.0, total)
    exact = has_nan | (finite & fits)
    return round_to(np.where(has_nan, np.nan, total), dtype), np.asarray(exact)


def sum_error_bound(values: np.ndarray, axis, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The exact sum (float64) and the bound on any order's error: γ(n-1) · Σ|x|, with
    γ(k) = k·u / (1 - k·u), u = 2**-p (the classic bound for recursive or tree summation)."""
    x = wide(values)
    n = x.size // np.size(x.sum(axis=axis))
    u = 2.0 ** -FORMATS[dtype].bits
    gamma = (n - 1) * u / (1 - (n - 1) * u)
    with np.errstate(all="ignore"):
        return x.sum(axis=axis), gamma * np.abs(x).sum(axis=axis)


def extreme(which: str, values: np.ndarray, axis, dtype: str) -> np.ndarray:
    """max / min over `axis`: NaN if any element is NaN, +0 above -0."""
    if not is_float(dtype):
        return (np.max if which == "max" else np.min)(values, axis=axis).astype(np.int32)
    x = wide(values)
    with np.errstate(invalid="ignore"):
        result = (np.max if which == "max" else np.min)(x, axis=axis)
        wanted_sign = which == "min"  # the zero that wins: -0 for min, +0 for max
        zero_of_sign = ((x == 0) & (np.signbit(x) == wanted_sign)).any(axis=axis)
    zero = np.where(zero_of_sign, -0.0 if wanted_sign else 0.0, -0.0 if not wanted_sign else 0.0)
    return round_to(np.where(result == 0, zero, result), dtype)
