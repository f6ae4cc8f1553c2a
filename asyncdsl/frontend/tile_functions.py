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
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend.options import flag
from asyncdsl.frontend.scalars import FloatScalar
from asyncdsl.frontend.tile_arguments import mask_hint, plain_number, tile_of
from asyncdsl.frontend.tiles import RegisterTile, broadcast_shape, broadcast_to, coerced, elementwise, full


def _tile(value, what: str) -> RegisterTile:
    if not isinstance(value, RegisterTile):
        raise TraceError(f"{what} takes a register tile, got {value!r}", user_location())
    return value


def where(mask: RegisterTile, a, b) -> RegisterTile:
    """Elementwise `a` where `mask` holds, else `b` (numpy's `where`)."""
    what = "asyncdsl.where"
    mask, a, b = _tile(mask, what), plain_number(a), plain_number(b)
    if mask.dtype != dtypes.BOOL:
        raise TraceError(f"{what}: the mask is {tile_of(mask.dtype)}, not a bool one (a comparison)"
                         f"{mask_hint(mask.dtype)}", user_location())
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
    template = _tile(a if isinstance(a, RegisterTile) else b, "asyncdsl.maximum")
    lhs, rhs = coerced(template, a, "asyncdsl.maximum")[1], coerced(template, b, "asyncdsl.maximum")[1]
    return lhs._binary(rhs, arith.MaximumfOp, arith.MaxSIOp)


def minimum(a, b) -> RegisterTile:
    """Elementwise minimum; NaN if either is NaN (numpy's `minimum`)."""
    template = _tile(a if isinstance(a, RegisterTile) else b, "asyncdsl.minimum")
    lhs, rhs = coerced(template, a, "asyncdsl.minimum")[1], coerced(template, b, "asyncdsl.minimum")[1]
    return lhs._binary(rhs, arith.MinimumfOp, arith.MinSIOp)


def fma(a, b, c) -> RegisterTile:
    """`a * b + c` rounded once."""
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


def _approximate(op_class, name: str, exact_available: bool):
    def function(x: RegisterTile, approx: bool = False) -> RegisterTile:
        what = f"asyncdsl.{name}"
        x = _tile(x, what)
        if x.dtype != dtypes.float32:
            raise TraceError(f"{what} computes on float32 tiles; astype(asyncdsl.float32) "
                             f"first (got {x.dtype})", user_location())
        approx = flag(approx, f"{what}: approx")
        if not approx and not exact_available:
            raise TraceError(f"{what} has only a hardware approximation: call it with approx=True",
                             user_location())
        flags = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC] if approx else "none")
        return elementwise(what, lambda value: op_class(value, flags), (x,), x.dtype)

    function.__name__ = name
    function.__doc__ = (
        f"Elementwise {name} of a float32 tile. approx=True: the hardware approximation (flushing "
        "subnormals); the default "
        + ("is within the bound docs/hardware.md states." if exact_available else "is refused.")
    )
    return function


exp2 = _approximate(xmath.Exp2Op, "exp2", True)
log2 = _approximate(xmath.Log2Op, "log2", True)
rsqrt = _approximate(xmath.RsqrtOp, "rsqrt", True)
tanh = _approximate(xmath.TanhOp, "tanh", False)
sin = _approximate(xmath.SinOp, "sin", False)
cos = _approximate(xmath.CosOp, "cos", False)

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


def _float32_tile(x, what: str) -> RegisterTile:
    x = _tile(x, what)
    if x.dtype != dtypes.float32:
        raise TraceError(f"{what} computes on float32 tiles; astype(asyncdsl.float32) first (got {x.dtype})",
                         user_location())
    return x


__all__ = ["cos", "exp", "exp2", "fma", "log", "log2", "maximum", "minimum", "rsqrt", "sin", "sqrt", "tanh",
           "where"]
