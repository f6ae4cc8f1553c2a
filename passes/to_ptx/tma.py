"""Lowering of TMA tensor loads and stores (and reductions).

The leader thread of the warpgroup issues every copy (and its expect-tx arrival); coordinates go
innermost first (`operands`).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw import reduction
from asyncdsl.passes.to_ptx.collective import collective_load_form
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.distributed import peer_descriptor_address
from asyncdsl.passes.to_ptx.operands import descriptor_address, issuer_predicate, tma_coordinates
from asyncdsl.passes.to_ptx.sync import barrier_address


def _descriptor(ctx: KernelLowering, op):
    return descriptor_address(ctx, op) if op.peer is None else peer_descriptor_address(ctx, op)


def _tma_load(ctx: KernelLowering, op: ir.TmaLoadOp) -> None:
    b = ctx.b
    issuer = issuer_predicate(ctx, op.predicate)
    bar = barrier_address(ctx, op.barriers, op.barrier_index)
    rank = len(op.coords)
    expect = op.expect_tx_bytes.value.data
    if expect:
        b.run("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{}], {};", bar, expect, guard=issuer,
              instr=ptx.MbarrierArriveOp)
    space, suffix = "shared::cluster", ""
    extra: list[SSAValue] = []
    if op.multicast_mask is not None or op.partition is not None:
        space, suffix, bar, extra = collective_load_form(ctx, op, bar)
    if op.eviction is not None:  # the cache policy operand comes last (PTX ISA, cp.async.bulk.tensor)
        suffix += ".L2::cache_hint"
        extra = [*extra, b.emit(f"createpolicy.fractional.L2::{op.eviction.data}.b64 {{}}, 1.0;", "b64",
                                   instr=ptx.InstrOp)]
    template = (
        f"cp.async.bulk.tensor.{rank}d.{space}.global.tile.mbarrier::complete_tx::bytes{suffix}"
        " [{}], [{}, {{{}}}], [{}]" + ", {}" * len(extra) + ";"
    )
    b.run(
        template, ctx.reg(op.smem), _descriptor(ctx, op), tma_coordinates(ctx, op.coords), bar, *extra,
        guard=issuer, instr=ptx.BulkLoadOp,
    )


def _tma_store(ctx: KernelLowering, op: ir.TmaStoreOp) -> None:
    b = ctx.b
    issuer = issuer_predicate(ctx, op.predicate)
    rank = len(op.coords)
    if op.reduction is not None:
        # The element type (and with it signedness) lives in the descriptor; PTX names the op only.
        ptx_op = reduction.PTX_OP[op.reduction.data]
        head = f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{ptx_op}.tile.bulk_group"
    else:
        head = f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group"
    b.run(
        head + " [{}, {{{}}}], [{}];", _descriptor(ctx, op), tma_coordinates(ctx, op.coords),
        ctx.reg(op.smem), guard=issuer, instr=ptx.BulkStoreOp,
    )
    if op.commit.value.data:
        # Committed even where the user's predicate skipped the copy (an empty group, as in the
        # reference), so that await_async_copy(n) counts the same groups in every CTA.
        b.append(ptx.BulkCommitOp(ctx.facts.leader))


RULES: Rules = {ir.TmaLoadOp: _tma_load, ir.TmaStoreOp: _tma_store}
