"""Lowering of the cp.async fallback: `asyncdsl.cp_async_load` and `asyncdsl.await_cp_async_copy`.

Every thread of the warpgroup runs one loop over its chunks of the copy (chunk j for j = lane,
lane + 128, ... below the chunk count; lane = %tid.x mod 128), computing each chunk's addresses
as `asyncdsl.hw.cp_async.CpAsyncPlan.chunk_offsets` defines them:

    row = j / chunks_per_row, byte = (j % chunks_per_row) * chunk
    gmem = window + row * row_stride + byte
    smem = buffer + ((row / tile_rows) * tiles_per_row + byte / tile_row) * tile_bytes
                  + (row % tile_rows) * tile_row + byte % tile_row
    smem ^= ((smem >> 7) & (swizzle / 16 - 1)) << 4          (with a swizzle: TMA's, on the
                                                              absolute shared address)

and issues `cp.async.cg` (16-byte chunks, L2 only) or `cp.async.ca` (8 or 4 bytes).
Completion (docs/hardware.md §9): with a barrier, each thread's `cp.async.mbarrier.arrive` (the
form without `.noinc`) makes the barrier track that thread's copies at no net change of its
arrival count, and the leader then arrives once for the warpgroup (after a warpgroup barrier, so
every thread's tracking is in place first): the user's `arrival_count` counts warpgroup copies,
as for TMA.  Without a barrier, every thread commits its copies as a cp.async group;
`await_cp_async_copy(n)` is `cp.async.wait_group n` and a warpgroup barrier.

Example (the loop head of a 16-byte, unswizzled, one-tile copy):

    and.b32 %r9, %r1, 127;
    mov.b32 %r10, %r9;
$L3_cp_async:
    setp.ge.u32 %p2, %r10, 512;
    @%p2 bra $L4_cp_async_end;
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw.cp_async import CpAsyncPlan
from asyncdsl.hw.limits import SWIZZLE_CHUNK, WARPGROUP_THREADS
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.gmem_addresses import wide_product, window_address, window_offset
from asyncdsl.passes.to_ptx.integer_division import unsigned_quotient, unsigned_remainder
from asyncdsl.passes.to_ptx.sync import barrier_address


def _cp_async_load(ctx: KernelLowering, op: ir.CpAsyncLoadOp) -> None:
    b = ctx.b
    plan = op.plan()
    window = window_address(ctx, op.gmem, window_offset(ctx, op.gmem, op.starts))
    buffer = ctx.reg(op.smem)
    lane = b.emit("and.b32 {}, {}, {};", "b32", ctx.facts.tid, WARPGROUP_THREADS - 1)
    chunk = b.mov("b32", lane)
    head, done = b.new_label("cp_async"), b.new_label("cp_async_end")
    b.label(head)
    b.branch(done, b.emit("setp.ge.u32 {}, {}, {};", "pred", chunk, plan.chunks))
    row = unsigned_quotient(b, chunk, plan.chunks_per_row)
    within = unsigned_remainder(b, chunk, plan.chunks_per_row, row)
    byte = b.emit("mul.lo.u32 {}, {}, {};", "b32", within, plan.chunk_bytes)
    row_start = wide_product(ctx, row, plan.row_stride_bytes, signed=False)
    source = b.emit("add.s64 {}, {}, {};", "b64", window, row_start)
    source = b.emit("add.s64 {}, {}, {};", "b64", source, b.emit("cvt.u64.u32 {}, {};", "b64", byte))
    target = b.emit("add.u32 {}, {}, {};", "b32", buffer, _smem_offset(ctx, plan, row, byte))
    if plan.swizzle_bytes:
        bits = b.emit("shr.u32 {}, {}, 7;", "b32", target)
        b.run("and.b32 {}, {}, {};", bits, bits, plan.swizzle_bytes // SWIZZLE_CHUNK - 1)
        b.run("shl.b32 {}, {}, 4;", bits, bits)
        b.run("xor.b32 {}, {}, {};", target, target, bits)
    cache = "cg" if plan.chunk_bytes == 16 else "ca"  # .cg (L2 only) exists for 16 bytes only
    b.run(f"cp.async.{cache}.shared.global [{{}}], [{{}}], {plan.chunk_bytes};", target, source,
          instr=ptx.CpAsyncOp)
    b.run("add.u32 {}, {}, {};", chunk, chunk, WARPGROUP_THREADS)
    b.branch(head)
    b.label(done)
    if op.barriers is not None and op.barrier_index is not None:  # both or neither
        bar = barrier_address(ctx, op.barriers, op.barrier_index)
        b.run("cp.async.mbarrier.arrive.shared::cta.b64 [{}];", bar, instr=ptx.MbarrierArriveOp)
        if op.arrive.value.data:
            scope = "cluster" if ctx.facts.cluster_size > 1 else "cta"
            b.bar("sync", ctx.facts.named_barrier, 128)
            b.run(f"mbarrier.arrive.release.{scope}.shared::cta.b64 _, [{{}}];", bar, guard=ctx.facts.leader,
                  instr=ptx.MbarrierArriveOp)
    elif op.arrive.value.data:
        b.append(ptx.CpAsyncCommitOp())


def _smem_offset(ctx: KernelLowering, plan: CpAsyncPlan, row: SSAValue, byte: SSAValue) -> SSAValue:
    """The unswizzled SMEM offset of (row, byte) in the tiled layout (b32)."""
    b = ctx.b
    if plan.tile_rows == plan.rows and plan.tile_row_bytes == plan.row_bytes:
        return b.emit("mad.lo.u32 {}, {}, {}, {};", "b32", row, plan.row_bytes, byte)
    tile_bytes = plan.tile_rows * plan.tile_row_bytes
    tile_row = unsigned_quotient(b, row, plan.tile_rows)
    tile_col = unsigned_quotient(b, byte, plan.tile_row_bytes)
    tile = b.emit("mad.lo.u32 {}, {}, {}, {};", "b32", tile_row, plan.tiles_per_row, tile_col)
    row_in_tile = unsigned_remainder(b, row, plan.tile_rows, tile_row)
    byte_in_tile = unsigned_remainder(b, byte, plan.tile_row_bytes, tile_col)
    offset = b.emit("mad.lo.u32 {}, {}, {}, {};", "b32", row_in_tile, plan.tile_row_bytes, byte_in_tile)
    return b.emit("mad.lo.u32 {}, {}, {}, {};", "b32", tile, tile_bytes, offset)


def _await_cp_async(ctx: KernelLowering, op: ir.AwaitCpAsyncCopyOp) -> None:
    ctx.b.append(ptx.CpAsyncWaitOp(op.allow_groups.value.data))
    ctx.b.bar("sync", ctx.facts.named_barrier, 128)


RULES: Rules = {ir.CpAsyncLoadOp: _cp_async_load, ir.AwaitCpAsyncCopyOp: _await_cp_async}
