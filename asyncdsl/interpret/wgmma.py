"""The interpreter's wgmma: `asyncdsl.wgmma` and `asyncdsl.wgmma_wait`.

A wgmma runs when it is issued, but reads its operands the way the tensor cores do: it encodes
each instruction's descriptors from the plan `plan-smem-access` made and the buffer's address,
then decodes them (`hw.wgmma.operand_addresses`) into the shared-memory bytes the hardware would
read.  A descriptor that points at the wrong bytes therefore gives wrong numbers here as on the
GPU.  The arithmetic is `mma_numerics`' model of the tensor cores, one instruction at a time.

What it checks, as the GPU needs:

- the operand bytes were landed and, if written by ordinary stores, fenced to the async proxy
  (`fence_async_smem`): wgmma reads through the async proxy;
- until a `wgmma_wait` retires the group, its operand bytes must not be overwritten (a
  `RaceError` for the writer, e.g. a producer refilling a pipeline stage released too early),
  and its accumulator must not be read or written (an `InterpretError`).
"""

from __future__ import annotations

import functools

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError
from asyncdsl.hw.wgmma import INSTRUCTION_M, OperandPlan, operand_addresses
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import SmemBuffer
from asyncdsl.interpret.mma_numerics import fp8_step, integer_step, mma_step
from asyncdsl.interpret.races import WgmmaRead


@functools.lru_cache(maxsize=4096)
def _addresses(descriptor: int, k_major: bool, element_bytes: int, mn: int, k: int) -> np.ndarray:
    """`operand_addresses`, decoded once per descriptor: a pipeline reads the same few stages
    over and over.  Read-only, as it is shared."""
    addresses = operand_addresses(descriptor, k_major, element_bytes, mn, k)
    addresses.setflags(write=False)
    return addresses


@register_impls
class WgmmaFunctions(WarpgroupFunctions):
    """wgmma groups of `self.warpgroup`."""

    def _operand(self, plan: OperandPlan, buffer: SmemBuffer, element: dtypes.DType, mn: int, k: int,
                 instruction_k: int, groups: int, what: str) -> np.ndarray:
        """The (mn · groups, k) matrix the tensor cores read through the plan's descriptors."""
        cta = self.warpgroup.cta
        cta.smem.check(buffer.offset, buffer.nbytes, what)
        cta.accesses.check_read(buffer.offset, buffer.offset + buffer.nbytes, self.warpgroup.clock, what)
        blocks = []
        for group in range(groups):
            steps = []
            for step in range(k // instruction_k):
                descriptor = plan.descriptor(buffer.offset, group, step)
                addresses = _addresses(descriptor, plan.k_major, element.itemsize, mn, instruction_k)
                steps.append(np.ascontiguousarray(cta.smem.bytes[addresses]).view(element.numpy)[..., 0])
            blocks.append(np.concatenate(steps, axis=1))
        return np.concatenate(blocks, axis=0)

    @impl(ir.WgmmaOp)
    @diagnosed
    def run_wgmma(self, interpreter: Interpreter, op: ir.WgmmaOp, args: PythonValues):
        warpgroup = self.warpgroup
        cell, a, b, accumulate = args
        types = op.types
        (m, n), (_, k), _ = op.shapes
        accumulate = bool(accumulate)
        if accumulate and cell.tile is None:
            raise InterpretError(
                f"accumulates into the registers allocated at {cell.origin} before anything was written to "
                "them (pass accumulate=False to the first wgmma)"
            )
        if op.a_plan is not None:
            a = self._operand(op.a_plan.spec(), a, types.a, INSTRUCTION_M, k, types.k, m // INSTRUCTION_M,
                              "wgmma's A operand")
        if op.b_plan is None:
            raise InterpretError("wgmma's B operand has no plan: the kernel was not resolved")
        b_matrix = self._operand(op.b_plan.spec(), b, types.b, n, k, types.k, 1, "wgmma's B operand").T
        acc = cell.tile if accumulate else np.zeros((m, n), types.accumulator.numpy)
        for step in range(0, k, types.k):
            a_step, b_step = np.asarray(a)[:, step:step + types.k], b_matrix[step:step + types.k]
            first = accumulate or step > 0
            if types.integer:
                acc = integer_step(acc, a_step, b_step, first)
            elif types.a.bits == 8:
                acc = fp8_step(acc, a_step, b_step, first)
            else:
                acc = mma_step(acc, a_step, b_step, first, tf32=types.a == dtypes.float32)
        warpgroup.wgmma_issued += 1
        cell.tile = acc
        cell.writer = (warpgroup.wgmma_issued, origin(op))
        for buffer, plan in ((args[1], op.a_plan), (args[2], op.b_plan)):
            if plan is not None:
                warpgroup.cta.accesses.record_read(WgmmaRead(
                    buffer.offset, buffer.offset + buffer.nbytes, warpgroup.wgmma_key, warpgroup.wgmma_issued,
                    warpgroup.label, origin(op),
                ))
        return ()

    @impl(ir.WgmmaWaitOp)
    def run_wgmma_wait(self, interpreter: Interpreter, op: ir.WgmmaWaitOp, args: PythonValues):
        self.warpgroup.retire_wgmma_groups(op.pending.value.data)
        return ()
