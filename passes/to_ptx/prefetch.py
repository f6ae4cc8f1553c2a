"""Lowering of L2 prefetches: one `cp.async.bulk.prefetch.tensor` by the warpgroup's leader.

The leader (narrowed by the user's predicate) issues it; nothing completes on a barrier or joins
a bulk group, so nothing waits for it. Coordinates go innermost first (docs/hardware.md §3.1).

    "asyncdsl.tma_prefetch"(%i, %c0) <{descriptor_index = 0 : i64, ...}>

becomes

    @%p1 cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {0, %r7}];
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.operands import descriptor_address, issuer_predicate, tma_coordinates


def _tma_prefetch(ctx: KernelLowering, op: ir.TmaPrefetchOp) -> None:
    issuer = issuer_predicate(ctx, op.predicate)
    coords = tma_coordinates(ctx, op.coords)
    ctx.b.run(
        f"cp.async.bulk.prefetch.tensor.{len(coords)}d.L2.global.tile [{{}}, {{{{{{}}}}}}];",
        descriptor_address(ctx, op), coords, guard=issuer, instr=ptx.BulkPrefetchOp,
    )


RULES: Rules = {ir.TmaPrefetchOp: _tma_prefetch}
