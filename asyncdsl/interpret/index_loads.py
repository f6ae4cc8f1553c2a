"""`asyncdsl.load_index`: an element of a GMEM integer array as an index, bounds checked (a
read past the array is reported at the kernel's line, where the GPU would read what lies there)."""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import OutOfBoundsError
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions, index_value
from asyncdsl.interpret.operands import argument_index


@register_impls
class IndexLoadFunctions(WarpgroupFunctions):
    """Reads of an index from a kernel array argument."""

    @impl(ir.LoadIndexOp)
    @diagnosed
    def run_load_index(self, interpreter: Interpreter, op: ir.LoadIndexOp, args: PythonValues):
        argument = self.warpgroup.cta.launch.argument(argument_index(op.array), None)
        indices = tuple(value.value.data for value in args[1:])
        shape = argument.array.shape
        for dim, (index, size) in enumerate(zip(indices, shape)):
            if not 0 <= index < size:
                raise OutOfBoundsError(f"load_index: index {indices} of {argument.name!r} (shape {shape}) is "
                                       f"out of bounds along dim {dim}")
        return (index_value(interpreter, int(argument.array[indices])),)
