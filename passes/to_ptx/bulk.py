"""Lowering of contiguous bulk copies (`asyncdsl.bulk_load` / `asyncdsl.bulk_store`) to
non-tensor `cp.async.bulk` (docs/hardware.md §8), issued by the warpgroup's leader thread.

The byte count is the SMEM buffer's, or under oob="undefined" what is left of the array from the
window's start, computed at run time when a start is traced as the reference does it:
`min(transfer, array - min(offset, array))` in unsigned 64-bit arithmetic, so a negative offset
(huge as unsigned) leaves nothing.  An empty copy is not issued.  A load that arrives announces
the bytes it moves; one that does not arrive (the user announced the whole transfer) completes
the missing bytes on the barrier itself with `mbarrier.complete_tx`, so the wait never hangs.

Example (a load of 4096 bytes at a traced offset %rd3 of a 65536-byte array, arriving):

    min.u64 %rd4, %rd3, 65536;
    sub.s64 %rd5, 65536, %rd4;
    min.u64 %rd6, %rd5, 4096;
    cvt.u32.u64 %r9, %rd6;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], %r9;
    setp.ne.u32 %p2, %r9, 0;
    and.pred %p3, %p1, %p2;
    @%p3 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r7], [%rd7], %r9, [%r8];
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw import gmem_runs
from asyncdsl.hw.bulk import clamped_bytes
from asyncdsl.hw.options import Oob
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.gmem_addresses import window_address, window_offset
from asyncdsl.passes.to_ptx.operands import issuer_predicate
from asyncdsl.passes.to_ptx.sync import barrier_address


def _moved_bytes(ctx: KernelLowering, op, offset: int | SSAValue) -> int | SSAValue:
    """The bytes the copy moves: an int, or a b32 register when clamped at a traced offset."""
    transfer = op.transfer_bytes
    if op.oob.data == Oob.PROMISE_IN_BOUNDS:
        return transfer
    array = gmem_runs.array_bytes(ir.shape_of(op.gmem), dtypes.from_mlir(op.gmem.type.element_type))
    if isinstance(offset, int):
        return clamped_bytes(offset, transfer, array)
    b = ctx.b
    inside = b.emit("min.u64 {}, {}, {};", "b64", offset, array)
    left = b.emit("sub.s64 {}, {}, {};", "b64", array, inside)
    moved = b.emit("min.u64 {}, {}, {};", "b64", left, transfer)
    return b.emit("cvt.u32.u64 {}, {};", "b32", moved)


def _when_nonempty(ctx: KernelLowering, issuer: SSAValue, moved: int | SSAValue) -> SSAValue | None:
    """The guard of the copy instruction: the issuer, when there is something to move."""
    if isinstance(moved, int):
        return issuer if moved else None
    nonempty = ctx.b.emit("setp.ne.u32 {}, {}, 0;", "pred", moved)
    return ctx.b.emit("and.pred {}, {}, {};", "pred", issuer, nonempty)


def _bulk_load(ctx: KernelLowering, op: ir.BulkLoadOp) -> None:
    b = ctx.b
    issuer = issuer_predicate(ctx, op.predicate)
    bar = barrier_address(ctx, op.barriers, op.barrier_index)
    offset = window_offset(ctx, op.gmem, op.starts)
    moved = _moved_bytes(ctx, op, offset)
    transfer = op.transfer_bytes
    if op.arrive.value.data:
        b.run("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{}], {};", bar, moved, guard=issuer,
              instr=ptx.MbarrierArriveOp)
    elif op.oob.data == Oob.UNDEFINED:
        missing: SSAValue | int
        if isinstance(moved, int):
            missing = transfer - moved
        else:
            missing = b.emit("sub.s32 {}, {}, {};", "b32", transfer, moved)
        if not isinstance(missing, int) or missing:
            b.run("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [{}], {};", bar, missing, guard=issuer,
                  instr=ptx.MbarrierArriveOp)
    copier = _when_nonempty(ctx, issuer, moved)
    if copier is not None:
        b.run(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{}], [{}], {}, [{}];",
            ctx.reg(op.smem), window_address(ctx, op.gmem, offset), moved, bar, guard=copier,
            instr=ptx.BulkLoadOp,
        )


def _bulk_store(ctx: KernelLowering, op: ir.BulkStoreOp) -> None:
    b = ctx.b
    issuer = issuer_predicate(ctx, op.predicate)
    offset = window_offset(ctx, op.gmem, op.starts)
    moved = _moved_bytes(ctx, op, offset)
    copier = _when_nonempty(ctx, issuer, moved)
    if copier is not None:
        b.run(
            "cp.async.bulk.global.shared::cta.bulk_group [{}], [{}], {};",
            window_address(ctx, op.gmem, offset), ctx.reg(op.smem), moved, guard=copier,
            instr=ptx.BulkStoreOp,
        )
    if op.commit.value.data:
        # Committed even where nothing was stored (an empty group), so that await_async_copy(n)
        # counts the same groups in every CTA, as for TMA stores.
        b.append(ptx.BulkCommitOp(ctx.facts.leader))


RULES: Rules = {ir.BulkLoadOp: _bulk_load, ir.BulkStoreOp: _bulk_store}
