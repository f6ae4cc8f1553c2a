"""The interpreter's contiguous bulk copies (`asyncdsl.bulk_load` / `bulk_store`), one set of the
interpreter's op implementations.

A bulk copy moves the bytes of its SMEM buffer from or to the argument's bytes at the window's
first element, as the lowering addresses them (`asyncdsl.hw.gmem_runs`), completing when issued
like every copy here.  Under oob="undefined" the byte count is clamped exactly as on the GPU
(`hw.bulk.clamped_bytes`): SMEM past the clamp keeps what it held and a load completes the
missing bytes on its barrier (a load that arrives announces only the bytes it moves).  Under
oob="promise_in_bounds" a window leaving the array is an OutOfBoundsError.  A GMEM address the
GPU would fault on (not 16-byte aligned, from a traced start) is an InterpretError.  Race records
cover the bytes actually moved: a load's on its barrier phase, a store's on its bulk group.
"""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import ArgumentError, InterpretError, OutOfBoundsError
from asyncdsl.hw import gmem_runs
from asyncdsl.hw.bulk import clamped_bytes
from asyncdsl.hw.limits import BULK_ALIGNMENT
from asyncdsl.hw.options import Oob
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import GlobalArgument
from asyncdsl.interpret.operands import barrier_address, operand_values, predicated_off
from asyncdsl.interpret.races import AsyncRead, AsyncWrite
from asyncdsl.ir_locations import from_ir_location


def _moved_range(op, argument: GlobalArgument, values: dict, what: str) -> tuple[int, int]:
    """(GMEM byte offset, bytes moved) of a bulk copy, checked as the GPU would need them."""
    shape = ir.shape_of(op.gmem)
    dtype = dtypes.from_mlir(op.gmem.type.element_type)
    starts = [values[start].value.data for start in op.starts]
    offset = gmem_runs.start_offset_bytes(shape, dtype, starts)
    if op.oob.data == Oob.PROMISE_IN_BOUNDS:
        problems = gmem_runs.out_of_bounds_dims(shape, starts, op.sizes)
        if problems:
            raise OutOfBoundsError(
                f"{what} promised to stay inside argument {argument.name!r} "
                f"(oob='promise_in_bounds'), but its slice leaves it: " + "; ".join(problems)
            )
        moved = op.transfer_bytes
    else:
        moved = clamped_bytes(offset, op.transfer_bytes, gmem_runs.array_bytes(shape, dtype))
    if moved and offset % BULK_ALIGNMENT:
        raise InterpretError(
            f"{what} addresses argument {argument.name!r} at byte offset {offset} (starts "
            f"{tuple(starts)}), not {BULK_ALIGNMENT}-byte aligned: the GPU faults; traced starts "
            "must keep a bulk copy's slice aligned"
        )
    return offset, moved


def _check_smem_alignment(start: int, what: str) -> None:
    # The CTA's base is 1024-aligned: an offset's low bits are the address's.
    if start % BULK_ALIGNMENT:
        raise InterpretError(
            f"{what} addresses shared memory at byte {start}, not {BULK_ALIGNMENT}-byte aligned: the "
            "GPU faults; a window's traced start must keep a bulk copy's buffer aligned"
        )


@register_impls
class BulkFunctions(WarpgroupFunctions):
    """Bulk loads and stores, executed by `self.warpgroup`."""

    @impl(ir.BulkLoadOp)
    @diagnosed
    def run_bulk_load(self, interpreter: Interpreter, op: ir.BulkLoadOp, args: PythonValues):
        values = operand_values(op, args)
        if predicated_off(op, values):
            return ()
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        argument = values[op.gmem]
        offset, moved = _moved_range(op, argument, values, "the bulk load")
        start = values[op.smem].offset
        cta.smem.check(start, op.transfer_bytes, "the bulk load")
        _check_smem_alignment(start, "the bulk load")
        barrier = warpgroup.mbarrier(barrier_address(op, values))
        if op.arrive.value.data:
            barrier.arrive_expect_tx(moved, warpgroup.clock,
                                     f"the bulk load at {origin(op)} in {warpgroup.label}")
        elif moved != op.transfer_bytes:
            barrier.complete_tx(op.transfer_bytes - moved)
        if not moved:
            return ()
        cta.accesses.check_write(start, start + moved, warpgroup.clock, "the bulk load")
        cta.smem.bytes[start : start + moved] = argument.raw[offset : offset + moved]
        phase = barrier.complete_tx(moved)
        cta.accesses.record_write(
            AsyncWrite(start, start + moved, barrier.key, phase, barrier.name, origin(op), copy="bulk load",
                       location=from_ir_location(op))
        )
        return ()

    @impl(ir.BulkStoreOp)
    @diagnosed
    def run_bulk_store(self, interpreter: Interpreter, op: ir.BulkStoreOp, args: PythonValues):
        values = operand_values(op, args)
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        # The store belongs to the group the next commit closes; a skipped store still commits.
        group = warpgroup.committed_groups + 1
        if op.commit.value.data:
            warpgroup.committed_groups = group
        if predicated_off(op, values):
            return ()
        argument = values[op.gmem]
        offset, moved = _moved_range(op, argument, values, "the bulk store")
        start = values[op.smem].offset
        cta.smem.check(start, op.transfer_bytes, "the bulk store")
        _check_smem_alignment(start, "the bulk store")
        if not moved:
            return ()
        if not argument.raw.flags.writeable:
            raise ArgumentError(f"bulk store to argument {argument.name!r}, whose numpy array is read-only")
        cta.accesses.check_read(start, start + moved, warpgroup.clock, "the bulk store")
        argument.raw[offset : offset + moved] = cta.smem.bytes[start : start + moved]
        read = AsyncRead(
            start, start + moved, warpgroup.bulk_key, group, warpgroup.label, origin(op), copy="bulk store"
        )
        cta.accesses.record_read(read)
        return ()
