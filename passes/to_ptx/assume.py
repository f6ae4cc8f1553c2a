"""Lowering of hints and run-time checks (`asyncdsl.multiple_of`, `asyncdsl.check`,
`asyncdsl.check_tile`).

A check's condition always guards the copy it protects (a store skipped, a window moved to the
array's start), so a broken assumption never faults the GPU nor writes outside the copy's slice:
an integer compare per copy with traced starts.  Without ASYNCDSL_DEBUG nothing is reported and a
hint is its operand.  In debug mode hints are checked too, and where a condition fails the
warpgroup's leader claims the kernel's error buffer with a compare-and-swap (the first failure of
the launch wins) and writes its CTA's id there; the runtime reads the buffer after the launch and
raises an AssumptionError naming the check's line.  A tile's check has every thread test the
elements it holds and report for itself (the compare-and-swap still lets one failure win); the
kernel guards what the tile says itself, so without ASYNCDSL_DEBUG the check is nothing.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.tile_registers import tile_of


def _multiple_of(ctx: KernelLowering, op: ir.MultipleOfOp) -> None:
    known = ctx.constant(op.value)
    ctx.bind(op.result, None if known is not None else ctx.reg(op.value), constant=known)
    number = ctx.check_ids.get(op)
    if number is None or known is not None:
        return
    remainder = ctx.b.emit("rem.s32 {}, {}, {};", "b32", ctx.reg(op.value), op.divisor.value.data)
    _report_unless(ctx, ctx.b.emit("setp.eq.s32 {}, {}, 0;", "pred", remainder), number)


def _check(ctx: KernelLowering, op: ir.CheckOp) -> None:
    holds = ctx.reg(op.condition)
    number = ctx.check_ids.get(op)
    if number is not None:
        _report_unless(ctx, holds, number)
    ctx.bind(op.result, holds)


def _check_tile(ctx: KernelLowering, op: ir.CheckTileOp) -> None:
    number = ctx.check_ids.get(op)
    if number is None:
        return
    elements = list(dict.fromkeys(tile_of(ctx, op.condition).flat()))  # a replicated one once
    holds = elements[0]
    for element in elements[1:]:
        holds = ctx.b.emit("and.pred {}, {}, {};", "pred", holds, element)
    _report_unless(ctx, holds, number, every_thread=True)


def _report_unless(ctx: KernelLowering, holds: SSAValue, number: int, every_thread: bool = False) -> None:
    """Report check `number` where `holds` is false: in the warpgroup's leader (a uniform
    condition), or in every thread whose own `holds` is false."""
    b, buffer = ctx.b, ctx.facts.error_buffer
    assert buffer is not None, "checks get numbers in debug mode only, where the kernel has an error buffer"
    failed = b.emit("not.pred {}, {};", "pred", holds)
    if not every_thread:
        b.run("and.pred {}, {}, {};", failed, failed, ctx.facts.leader)
    previous = b.mov("b32", 1)
    b.run(f"atom.global.cas.b32 {{}}, [{{}}], 0, {number};", previous, buffer, guard=failed,
          instr=ptx.MemoryOp)
    first = b.emit("setp.eq.and.u32 {}, {}, 0, {};", "pred", previous, failed)
    for offset, axis in ((4, "x"), (8, "y"), (12, "z")):
        cta = b.emit(f"mov.u32 {{}}, %ctaid.{axis};", "b32")
        b.run(f"st.global.u32 [{{}}+{offset}], {{}};", buffer, cta, guard=first, instr=ptx.MemoryOp)


RULES: Rules = {ir.MultipleOfOp: _multiple_of, ir.CheckOp: _check, ir.CheckTileOp: _check_tile}
