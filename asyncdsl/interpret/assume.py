"""The interpreter checks every assumption the IR states (`asyncdsl.multiple_of`, `asyncdsl.check`,
`asyncdsl.check_tile`)
and reports a false one as an `AssumptionError` at its line, where the GPU would compute garbage
or fault (unless the kernel was compiled with ASYNCDSL_DEBUG=1)."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import AssumptionError
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions


@register_impls
class AssumeFunctions(WarpgroupFunctions):
    """Hints and the compiler's checks."""

    @impl(ir.MultipleOfOp)
    @diagnosed
    def run_multiple_of(self, interpreter: Interpreter, op: ir.MultipleOfOp, args: PythonValues):
        (value,) = args
        divisor = op.divisor.value.data
        if value.value.data % divisor:
            raise AssumptionError(f"{ir.check_message(op)}, but the value is {value.value.data}")
        return (value,)

    @impl(ir.CheckOp)
    @diagnosed
    def run_check(self, interpreter: Interpreter, op: ir.CheckOp, args: PythonValues):
        condition, *values = args
        if not condition.value.data:
            found = ", ".join(str(value.value.data) for value in values)
            raise AssumptionError(ir.check_message(op) + (f" (found {found})" if values else ""))
        return (condition,)

    @impl(ir.CheckTileOp)
    @diagnosed
    def run_check_tile(self, interpreter: Interpreter, op: ir.CheckTileOp, args: PythonValues):
        held = np.asarray(args[0], dtype=bool)
        if not held.all():
            first = tuple(int(i) for i in np.argwhere(~held)[0])
            raise AssumptionError(f"{ir.check_message(op)} ({int((~held).sum())} of {held.size} elements "
                                  f"false, the first at {first})")
        return ()
