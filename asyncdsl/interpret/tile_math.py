"""The interpreter's elementwise math on register tiles: `arith`/`math` on `vector` values and
`asyncdsl.compare`, `select` and `convert` (docs/register-tiles.md).

Each op computes with the element arithmetic of `numerics` on the tiles' arrays (`tiles`
says what a tile's value is); integers read signed or unsigned by their dtype, bools as 0 or 1.

xDSL runs one implementation per op class, and `arith` also carries scalar arithmetic (index
values, i1 conditions, float32 scalars), so `TileMathFunctions` is registered over xDSL's
`ArithFunctions` and `scalars.py`'s sets (`grid.py`) and hands every scalar `arith` op back to
the set that owns it: `scalars.py` stays the owner of scalar semantics.  `convert` also takes
scalars (a traced index cast to i32, or a float32 scalar, on the way to a splat); they compute
here as 0-d arrays, as the lowering computes them as one register.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, VectorType
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.ir import Attribute, Operation

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.tile_functions import TILE_FUNCTIONS, TileFunction
from asyncdsl.errors import InterpretError
from asyncdsl.interpret import numerics
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.scalars import FloatArithFunctions, IndexArithFunctions, memoized
from asyncdsl.interpret.tiles import (
    BITWISE,
    FLOAT32,
    FLOATS,
    INTEGERS,
    check_dtype,
    element_dtype,
    tile_array,
)

# The owners of scalar arithmetic, for the ops handed back to them (the ones used are
# stateless: the launch's own IndexArithFunctions keeps its constants).
_ARITH = ArithFunctions()
_FLOAT_ARITH = FloatArithFunctions()
_INDEX_ARITH = IndexArithFunctions()


def _scalar(value: np.ndarray, type_: Attribute):
    """A 0-d array as the interpreter holds scalars (xDSL's attributes)."""
    if numerics.is_float(value.dtype):
        return FloatAttr(float(value), type_)
    return IntegerAttr(int(value), type_)


Compute = Callable[..., np.ndarray]


def _elementwise(op_type: type[Operation], compute: Compute, allowed: frozenset | None, scalar=None,
                 checked: int = 0):
    """The implementation of an elementwise op: `compute(op, *arrays)` on tiles (and on
    scalars, as 0-d arrays), after checking operand `checked` has a dtype in `allowed` (None:
    any tile dtype); a scalar op goes to `scalar`, the implementation that owns it, if any."""

    @impl(op_type)
    @diagnosed
    def run(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        result_type = op.results[0].type
        is_tile = isinstance(result_type, VectorType)
        if not is_tile and scalar is not None:
            return scalar(interpreter, op, args).values
        check_dtype(op, checked, allowed)
        result = compute(op,
                         *(tile_array(value, operand.type, op) for value, operand in zip(args, op.operands)))
        return (result if is_tile else _scalar(result, result_type),)

    return run


def _binary(function: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Compute:
    return lambda op, a, b: np.asarray(function(a, b))


def _instruction(function: TileFunction) -> Compute:
    """A tile function's instruction form: its float64 function rounded to float32, flushing
    subnormals where the instruction does (`afn` is the user's approx=True)."""
    return lambda op, x: numerics.approximate(
        function.name, x, ftz=function.flushes(arith.FastMathFlag.APPROX_FUNC in op.fastmath.data))


def _square_root(op: xmath.SqrtOp, x: np.ndarray) -> np.ndarray:
    if arith.FastMathFlag.APPROX_FUNC in op.fastmath.data:  # approx=True: `sqrt.approx.ftz.f32`
        return numerics.approximate("sqrt", x, ftz=True)
    return numerics.sqrt(x)


def _select(op: ir.SelectOp, mask: np.ndarray, yes: np.ndarray, no: np.ndarray) -> np.ndarray:
    return np.where(mask, yes, no)


def _floor_divide(op: Operation, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not np.all(b):
        raise InterpretError(
            "division by zero in a register tile's // or %: on the GPU the quotient would be undefined "
            "(elements a load fills past an array's end or outside its mask divide too: load a divisor "
            "with other=1)", None
        )
    return numerics.floor_divide(a, b)


def _convert(op: ir.ConvertOp, x: np.ndarray) -> np.ndarray:
    target = element_dtype(op.result.type, op)
    if numerics.is_float(x.dtype):
        return (numerics.float_to_float(x, target) if numerics.is_float(target)
                else numerics.float_to_int(x, target))
    return numerics.int_to_float(x, target) if numerics.is_float(target) else numerics.int_to_int(x, target)


class _TileFunctionImpls(WarpgroupFunctions):
    """The tile functions' implementations, one an entry of `TILE_FUNCTIONS`, set below (xDSL
    finds implementations on base classes too)."""


for _function in TILE_FUNCTIONS:
    setattr(_TileFunctionImpls, f"run_{_function.name}",
            _elementwise(_function.op, _instruction(_function), FLOAT32))


@register_impls
class TileMathFunctions(_TileFunctionImpls):
    """Elementwise math on register tiles (registered over the scalar `arith` sets, to which it
    hands scalar ops back)."""

    # -- float arithmetic --------------------------------------------------------------------------
    run_addf = _elementwise(arith.AddfOp, _binary(numerics.add), FLOATS, _ARITH.run_addf)
    run_subf = _elementwise(arith.SubfOp, _binary(numerics.subtract), FLOATS, _ARITH.run_subf)
    run_mulf = _elementwise(arith.MulfOp, _binary(numerics.multiply), FLOATS, _ARITH.run_mulf)
    run_divf = _elementwise(arith.DivfOp, _binary(numerics.divide), FLOATS, _FLOAT_ARITH.run_divf)
    run_negf = _elementwise(arith.NegfOp, lambda op, x: numerics.negate(x), FLOATS, _FLOAT_ARITH.run_negf)
    run_maximumf = _elementwise(arith.MaximumfOp, _binary(numerics.maximum), FLOATS, _ARITH.run_maximumf)
    run_minimumf = _elementwise(arith.MinimumfOp, _binary(numerics.minimum), FLOATS, _ARITH.run_minimumf)
    run_absf = _elementwise(xmath.AbsFOp, lambda op, x: numerics.absolute(x), FLOATS)
    run_fma = _elementwise(xmath.FmaOp, lambda op, a, b, c: numerics.fma(a, b, c), FLOATS)
    run_sqrt = _elementwise(xmath.SqrtOp, _square_root, FLOATS)

    # -- integer and bool arithmetic -----------------------------------------------------------------
    run_addi = _elementwise(arith.AddiOp, _binary(numerics.add), INTEGERS, memoized(_ARITH.run_addi))
    run_subi = _elementwise(arith.SubiOp, _binary(numerics.subtract), INTEGERS, memoized(_ARITH.run_subi))
    run_muli = _elementwise(arith.MuliOp, _binary(numerics.multiply), INTEGERS, memoized(_ARITH.run_muli))
    run_andi = _elementwise(arith.AndIOp, _binary(np.bitwise_and), BITWISE, memoized(_ARITH.run_andi))
    run_ori = _elementwise(arith.OrIOp, _binary(np.bitwise_or), BITWISE, memoized(_ARITH.run_ori))
    run_xori = _elementwise(arith.XOrIOp, _binary(np.bitwise_xor), BITWISE, memoized(_ARITH.run_xori))
    run_maxsi = _elementwise(arith.MaxSIOp, _binary(numerics.maximum), INTEGERS,
                             memoized(_INDEX_ARITH.run_maxsi))
    run_minsi = _elementwise(arith.MinSIOp, _binary(numerics.minimum), INTEGERS,
                             memoized(_INDEX_ARITH.run_minsi))
    run_absi = _elementwise(xmath.AbsIOp, lambda op, x: numerics.absolute(x), INTEGERS)
    run_floordivsi = _elementwise(arith.FloorDivSIOp, _floor_divide, INTEGERS, _INDEX_ARITH.run_floordivsi)
    run_shli = _elementwise(arith.ShLIOp, _binary(numerics.shift_left), INTEGERS)
    run_shrsi = _elementwise(arith.ShRSIOp, _binary(numerics.shift_right), INTEGERS)

    # -- comparisons, select, conversions (asyncdsl's: arith has them for scalars only) -------------
    run_compare = _elementwise(
        ir.CompareOp, lambda op, a, b: numerics.compare(op.predicate.data.value, a, b), FLOATS | INTEGERS
    )
    run_select = _elementwise(ir.SelectOp, _select, None, checked=1)
    run_convert = _elementwise(ir.ConvertOp, _convert, None)
