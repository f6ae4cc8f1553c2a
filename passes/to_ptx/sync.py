"""Lowering of mbarriers, fences and barriers.

The warpgroup model: code describes what one warpgroup does. Barrier arrivals and async-copy
issue are done by the warpgroup's leader thread (one arrival = one warpgroup arrival, so a
barrier's init count is the `arrival_count` the user gave); waits are done by every thread.
Before a plain arrive the warpgroup syncs, so that everything its threads did to shared memory
is ordered before the release.  Barrier groups are initialised in the kernel prologue
(`kernel.py`); their op only yields the group's address.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw.limits import BARRIER_BYTES
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.core import allocation_address


def barrier_address(ctx: KernelLowering, barriers: SSAValue, index: SSAValue) -> SSAValue:
    """The shared address of `barriers[index]`."""
    known = ctx.constant(index)
    if known is not None:
        if known == 0:
            return ctx.reg(barriers)
        return ctx.b.emit("add.s32 {}, {}, {};", "b32", ctx.reg(barriers), known * BARRIER_BYTES)
    return ctx.b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", ctx.reg(index), BARRIER_BYTES, ctx.reg(barriers))


def _scope(ctx: KernelLowering) -> str:
    """The scope of a wait's acquire: the cluster's in a kernel with one, where an arrival may
    come from another CTA with a release at cluster scope (`collective.py`), which only an
    acquire at that scope synchronises with."""
    return "cluster" if ctx.facts.cluster_size > 1 else "cta"


def _arrive(ctx: KernelLowering, op: ir.ArriveOp) -> None:
    """An arrival on a barrier of this CTA releases at CTA scope, in a cluster too: only this
    CTA's threads can wait on it (`try_wait` takes a `shared::cta` address), and what the
    warpgroup wrote into a peer CTA reaches that CTA's readers through a later cluster-scope
    release (a collective arrive), cumulative over what its releaser learnt here.  A
    cluster-scope release makes the thread wait until its earlier writes are visible to the
    whole cluster: on every slot of a ring, half the speed of a GEMM (docs/hardware.md §7.4)."""
    b = ctx.b
    address = barrier_address(ctx, op.barriers, op.index)
    if op.unsynced is None:
        b.bar("sync", ctx.facts.named_barrier, 128)
    b.emit(
        f"mbarrier.arrive.release.cta.shared::cta.b64 {{}}, [{{}}], {op.count.value.data};",
        "b64", address, guard=ctx.facts.leader, instr=ptx.MbarrierArriveOp,
    )


def _arrive_expect_tx(ctx: KernelLowering, op: ir.ArriveExpectTxOp) -> None:
    address = barrier_address(ctx, op.barriers, op.index)
    ctx.b.run(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{}], {};", address, op.bytes.value.data,
        guard=ctx.facts.leader, instr=ptx.MbarrierArriveOp,
    )


def _wait(ctx: KernelLowering, op: ir.WaitOp) -> None:
    b = ctx.b
    address = barrier_address(ctx, op.barriers, op.index)
    if op.parity is not None:
        parity = ctx.operand(op.parity)
    else:
        # Tracked phase: bit i of the group's phase register is the parity barrier i waits for
        # next; it flips after every wait.
        bits = ctx.phase_bits[op.barriers]
        known = ctx.constant(op.index)
        if known is not None:
            parity = b.emit("bfe.u32 {}, {}, {}, 1;", "b32", bits, known)
            b.run("xor.b32 {}, {}, {};", bits, bits, 1 << known)
        else:
            position = ctx.reg(op.index)
            parity = b.emit("bfe.u32 {}, {}, {}, 1;", "b32", bits, position)
            flip = b.emit("shl.b32 {}, 1, {};", "b32", position)
            b.run("xor.b32 {}, {}, {};", bits, bits, flip)
    retry = b.new_label("wait")
    b.label(retry)
    done = b.emit(
        f"mbarrier.try_wait.parity.acquire.{_scope(ctx)}.shared::cta.b64 {{}}, [{{}}], {{}};",
        "pred", address, parity, instr=ptx.MbarrierTryWaitOp,
    )
    b.branch(retry, done, negate=True)


def _fence_async(ctx: KernelLowering, op: ir.FenceAsyncSmemOp) -> None:
    ctx.b.append(ptx.ProxyFenceOp("shared::cta"))
    ctx.b.bar("sync", ctx.facts.named_barrier, 128)


def _warpgroup_barrier(ctx: KernelLowering, op) -> None:
    ctx.b.bar("sync", ctx.facts.named_barrier, 128)


def _cta_barrier(ctx: KernelLowering, op) -> None:
    ctx.b.bar("sync", 0)


def _cluster_barrier(ctx: KernelLowering, op) -> None:
    ctx.b.append(ptx.ClusterBarrierOp("arrive"))
    ctx.b.append(ptx.ClusterBarrierOp("wait"))


RULES: Rules = {
    ir.AllocBarriersOp: allocation_address,
    ir.ArriveOp: _arrive,
    ir.ArriveExpectTxOp: _arrive_expect_tx,
    ir.WaitOp: _wait,
    ir.FenceAsyncSmemOp: _fence_async,
    ir.WarpgroupBarrierOp: _warpgroup_barrier,
    ir.CtaBarrierOp: _cta_barrier,
    ir.ClusterBarrierOp: _cluster_barrier,
}
