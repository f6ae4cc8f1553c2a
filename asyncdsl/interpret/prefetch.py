"""The interpreter's L2 prefetch (`asyncdsl.tma_prefetch`), one set of the interpreter's op implementations.

A prefetch moves no data anyone can observe, so it changes nothing here; what is checked is what
would make the hardware fault: the descriptor must view memory inside its argument.  Its box may
lie partly or wholly outside the view, as a load's may (nothing is fetched there).
"""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.interpret import tma
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.operands import operand_values, predicated_off


@register_impls
class PrefetchFunctions(WarpgroupFunctions):
    """L2 prefetches, executed by `self.warpgroup`."""

    @impl(ir.TmaPrefetchOp)
    @diagnosed
    def run_tma_prefetch(self, interpreter: Interpreter, op: ir.TmaPrefetchOp, args: PythonValues):
        values = operand_values(op, args)
        if predicated_off(op, values):
            return ()
        spec = tma.descriptor_spec(op.descriptor)
        argument = self.warpgroup.cta.launch.arguments[spec.arg_index]
        tma.check_view_fits(argument.raw, spec, argument.name, "the TMA prefetch's descriptor")
        return ()
