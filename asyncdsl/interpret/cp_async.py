"""The interpreter's cp.async fallback (`asyncdsl.cp_async_load`, `await_cp_async_copy`).

Every chunk of the copy lands where `CpAsyncPlan.chunk_offsets` puts it, swizzled on its
absolute shared address (the CTA's base is 1024-aligned, so the offset's low bits are the
address's), completing when issued like every copy here.  The window must lie inside the array
(cp.async has no zero fill: OutOfBoundsError) and every chunk's addresses must be aligned to the
chunk (InterpretError: the GPU faults), which traced starts were assumed to keep (the SMEM side
always is: see `asyncdsl.hw.cp_async`).

cp.async writes SMEM through the generic proxy; its race record (`races.GenericWrite`) is over
once the warpgroup's `await_cp_async_copy` covers its commit group, or once the phase of its
barrier completes (the per-thread tracking leaves the barrier's counts unchanged; the warpgroup
arrives once when `arrive` is set), and TMA or bulk copies touching those bytes must also know
of a later `fence_async_smem`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError, OutOfBoundsError
from asyncdsl.hw import gmem_runs
from asyncdsl.hw.cp_async import CpAsyncPlan
from asyncdsl.hw.limits import SWIZZLE_PERIOD
from asyncdsl.hw.swizzle import swizzled
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.operands import barrier_address, memref_of, operand_values
from asyncdsl.interpret.races import GenericWrite
from asyncdsl.interpret.waits import Proceed
from asyncdsl.ir_locations import from_ir_location


@lru_cache(maxsize=256)
def _byte_maps(plan: CpAsyncPlan, smem_phase: int) -> tuple[np.ndarray, np.ndarray]:
    """(GMEM byte offset from the window, SMEM byte offset from the buffer) of every byte the
    copy moves, for a buffer at `smem_phase` modulo the swizzle period."""
    gmem, smem = plan.chunk_offsets()
    within = np.arange(plan.chunk_bytes, dtype=np.int64)
    gmem_bytes = (gmem[:, None] + within).reshape(-1)
    smem_bytes = (smem[:, None] + within).reshape(-1)
    smem_bytes = swizzled(smem_phase + smem_bytes, plan.swizzle_bytes) - smem_phase
    return gmem_bytes, smem_bytes


@register_impls
class CpAsyncFunctions(WarpgroupFunctions):
    """cp.async copies and their waits, executed by `self.warpgroup`."""

    @impl(ir.CpAsyncLoadOp)
    @diagnosed
    def run_cp_async_load(self, interpreter: Interpreter, op: ir.CpAsyncLoadOp, args: PythonValues):
        values = operand_values(op, args)
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        plan = op.plan()
        argument = values[op.gmem]
        shape, dtype = ir.shape_of(op.gmem), dtypes.from_mlir(memref_of(op.gmem).element_type)
        starts = [values[start].value.data for start in op.starts]
        problems = gmem_runs.out_of_bounds_dims(shape, starts, op.sizes)
        if problems:
            raise OutOfBoundsError(
                f"the cp.async copy's slice leaves argument {argument.name!r} (cp.async cannot "
                "zero-fill): " + "; ".join(problems)
            )
        offset = gmem_runs.start_offset_bytes(shape, dtype, starts)
        if offset % plan.chunk_bytes:
            raise InterpretError(
                f"the cp.async copy moves {plan.chunk_bytes}-byte chunks, but its slice starts "
                f"{offset} bytes into argument {argument.name!r} (starts {tuple(starts)}), not "
                f"{plan.chunk_bytes}-byte aligned: the GPU faults; traced starts must keep the "
                "slice aligned"
            )
        start = values[op.smem].offset
        end = start + plan.total_bytes
        cta.smem.check(start, plan.total_bytes, "the cp.async copy")
        cta.accesses.check_write(start, end, warpgroup.clock, "the cp.async copy", generic=True)
        gmem_bytes, smem_bytes = _byte_maps(plan, start % SWIZZLE_PERIOD)
        cta.smem.bytes[start + smem_bytes] = argument.raw[offset + gmem_bytes]
        arrive = bool(op.arrive.value.data)
        if op.barriers is not None:
            barrier = warpgroup.mbarrier(barrier_address(op, values))
            phase = barrier.current_phase
            how = f"wait for phase {phase} of {barrier.name}"
            cta.accesses.record_write(GenericWrite(start, end, barrier.key, phase + 1, how, origin(op)))
            if arrive:
                barrier.arrive(1, warpgroup.clock, f"the cp.async copy at {origin(op)} in {warpgroup.label}")
        else:
            group = warpgroup.committed_cp_async_groups + 1
            how = f"await cp.async group {group} of {warpgroup.label} (await_cp_async_copy)"
            write = GenericWrite(start, end, warpgroup.cp_async_key, group, how, origin(op))
            cta.accesses.record_write(write)
            if arrive:
                warpgroup.committed_cp_async_groups = group
        return ()

    @impl(ir.AwaitCpAsyncCopyOp)
    @diagnosed
    def run_await_cp_async_copy(
        self, interpreter: Interpreter, op: ir.AwaitCpAsyncCopyOp, args: PythonValues
    ):
        self.warpgroup.wait_until(Proceed("awaits its cp.async copies", from_ir_location(op)))
        self.warpgroup.retire_cp_async_groups(op.allow_groups.value.data)
        return ()
