"""Lowering of the core ops: program, cluster and warpgroup ids, and shared-memory addresses."""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules

_SPECIAL = {
    ir.ProgramIdOp: "%ctaid",
    ir.NumProgramsOp: "%nctaid",
    ir.ClusterCtaIdOp: "%cluster_ctaid",
    ir.ClusterIdOp: "%clusterid",
}


def _special_register(ctx: KernelLowering, op) -> None:
    axis = "xyz"[op.axis.value.data]
    ctx.bind(op.result, ctx.b.emit(f"mov.u32 {{}}, {_SPECIAL[type(op)]}.{axis};", "b32"))


def _warpgroup(ctx: KernelLowering, op: ir.WarpgroupIdxOp) -> None:
    ctx.bind(op.result, ctx.facts.warpgroup)


def allocation_address(ctx: KernelLowering, op) -> None:
    # Barrier initialisation happens in the prologue (kernel.py); here only the address.
    offset = op.offset.value.data
    ctx.bind(op.result, ctx.b.emit("add.s32 {}, {}, {};", "b32", ctx.facts.smem_base, offset))


def _smem_view(ctx: KernelLowering, op: ir.SmemViewOp) -> None:
    shape = ir.shape_of(op.source)
    element_bits = ir.element_bits(op.source.type)
    address = ctx.reg(op.source)
    for position, index in enumerate(op.indices):
        stride_bits = element_bits
        for d in shape[position + 1:]:
            stride_bits *= d
        stride_bytes = stride_bits // 8  # whole sub-buffers: packed 4-bit types still fill bytes
        known = ctx.constant(index)
        if known is not None:
            address = ctx.b.emit("add.s32 {}, {}, {};", "b32", address, known * stride_bytes)
        else:
            address = ctx.b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", ctx.reg(index), stride_bytes, address)
    ctx.bind(op.result, address)


def _smem_window(ctx: KernelLowering, op: ir.SmemWindowOp) -> None:
    known = ctx.constant(op.start)
    if known == 0:
        address = ctx.reg(op.source)
    elif known is not None:
        address = ctx.b.emit("add.s32 {}, {}, {};", "b32", ctx.reg(op.source), known * op.unit_bytes)
    else:
        address = ctx.b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", ctx.reg(op.start), op.unit_bytes,
                             ctx.reg(op.source))
    ctx.bind(op.result, address)


RULES: Rules = {
    **{op_class: _special_register for op_class in _SPECIAL},
    ir.WarpgroupIdxOp: _warpgroup,
    ir.AllocSmemOp: allocation_address,
    ir.SmemViewOp: _smem_view,
    ir.SmemWindowOp: _smem_window,
}
