"""The interpreter's row gathers and scatters (`asyncdsl.tma_gather4` / `tma_scatter4`).

Each instruction reads its four row indices from the SMEM index buffer (a read the race log
checks: indices a TMA load brought must have been waited for), then moves four rows of the
column window like four one-row tiled boxes: a gather zero-fills rows past the array, a
scatter skips them. The indices reach the instruction as its 32-bit coordinates, which TMA
reads as signed: an index of 2^31 or more is a negative row, zeros for a gather and a fault for
a scatter (docs/hardware.md §3.3, §11). In SMEM the four rows are consecutive rows of the buffer,
swizzled like a tiled box.
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.hw.limits import GATHER4_ROWS
from asyncdsl.interpret import tma
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.operands import barrier_address, memref_of, operand_values
from asyncdsl.interpret.races import AsyncRead, AsyncWrite
from asyncdsl.ir_locations import from_ir_location

_SIGN = 1 << 31


@register_impls
class RowGatherFunctions(WarpgroupFunctions):
    """gather4/scatter4 instructions, executed by `self.warpgroup`."""

    def _row_coordinates(self, op: ir.TmaGather4Op | ir.TmaScatter4Op, values: dict, what: str) -> list[int]:
        """The instruction's four rows, read from the index buffer as the issuing thread does."""
        cta = self.warpgroup.cta
        index_bytes = ir.element_bits(memref_of(op.rows)) // 8
        start = values[op.rows].offset + op.first_row.value.data * index_bytes
        end = start + GATHER4_ROWS * index_bytes
        cta.accesses.check_read(start, end, self.warpgroup.clock, f"{what} reading its row indices")
        indices = cta.smem.bytes[start:end].view(np.dtype(f"u{index_bytes}"))
        return [int(i) - 2 * _SIGN if i >= _SIGN else int(i) for i in indices]

    @staticmethod
    def _smem_rows(op: ir.TmaGather4Op | ir.TmaScatter4Op, values: dict, spec) -> tuple[int, int]:
        """The SMEM byte range [start, end) of the instruction's four rows."""
        row_bytes = spec.box_dims[1] * spec.element_bytes
        start = values[op.smem].offset + op.first_row.value.data * row_bytes
        return start, start + GATHER4_ROWS * row_bytes

    @impl(ir.TmaGather4Op)
    @diagnosed
    def run_tma_gather4(self, interpreter: Interpreter, op: ir.TmaGather4Op, args: PythonValues):
        values = operand_values(op, args)
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        spec = tma.descriptor_spec(op.descriptor)
        barrier = warpgroup.mbarrier(barrier_address(op, values))
        rows = self._row_coordinates(op, values, "the gather4")
        start, end = self._smem_rows(op, values, spec)
        cta.accesses.check_write(start, end, warpgroup.clock, "the gather4")
        argument = cta.launch.arguments[spec.arg_index]
        column = values[op.column].value.data
        box = np.concatenate(
            [tma.read_gmem_box(argument.raw, spec, (row, column), argument.name) for row in rows])
        tma.write_smem_rows(cta.smem.bytes, start, end, spec, box)
        phase = barrier.complete_tx(end - start)
        cta.accesses.record_write(AsyncWrite(start, end, barrier.key, phase, barrier.name, origin(op),
                                             location=from_ir_location(op)))
        return ()

    @impl(ir.TmaScatter4Op)
    @diagnosed
    def run_tma_scatter4(self, interpreter: Interpreter, op: ir.TmaScatter4Op, args: PythonValues):
        values = operand_values(op, args)
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        spec = tma.descriptor_spec(op.descriptor)
        rows = self._row_coordinates(op, values, "the scatter4")
        start, end = self._smem_rows(op, values, spec)
        cta.accesses.check_read(start, end, warpgroup.clock, "the scatter4")
        element = np.dtype(f"u{spec.element_bytes}")
        shape = (GATHER4_ROWS, spec.box_dims[1])
        box = tma.smem_bytes_to_box(cta.smem.bytes[start:end], shape, element, spec.swizzle_bytes, start)
        argument = cta.launch.arguments[spec.arg_index]
        column = values[op.column].value.data
        for position, row in enumerate(rows):
            row_bytes = box[position : position + 1].view(np.uint8).reshape(
                1, spec.box_dims[1], spec.element_bytes)
            tma.write_gmem_box(argument.raw, spec, (row, column), row_bytes, argument.name)
        group = warpgroup.committed_groups + 1  # the group the next commit closes
        cta.accesses.record_read(
            AsyncRead(start, end, warpgroup.bulk_key, group, warpgroup.label, origin(op)))
        if op.commit.value.data:
            warpgroup.committed_groups = group
        return ()
