"""Lowering of `asyncdsl.wgmma` and `asyncdsl.wgmma_wait` (docs/hardware.md §14).

One `asyncdsl.wgmma` becomes

    wgmma.fence.sync.aligned;                        // registers written before are visible to it
    wgmma.mma_async.sync.aligned.m64nNkK.<types> {acc regs of 64-row group g}, descA|{a regs}, descB,
        scale-d, ...;                                // for each 64-row group g and each K step j
    wgmma.commit_group.sync.aligned;

The accumulator is the register ref's own registers, written in place (no copies in or out, so
ptxas sees one set of registers per ref and never serializes the pipeline over moves).  A
descriptor is `(address >> 4) & 0x3FFF | constant` for the operand's buffer, computed once per
wgmma, plus the plan's byte offset of each step >> 4 (`plan-smem-access`, `hw.wgmma`).  The
first K step of each group scales the old accumulator by `accumulate` (wgmma's scale-d: false
means `acc = a @ b`, whatever the registers held); later steps accumulate.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw.fragments import WGMMA
from asyncdsl.hw.wgmma import INSTRUCTION_M, OperandPlan, wgmma_a_registers
from asyncdsl.passes.to_ptx.builder import Arg
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.tile_registers import tile_of


class _Descriptors:
    """The descriptors of one SMEM operand, made on first use per byte offset."""

    def __init__(self, ctx: KernelLowering, address: SSAValue, plan: OperandPlan):
        self._ctx = ctx
        self._plan = plan
        wide = ctx.b.emit("cvt.u64.u32 {}, {};", "b64", address)
        start = ctx.b.emit("shr.u64 {}, {}, 4;", "b64", wide)
        start = ctx.b.emit("and.b64 {}, {}, 0x3FFF;", "b64", start)
        self._base = ctx.b.emit("or.b64 {}, {}, {};", "b64", start, f"0x{plan.constant_bits:016X}")
        self._made: dict[int, SSAValue] = {0: self._base}

    def at(self, group: int, step: int) -> SSAValue:
        offset = self._plan.mn_offsets[group] + self._plan.k_offsets[step]
        if offset not in self._made:
            self._made[offset] = self._ctx.b.emit("add.s64 {}, {}, {};", "b64", self._base, offset >> 4)
        return self._made[offset]


def _register_a(ctx: KernelLowering, op: ir.WgmmaOp) -> np.ndarray:
    """The packed `.b32` registers of a register A: `[group, step, i]` is `a<i>`."""
    tile = tile_of(ctx, op.a)
    pairs = tile.expanded(WGMMA).reshape(-1, 2)  # a splat (a constant A) repeats its one register
    order = wgmma_a_registers(tile.shape)
    packed = {}
    words = np.empty(order.shape, dtype=object)
    for position in np.ndindex(order.shape):
        flat = int(order[position])
        if flat not in packed:
            packed[flat] = ctx.b.emit("mov.b32 {}, {{{}, {}}};", "b32", pairs[flat, 0], pairs[flat, 1])
        words[position] = packed[flat]
    return words


def _immediates(op: ir.WgmmaOp, a_plan: OperandPlan | None, b_plan: OperandPlan) -> str:
    """The operands after scale-d: scale-a and scale-b (1: no negation) and, for 16-bit inputs,
    the transpose bits (none for a register A)."""
    types = op.types
    if types.integer:
        return ""
    tail = ", 1, 1"
    if types.transposable:
        if a_plan is not None:
            tail += f", {0 if a_plan.k_major else 1}"
        tail += f", {0 if b_plan.k_major else 1}"
    return tail


def _wgmma(ctx: KernelLowering, op: ir.WgmmaOp) -> None:
    b = ctx.b
    types = op.types
    (m, n), (_, k), _ = op.shapes
    a_plan = op.a_plan.spec() if op.a_plan is not None else None
    assert op.b_plan is not None, "plan-smem-access plans every SMEM operand"
    b_plan = op.b_plan.spec()
    acc = tile_of(ctx, op.acc).flat()
    per_group = n // 2  # 32-bit accumulator registers of one 64-row group
    accumulate = ctx.operand(op.accumulate)
    first_scale = int(bool(accumulate)) if isinstance(accumulate, int) else accumulate
    b_descriptors = _Descriptors(ctx, ctx.reg(op.b), b_plan)
    # A in shared memory (descriptors) or in registers (its packed words).
    a_source = _Descriptors(ctx, ctx.reg(op.a), a_plan) if a_plan is not None else _register_a(ctx, op)
    tail = _immediates(op, a_plan, b_plan)
    instruction = f"wgmma.mma_async.sync.aligned.m{INSTRUCTION_M}n{n}k{types.k}.{types.ptx}"
    b.append(ptx.WgmmaFenceOp())
    for group in range(m // INSTRUCTION_M):
        registers = acc[group * per_group:(group + 1) * per_group]
        for step in range(k // types.k):
            a_operand: Arg
            if isinstance(a_source, _Descriptors):
                a_operand, a_text = a_source.at(group, step), "{}"
            else:
                a_operand, a_text = list(a_source[group, step]), "{{{}}}"
            scale = first_scale if step == 0 else 1
            b.run(f"{instruction} {{{{{{}}}}}}, {a_text}, {{}}, {{}}{tail};",
                  registers, a_operand, b_descriptors.at(0, step), scale, instr=ptx.WgmmaMmaOp)
    b.append(ptx.WgmmaCommitOp())


def _wait(ctx: KernelLowering, op: ir.WgmmaWaitOp) -> None:
    ctx.b.append(ptx.WgmmaWaitOp(op.pending.value.data))


RULES: Rules = {
    ir.WgmmaOp: _wgmma,
    ir.WgmmaWaitOp: _wait,
}
