"""The scalar arithmetic of `arith` that xDSL's `ArithFunctions` lacks or makes slow.

xDSL's implementations are used for everything they cover: their index semantics match the
lowering's 32-bit registers (wrapping, `floordivsi` flooring, `divsi`/`remsi` truncating, signed
and unsigned `cmpi`).  Added here: `arith.minsi`/`arith.maxsi`, which the frontend emits for
`Scalar.min`/`max`; `arith.constant` remembered per op (xDSL builds a new attribute on every
run, which was most of the time a small kernel took); integer ops answered from a table of the
results each op gave (`memoized`); and a diagnostic for division by zero, which xDSL asserts on
and the GPU silently answers with garbage.

Float32 scalars (a kernel's `float` arguments): xDSL's `addf`, `subf`, `mulf` and `cmpf` compute in
Python floats and round to the result type (`FloatAttr`), which is IEEE float32 arithmetic (a
double-precision result rounded again to float32 is the correctly rounded float32 result for
these ops and for division); added here are `divf` (by zero too), `negf` and `sitofp`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IndexType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    OpImplResult,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import scalar_attr
from xdsl.ir import Attribute, Operation

from asyncdsl.dialects.ir_utils import float_type
from asyncdsl.errors import InterpretError
from asyncdsl.ir_locations import from_ir_location

_ARITH = ArithFunctions()
_RESULTS_PER_OP: Final = 4096  # a table that outgrows this starts again

IntegerOpImpl = Callable[[Interpreter, Operation, PythonValues], OpImplResult]
AnOp = TypeVar("AnOp", bound=Operation)


def memoized(run: Callable[[Interpreter, AnOp, PythonValues], OpImplResult]) -> IntegerOpImpl:
    """`run`, an implementation of a scalar integer op (whose result is a function of the op and
    its operands' values), answering values it has seen from a table.  Building xDSL's result
    attribute, verified on construction, costs far more than the arithmetic, and index
    arithmetic repeats the same values in every iteration, warpgroup and CTA.  The table holds
    each op weakly, so it goes with its module."""
    tables: weakref.WeakKeyDictionary[Operation, dict[tuple, OpImplResult]] = weakref.WeakKeyDictionary()

    def run_memoized(interpreter: Interpreter, op: Operation, args: PythonValues) -> OpImplResult:
        # `op` is the class `run` implements: the interpreter dispatches by class
        table = tables.get(op)
        if table is None:
            table = tables[op] = {}
        key = (interpreter.index_bitwidth, *(arg.value.data for arg in args))
        result = table.get(key)
        if result is None:
            if len(table) >= _RESULTS_PER_OP:
                table.clear()
            result = table[key] = run(interpreter, op, args)  # type: ignore[arg-type]
        return result

    return run_memoized


_CMPI = memoized(_ARITH.run_cmpi)
_DIVSI = memoized(_ARITH.run_divsi)
_REMSI = memoized(_ARITH.run_remsi)
_FLOORDIVSI = memoized(_ARITH.run_floordivsi)


def _nonzero_divisor(op: Operation, args: PythonValues) -> None:
    if args[1].value.data == 0:
        raise InterpretError(
            f"division by zero in index arithmetic ({op.name}); on the GPU the result would be "
            "undefined",
            from_ir_location(op),
        )


@register_impls
@dataclass
class IndexArithFunctions(InterpreterFunctions):
    """Register over `ArithFunctions` (`override=True`), one instance per launch."""

    _constants: dict[Operation, Attribute] = field(default_factory=dict)

    @impl(arith.ConstantOp)
    def run_constant(self, interpreter: Interpreter, op: arith.ConstantOp, args: PythonValues):
        value = self._constants.get(op)
        if value is None:
            attr = op.value
            if isinstance(attr.type, IndexType):
                # Index constants become integers of the interpreter's index width, as in xDSL.
                value = scalar_attr(attr.value.data, attr.type, interpreter.index_bitwidth)
            else:
                value = attr
            self._constants[op] = value
        return (value,)

    @impl(arith.MinSIOp)
    def run_minsi(self, interpreter: Interpreter, op: arith.MinSIOp, args: PythonValues):
        lhs, rhs = (a.value.data for a in args)
        return (scalar_attr(min(lhs, rhs), op.result.type, interpreter.index_bitwidth),)

    @impl(arith.MaxSIOp)
    def run_maxsi(self, interpreter: Interpreter, op: arith.MaxSIOp, args: PythonValues):
        lhs, rhs = (a.value.data for a in args)
        return (scalar_attr(max(lhs, rhs), op.result.type, interpreter.index_bitwidth),)

    @impl(arith.CmpiOp)
    def run_cmpi(self, interpreter: Interpreter, op: arith.CmpiOp, args: PythonValues):
        return _CMPI(interpreter, op, args).values

    @impl(arith.DivSIOp)
    def run_divsi(self, interpreter: Interpreter, op: arith.DivSIOp, args: PythonValues):
        _nonzero_divisor(op, args)
        return _DIVSI(interpreter, op, args).values

    @impl(arith.RemSIOp)
    def run_remsi(self, interpreter: Interpreter, op: arith.RemSIOp, args: PythonValues):
        _nonzero_divisor(op, args)
        return _REMSI(interpreter, op, args).values

    @impl(arith.FloorDivSIOp)
    def run_floordivsi(self, interpreter: Interpreter, op: arith.FloorDivSIOp, args: PythonValues):
        _nonzero_divisor(op, args)
        return _FLOORDIVSI(interpreter, op, args).values


@register_impls
class FloatArithFunctions(InterpreterFunctions):
    """Float32 scalar ops xDSL lacks (stateless)."""

    @impl(arith.DivfOp)
    def run_divf(self, interpreter: Interpreter, op: arith.DivfOp, args: PythonValues):
        with np.errstate(all="ignore"):  # x / 0 is an infinity or NaN, as on the GPU
            quotient = np.float64(args[0].value.data) / np.float64(args[1].value.data)
        return (FloatAttr(float(quotient), float_type(op.result.type)),)

    @impl(arith.NegfOp)
    def run_negf(self, interpreter: Interpreter, op: arith.NegfOp, args: PythonValues):
        return (FloatAttr(-args[0].value.data, float_type(op.result.type)),)

    @impl(arith.SIToFPOp)
    def run_sitofp(self, interpreter: Interpreter, op: arith.SIToFPOp, args: PythonValues):
        return (FloatAttr(float(args[0].value.data), op.result.type),)
