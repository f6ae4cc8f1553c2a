"""Operands that the lowerings of the single-thread copy instructions (TMA loads, stores,
prefetches, im2col, gather4/scatter4, bulk copies) build alike.

- The issuer: the warpgroup's leader thread, narrowed by the user's predicate where the op has one.
- TMA coordinates go to the instruction innermost first, the reverse of the IR's array order
  (docs/hardware.md §3.1); the descriptor is the address the kernel prologue computed for its slot.
- 16-bit operands (im2col offsets, multicast masks) are an immediate moved into a b16 register or
  the low half of the value's b32 register.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl.dialects.copy_bases import DescriptorSlot
from asyncdsl.passes.to_ptx.context import KernelLowering


def issuer_predicate(ctx: KernelLowering, predicate: SSAValue | None) -> SSAValue:
    """The predicate of the thread that issues: the leader, narrowed by the user's predicate."""
    if predicate is None or ctx.constant(predicate) == 1:
        return ctx.facts.leader
    return ctx.b.emit("and.pred {}, {}, {};", "pred", ctx.facts.leader, ctx.reg(predicate))


def tma_coordinates(ctx: KernelLowering, coords) -> list:
    return [ctx.operand(c) for c in reversed(coords)]


def descriptor_address(ctx: KernelLowering, op: DescriptorSlot) -> SSAValue:
    assert op.descriptor_index is not None, "allocate-descriptor-scratch numbers every descriptor"
    return ctx.facts.descriptor_addresses[op.descriptor_index.value.data]


def b16_register(ctx: KernelLowering, value: SSAValue) -> SSAValue:
    known = ctx.constant(value)
    if known is not None:
        return ctx.b.emit("mov.b16 {}, {};", "b16", known)
    return ctx.b.emit("cvt.u16.u32 {}, {};", "b16", ctx.reg(value))
