"""Lowering of Blackwell row gathers and scatters (`.tile::gather4` / `.tile::scatter4`).

The leader thread reads the instruction's four row indices from the SMEM index buffer (zero
extended into 32-bit registers) and issues it; the coordinates are the window's first column
(dim 0 of the descriptor, innermost) followed by the four rows. Each instruction's SMEM rows
start `first_row` rows into the buffer. A scatter that closes the copy commits the bulk group.

    ld.shared.u32 %r20, [%r7+16];    // rows[4] .. rows[7]
    ...
    cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes
        [%r24], [%rd1, {%r5, %r20, %r21, %r22, %r23}], [%r9];
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw.limits import GATHER4_ROWS
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.operands import descriptor_address
from asyncdsl.passes.to_ptx.sync import barrier_address


def _operands(ctx: KernelLowering, op: ir.TmaGather4Op | ir.TmaScatter4Op):
    """(SMEM address of the instruction's rows, descriptor, coordinates {column, 4 rows})."""
    b, leader = ctx.b, ctx.facts.leader
    index_bits = ir.element_bits(op.rows.type)
    first = op.first_row.value.data
    rows = [
        b.emit(f"ld.shared.u{index_bits} {{}}, [{{}}+{(first + i) * index_bits // 8}];", "b32",
               ctx.reg(op.rows), guard=leader, instr=ptx.MemoryOp)
        for i in range(GATHER4_ROWS)
    ]
    row_bytes = ir.shape_of(op.smem)[1] * ir.element_bits(op.smem.type) // 8
    smem = ctx.reg(op.smem)
    if first:
        smem = b.emit("add.s32 {}, {}, {};", "b32", smem, first * row_bytes)
    return smem, descriptor_address(ctx, op), [ctx.operand(op.column), *rows]


def _gather4(ctx: KernelLowering, op: ir.TmaGather4Op) -> None:
    smem, descriptor, coords = _operands(ctx, op)
    bar = barrier_address(ctx, op.barriers, op.barrier_index)
    ctx.b.run(
        "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes"
        " [{}], [{}, {{{}}}], [{}];",
        smem, descriptor, coords, bar, guard=ctx.facts.leader, instr=ptx.BulkLoadOp,
    )


def _scatter4(ctx: KernelLowering, op: ir.TmaScatter4Op) -> None:
    smem, descriptor, coords = _operands(ctx, op)
    ctx.b.run(
        "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group [{}, {{{}}}], [{}];",
        descriptor, coords, smem, guard=ctx.facts.leader, instr=ptx.BulkStoreOp,
    )
    if op.commit.value.data:
        ctx.b.append(ptx.BulkCommitOp(ctx.facts.leader))


RULES: Rules = {ir.TmaGather4Op: _gather4, ir.TmaScatter4Op: _scatter4}
