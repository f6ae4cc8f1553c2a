"""The index arithmetic of `arith` that xDSL's `ArithFunctions` lacks or makes slow.

xDSL's implementations are used for everything they cover: their index semantics match the
lowering's 32-bit registers (wrapping, `floordivsi` flooring, `divsi`/`remsi` truncating, signed
and unsigned `cmpi`).  Added here: `arith.minsi`/`arith.maxsi`, which the frontend emits for
`Scalar.min`/`max`; `arith.constant` remembered per op (xDSL builds a new attribute on every
run, which was most of the time a small kernel took); and a diagnostic for division by zero,
which xDSL asserts on and the GPU silently answers with garbage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import scalar_attr
from xdsl.ir import Attribute, Operation

from asyncdsl.errors import InterpretError
from asyncdsl.ir_locations import from_ir_location

_ARITH = ArithFunctions()


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

    @impl(arith.DivSIOp)
    def run_divsi(self, interpreter: Interpreter, op: arith.DivSIOp, args: PythonValues):
        _nonzero_divisor(op, args)
        return _ARITH.run_divsi(interpreter, op, args).values

    @impl(arith.RemSIOp)
    def run_remsi(self, interpreter: Interpreter, op: arith.RemSIOp, args: PythonValues):
        _nonzero_divisor(op, args)
        return _ARITH.run_remsi(interpreter, op, args).values

    @impl(arith.FloorDivSIOp)
    def run_floordivsi(self, interpreter: Interpreter, op: arith.FloorDivSIOp, args: PythonValues):
        _nonzero_divisor(op, args)
        return _ARITH.run_floordivsi(interpreter, op, args).values
