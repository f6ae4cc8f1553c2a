"""Lowering of what the user-level copy leaves after resolution: waiting for bulk groups."""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules


def _await(ctx: KernelLowering, op: ir.AwaitAsyncCopyOp) -> None:
    read = ".read" if op.read_only.value.data else ""
    ctx.b.run(f"cp.async.bulk.wait_group{read} {op.allow_groups.value.data};", guard=ctx.facts.leader)
    ctx.b.run("bar.sync {}, 128;", ctx.facts.named_barrier)


RULES: Rules = {ir.AwaitAsyncCopyOp: _await}
