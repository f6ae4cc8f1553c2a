"""Lowering of what the user-level copy leaves after resolution: waiting for bulk groups."""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules


def _await(ctx: KernelLowering, op: ir.AwaitAsyncCopyOp) -> None:
    read = bool(op.read_only.value.data)
    ctx.b.append(ptx.BulkWaitOp(op.allow_groups.value.data, read=read, guard=ctx.facts.leader))
    ctx.b.bar("sync", ctx.facts.named_barrier, 128)


RULES: Rules = {ir.AwaitAsyncCopyOp: _await}
