"""The interpreter's im2col load (`asyncdsl.tma_load_im2col`), mixed into `AsyncDslFunctions`.

Like every copy here it completes when issued: the pixels the descriptor's walk picks
(`asyncdsl.interpret.im2col_engine`, zeros outside the image batch) land in the destination as rows of
channels, swizzled byte for byte like a tiled box of those rows, and their bytes complete on the
barrier at once; the race log then holds the write until that barrier phase is waited for.
"""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.interpret import tma
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.im2col_engine import load_im2col
from asyncdsl.interpret.operands import barrier_address, operand_values, predicated_off
from asyncdsl.interpret.races import AsyncWrite


class Im2colFunctions:
    """im2col loads, executed by `self.warpgroup`."""

    @impl(ir.TmaIm2colLoadOp)
    @diagnosed
    def run_tma_load_im2col(self, interpreter: Interpreter, op: ir.TmaIm2colLoadOp, args: PythonValues):
        values = operand_values(op, args)
        if predicated_off(op, values):
            return ()
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        spec = tma.descriptor_spec(op.descriptor)
        barrier = warpgroup.mbarrier(barrier_address(op, values))
        if op.expect_tx_bytes.value.data:
            barrier.arrive_expect_tx(op.expect_tx_bytes.value.data, warpgroup.clock)
        buffer = values[op.smem]
        start, end = buffer.offset, buffer.offset + buffer.nbytes  # exactly the rows (verified)
        cta.accesses.check_write(start, end, warpgroup.clock, "the im2col load")
        argument = cta.launch.arguments[spec.arg_index]
        rows = load_im2col(
            argument.raw, spec, [values[c].value.data for c in op.coords], [values[o].value.data for o in op.offsets]
        )
        tma.write_smem_rows(cta.smem.bytes, start, end, spec, rows)
        phase = barrier.complete_tx(end - start)
        cta.accesses.record_write(AsyncWrite(start, end, barrier.key, phase, barrier.name, origin(op)))
        return ()
