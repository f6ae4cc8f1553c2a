"""Lowering of L2 prefetches: one `cp.async.bulk.prefetch.tensor` by the warpgroup's leader.

The leader (narrowed by the user's predicate) issues it; nothing completes on a barrier or joins
a bulk group, so nothing waits for it. Coordinates go innermost first (ptx-hopper.md fact 3).

    "asyncdsl.tma_prefetch"(%i, %c0) <{descriptor_index = 0 : i64, ...}>

becomes

    @%p1 cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {0, %r7}];
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.ptx_lowering.context import KernelLowering, lowers


@lowers(ir.TmaPrefetchOp)
def _tma_prefetch(ctx: KernelLowering, op: ir.TmaPrefetchOp) -> None:
    b = ctx.b
    issuer = ctx.facts.leader
    if op.predicate is not None:
        issuer = b.emit("and.pred {}, {}, {};", "pred", issuer, ctx.reg(op.predicate))
    descriptor = ctx.facts.descriptor_addresses[op.descriptor_index.value.data]
    coords = [ctx.operand(c) for c in reversed(op.coords)]
    b.run(
        f"cp.async.bulk.prefetch.tensor.{len(coords)}d.L2.global.tile [{{}}, {{{{{{}}}}}}];",
        descriptor, coords, guard=issuer,
    )
