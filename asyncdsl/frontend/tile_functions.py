"""Functions of register tiles: `asyncdsl.where`, `maximum`, `minimum`, `fma`, `sqrt` and the
transcendentals (`exp2`, `log2`, `rsqrt`, `tanh`, `sin`, `cos`; `exp` and `log` built on the
first two), each an elementwise op on tiles (`frontend/tiles.py`) whose operands combine as the
operators' do: numpy broadcasting, a Python number or traced scalar taking the tile's dtype.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects import math as xmath

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.tile_functions import BY_NAME, EXACT_HARDWARE, FLUSH_ALWAYS, FLUSH_NEVER, TileFunction
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend.options import flag
from asyncdsl.frontend.scalars import FloatScalar
from asyncdsl.frontend.tile_arguments import (
    is_numpy_number,
    mask_hint,
    numpy_promotion,
    plain_number,
    tile_of,
)
from asyncdsl.frontend.tiles import (
    RegisterTile,
    broadcast_shape,
    broadcast_to,
    coerced,
    elementwise,
    full,
    promoted_to,
)


def _tile(value, what: str) -> RegisterTile:
    if not isinstance(value, RegisterTile):
        raise TraceError(f"{what} takes a register tile, got {value!r}", user_location())
    return value


def _promoted(values, what: str) -> list:
    """`values` with their numpy scalars taken as numpy 2 promotes them (`numpy_promotion`): the
    tiles converted to the promoted dtype, the scalars as the numbers they hold.  Without a tile,
    or with tiles of two dtypes (refused where they meet), they stay as they are."""
    scalars = [v for v in values if is_numpy_number(v)]
    dtypes_ = {v.dtype for v in values if isinstance(v, RegisterTile)}
    if not scalars or len(dtypes_) != 1:
        return [plain_number(v) for v in values]
    dtype = numpy_promotion(dtypes_.pop(), scalars, what)
    return [promoted_to(v, dtype) if isinstance(v, RegisterTile) else plain_number(v) for v in values]


def where(mask: RegisterTile, a, b) -> RegisterTile:
    """Elementwise `a` where `mask` holds, else `b` (numpy's `where`)."""
    what = "asyncdsl.where"
    mask = _tile(mask, what)
    if mask.dtype != dtypes.BOOL:
        raise TraceError(f"{what}: the mask is {tile_of(mask.dtype)}, not a bool one (a comparison)"
                         f"{mask_hint(mask.dtype)}", user_location())
    a, b = _promoted((a, b), what)
    template = a if isinstance(a, RegisterTile) else b
    if not isinstance(template, RegisterTile):
        # Two numbers (or traced scalars): a tile of the mask's shape, float32 if either is a
        # float, else int32, as numpy gives `where(mask, 1.0, 0)` the type of its values.
        dtype = dtypes.float32 if any(isinstance(v, (float, FloatScalar)) for v in (a, b)) else dtypes.int32
        template = full(mask.shape, a, dtype)
    a, b = coerced(template, a, what)[1], coerced(template, b, what)[1]
    shape = broadcast_shape(mask.shape, a.shape, what)
    mask, a, b = broadcast_to(mask, shape), broadcast_to(a, shape), broadcast_to(b, shape)
    return elementwise(what, ir.SelectOp, (mask, a, b), a.dtype)


def maximum(a, b) -> RegisterTile:
    """Elementwise maximum; NaN if either is NaN (numpy's `maximum`)."""
    a, b = _promoted((a, b), "asyncdsl.maximum")
    template = _tile(a if isinstance(a, RegisterTile) else b, "asyncdsl.maximum")
    lhs, rhs = coerced(template, a, "asyncdsl.maximum")[1], coerced(template, b, "asyncdsl.maximum")[1]
    return lhs._binary(rhs, arith.MaximumfOp, arith.MaxSIOp)


def minimum(a, b) -> RegisterTile:
    """Elementwise minimum; NaN if either is NaN (numpy's `minimum`)."""
    a, b = _promoted((a, b), "asyncdsl.minimum")
    template = _tile(a if isinstance(a, RegisterTile) else b, "asyncdsl.minimum")
    lhs, rhs = coerced(template, a, "asyncdsl.minimum")[1], coerced(template, b, "asyncdsl.minimum")[1]
    return lhs._binary(rhs, arith.MinimumfOp, arith.MinSIOp)


def fma(a, b, c) -> RegisterTile:
    """`a * b + c` rounded once."""
    a, b, c = _promoted((a, b, c), "asyncdsl.fma")
    template = _tile(next((v for v in (a, b, c) if isinstance(v, RegisterTile)), a), "asyncdsl.fma")
    values = [coerced(template, v, "asyncdsl.fma")[1] for v in (a, b, c)]
    if not template.dtype.is_float:
        raise TraceError(f"asyncdsl.fma is for float tiles, not {template.dtype}", user_location())
    shape = values[0].shape
    for v in values[1:]:
        shape = broadcast_shape(shape, v.shape, "asyncdsl.fma")
    a, b, c = (broadcast_to(v, shape) for v in values)
    return elementwise("asyncdsl.fma", xmath.FmaOp, (a, b, c), template.dtype)


def sqrt(x: RegisterTile, approx: bool = False) -> RegisterTile:
    """Elementwise square root of a float tile, correctly rounded (IEEE: `sqrt.rn.f32`, a 16-bit
    float through float32, which rounds it once); sqrt(-0) is -0, of a negative number NaN.
    approx=True (float32 only): `sqrt.approx.ftz.f32`, within the bound docs/register-tiles.md
    states."""
    what = "asyncdsl.sqrt"
    x = _tile(x, what)
    if not x.dtype.is_float:
        raise TraceError(f"{what} is for float tiles, not {x.dtype} (astype first)", user_location())
    approx = flag(approx, f"{what}: approx")
    if approx and x.dtype != dtypes.float32:
        raise TraceError(f"{what}(approx=True) computes on float32 tiles; astype(asyncdsl.float32) first "
                         f"(got {x.dtype})", user_location())
    flags = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC] if approx else "none")
    return elementwise(what, lambda value: xmath.SqrtOp(value, flags), (x,), x.dtype)


def _instruction(function: TileFunction, x: RegisterTile, approx: bool) -> RegisterTile:
    """The tile function's instruction on float32 tile `x` (`.approx`, flushing where the entry
    says; approx: the user's approx=True, recorded as `afn`)."""
    flags = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC] if approx else "none")
    return elementwise(f"asyncdsl.{function.name}", lambda value: function.op(value, flags), (x,), x.dtype)


def _public(name: str, exact=None):
    """`asyncdsl.<name>` from its entry in `dialects/tile_functions.py`: the instruction with
    approx=True; the default is the instruction too (EXACT_HARDWARE) or `exact`, a composition of
    tile ops (EXACT_COMPOSED)."""
    function = BY_NAME[name]
    assert (exact is None) == (function.default == EXACT_HARDWARE), f"asyncdsl.{name}: entry and code differ"

    def public(x: RegisterTile, approx: bool = False) -> RegisterTile:
        what = f"asyncdsl.{name}"
        x = _float32_tile(x, what)
        approx = flag(approx, f"{what}: approx")
        if approx or exact is None:
            return _instruction(function, x, approx)
        return exact(x)

    public.__name__ = public.__qualname__ = name
    flushing = {FLUSH_ALWAYS: "flushing subnormals", FLUSH_NEVER: "keeping subnormals"}.get(
        function.flush, "flushing subnormals")
    default = ("the same instruction keeping subnormals (`.approx.f32`), within the bound "
               "docs/register-tiles.md states" if exact is None else
               "composed of other tile ops, within a few ulps (docs/register-tiles.md)")
    public.__doc__ = (f"{function.summary} of a float32 tile.  approx=True: the hardware approximation "
                      f"`{function.instruction}.approx` ({flushing}); the default is {default}.")
    return public


# log2(e) as a float32 and the float32 nearest to the rest; ln 2 as a float32.
_LOG2E_HIGH, _LOG2E_LOW = 1.44269502162933349609375, 1.925963033500011079e-08
_LN2 = 0.693147182464599609375


def exp(x: RegisterTile, approx: bool = False) -> RegisterTile:
    """Elementwise e^x of a float32 tile, through `exp2` (docs/register-tiles.md has the bounds).

    The default keeps what rounding x·log2(e) loses: 2^hi with hi = x·log2(e) rounded, times
    1 + lo·ln 2, where lo is the product's rounding error (an fma gives it exactly) plus x times
    the rest of log2(e); within a few ulps for every x.  approx=True is `exp2(x * log2(e),
    approx=True)`, two instructions, whose relative error grows with |x| (the product's rounding,
    up to 2^-24·|x·log2(e)|: 64 ulps near the float32 range's ends), as Triton's `exp` does."""
    what = "asyncdsl.exp"
    x = _float32_tile(x, what)
    if flag(approx, f"{what}: approx"):
        return exp2(x * _LOG2E_HIGH, approx=True)
    high = x * _LOG2E_HIGH
    low = fma(x, _LOG2E_HIGH, -high) + x * _LOG2E_LOW
    # Beyond |high| = 256, 2^high alone is e^x (inf or 0, or NaN for a NaN), and `low` need not
    # be small: up to half an ulp of a huge product, an infinity where the product overflowed.
    low = where(abs(high) < 256.0, low, 0.0)
    return exp2(high) * fma(low, _LN2, 1.0)


def log(x: RegisterTile, approx: bool = False) -> RegisterTile:
    """Elementwise natural logarithm of a float32 tile: `log2(x, approx) * ln 2`, as close as
    `log2` is (docs/register-tiles.md)."""
    return log2(_float32_tile(x, "asyncdsl.log"), approx=flag(approx, "asyncdsl.log: approx")) * _LN2


# Exact compositions (EXACT_COMPOSED entries), of tile ops the interpreter computes as the GPU
# does: sin and cos of exactly rounded ones only, so the two agree bit for bit; tanh through `exp`,
# whose `exp2` is within its bound.  Their error against the true function is in
# docs/register-tiles.md.  Polynomial coefficients are the float32
# minimax fits of the Cephes library's tanhf, sinf and cosf.
_TANH_SMALL = 0.625  # below: the odd polynomial; above: 1 - 2 / (e^2|x| + 1), which no longer cancels
_TANH_POLYNOMIAL = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
                    -3.33332819422e-1)
# pi/2 as three float32s (their sum is within 1.1e-23 of it), and 2/pi as a float32.
_HALF_PI = (1.57079637050628662109375, -4.371138828673792886547744274139404296875e-08,
            -1.7151245100058819e-15)
_TWO_OVER_PI = 0.636619746685028076171875
_REDUCED_RANGE = 2.0**23  # the |x| sin and cos reduce to [-pi/4, pi/4] within about an ulp
_SIN_POLYNOMIAL = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)  # sin r = r + r^3 p(r^2)
_COS_POLYNOMIAL = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)  # cos r, |r| <= pi/4


def _polynomial(u: RegisterTile, coefficients) -> RegisterTile:
    """c0·u^n + ... + cn by Horner's rule, one fma a step."""
    result = fma(u, coefficients[0], coefficients[1])
    for coefficient in coefficients[2:]:
        result = fma(result, u, coefficient)
    return result


def _tanh(x: RegisterTile) -> RegisterTile:
    # |x| < 0.625: x + x^3·p(x^2), the odd series' minimax fit (x itself for tiny x, -0 kept).
    # Else 1 - 2/(e^2|x| + 1) with the sign of x: e^2|x| is within a few ulps (`exp`), and at least
    # 3.4, so the quotient, below 0.46, moves the result by less than its own relative error; e^2|x|
    # overflowing to inf gives 1, and a NaN stays NaN (the comparison below is false for it).
    square = x * x
    small = fma(x * square, _polynomial(square, _TANH_POLYNOMIAL), x)
    large = 1.0 - 2.0 / (exp(abs(x) * 2.0) + 1.0)
    # ±0 is a zero plus a zero of the other sign, +0: it is taken as it is.
    return where(abs(x) < _TANH_SMALL, where(x == 0.0, x, small), where(x < 0.0, -large, large))


def _quarter_turns(x: RegisterTile, shift: int) -> RegisterTile:
    """sin(x + shift·pi/2): x less the multiple j of pi/2 nearest to it (Cody and Waite: each fma
    subtracts j times one part of pi/2 and rounds once; the first is exact, as x and j·pi/2 share
    their leading bits), then sin or cos of the rest, |r| <= pi/4, by the quadrant j + shift.
    Up to |x| = 2^23 j is exact and the three parts keep r within about an ulp; beyond, where
    they would not, the result is NaN (as for ±inf and NaN) rather than a wrong number."""
    turns = fma(x, _TWO_OVER_PI, where(x < 0.0, -0.5, 0.5)).astype(dtypes.int32)  # rounded half away
    j = turns.astype(dtypes.float32)
    r = x
    for part in _HALF_PI:
        r = fma(j, -part, r)
    square = r * r
    sine = fma(r * square, _polynomial(square, _SIN_POLYNOMIAL), r)
    cosine = fma(square, fma(square, _polynomial(square, _COS_POLYNOMIAL), -0.5), 1.0)
    quadrant = turns + shift if shift else turns
    value = where((quadrant & 1) != 0, cosine, sine)
    value = where((quadrant & 2) != 0, -value, value)
    if shift == 0:
        value = where(x == 0.0, x, value)  # sin(-0) is -0 (see _tanh)
    return where(abs(x) <= _REDUCED_RANGE, value, float("nan"))


def _sin(x: RegisterTile) -> RegisterTile:
    return _quarter_turns(x, 0)


def _cos(x: RegisterTile) -> RegisterTile:
    return _quarter_turns(x, 1)


exp2 = _public("exp2")
log2 = _public("log2")
rsqrt = _public("rsqrt")
tanh = _public("tanh", _tanh)
sin = _public("sin", _sin)
cos = _public("cos", _cos)


def _float32_tile(x, what: str) -> RegisterTile:
    x = _tile(x, what)
    if x.dtype != dtypes.float32:
        raise TraceError(f"{what} computes on float32 tiles; astype(asyncdsl.float32) first (got {x.dtype})",
                         user_location())
    return x


__all__ = ["exp", "fma", "log", "maximum", "minimum", "sqrt", "where", *BY_NAME]
