"""Lowering of im2col TMA loads.

The leader thread (narrowed by the user's predicate) arrives with expect-tx of the load's bytes
and issues it. Coordinates and im2col offsets go innermost first, like every TMA coordinate
(docs/hardware.md §3.1, §10.1; CUTLASS orders the offsets the same way, W first); the offsets are 16-bit
registers:

    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], 32768;
    cvt.u16.u32 %rs1, %r12;
    mov.b16 %rs2, 1;
    cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes
        [%r8], [%rd1, {%r5, %r6, %r7, %r4}], [%r9], {%rs2, %rs1};
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.operands import (
    b16_register,
    descriptor_address,
    issuer_predicate,
    tma_coordinates,
)
from asyncdsl.passes.to_ptx.sync import barrier_address


def _im2col_load(ctx: KernelLowering, op: ir.TmaIm2colLoadOp) -> None:
    b = ctx.b
    issuer = issuer_predicate(ctx, op.predicate)
    bar = barrier_address(ctx, op.barriers, op.barrier_index)
    expect = op.expect_tx_bytes.value.data
    if expect:
        b.run("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{}], {};", bar, expect, guard=issuer,
              instr=ptx.MbarrierArriveOp)
    coords = tma_coordinates(ctx, op.coords)
    offsets = [b16_register(ctx, o) for o in reversed(op.offsets)]
    b.run(
        f"cp.async.bulk.tensor.{len(coords)}d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [{}], [{}, {{{}}}], [{}], {{{}}};",
        ctx.reg(op.smem), descriptor_address(ctx, op), coords, bar, offsets, guard=issuer,
        instr=ptx.BulkLoadOp,
    )


RULES: Rules = {ir.TmaIm2colLoadOp: _im2col_load}
