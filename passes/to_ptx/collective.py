"""Lowering of what `partition-collectives` builds: multicast masks, parts of SMEM buffers, and
the operands of multicast and `cta_group::2` TMA loads.

The mask is `base << shift`: `base` has a bit per CTA of the group at coordinate 0 along the
other cluster dims (a constant), `shift` is this CTA's rank contribution along those dims, read
from `%cluster_ctaid` (ranks are `x + y * cx + z * cx * cy`, as `%cluster_ctarank`). The TMA
takes it as a 16-bit register or an immediate (docs/hardware.md §7.1):

    mov.u32 %r7, %cluster_ctaid.y;
    mul.lo.s32 %r8, %r7, 2;
    mov.b32 %r9, 3;
    shl.b32 %r10, %r9, %r8;
    cvt.u16.u32 %rs1, %r10;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
        [%r11], [%rd1, {%r3, %r12}], [%r5], %rs1;

A leader-tracked load (sm_100a) names the barrier of the pair's CTA at x = 0 through `mapa`, and
a partitioned one writes only its own CTA (`.shared::cta`, PTX 8.6):

    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes.cta_group::2
        [%r6], [%rd1, {%r3, %r4}], [%r9];

An arrival on a barrier in every CTA of the group (`bar.arrive(collective=...)`) maps the
barrier's address into each target CTA and arrives there (docs/hardware.md §7.4):

    mapa.shared::cluster.u32 %r12, %r9, 1;
    @%p1 mbarrier.arrive.release.cta.shared::cluster.b64 _, [%r12], 1;

(at cluster scope where the kernel's threads load or store other CTAs' shared memory).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw.collective import CollectiveGroup
from asyncdsl.hw.options import Partition
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.operands import b16_register
from asyncdsl.passes.to_ptx.sync import barrier_address

_AXES = "xyz"


def _group_shift(ctx: KernelLowering, group: CollectiveGroup):
    """The rank of the first CTA of this CTA's group (its rank contribution along the other
    cluster dims), or None when that is 0 in every CTA."""
    b = ctx.b
    strides = group.rank_strides
    shift = None
    for axis in group.shift_axes:
        cta = b.emit(f"mov.u32 {{}}, %cluster_ctaid.{_AXES[axis]};", "b32")
        if shift is None:
            shift = cta if strides[axis] == 1 else b.emit("mul.lo.s32 {}, {}, {};", "b32", cta, strides[axis])
        else:
            shift = b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", cta, strides[axis], shift)
    return shift


def _collective_mask(ctx: KernelLowering, op: ir.ClusterCollectiveMaskOp) -> None:
    b = ctx.b
    group = op.group()
    shift = _group_shift(ctx, group)
    if shift is None:
        ctx.bind(op.result, b.mov("b32", group.base_mask), constant=group.base_mask)
        return
    ctx.bind(op.result, b.emit("shl.b32 {}, {}, {};", "b32", b.mov("b32", group.base_mask), shift))


def _threads_reach_peers(ctx: KernelLowering) -> bool:
    """Whether the kernel's threads load or store another CTA's shared memory (a register tile
    `in cta %r`): only then can a peer read, through the generic proxy, what they wrote."""
    found = ctx.analyses.get(_threads_reach_peers)
    if found is None:
        found = any(access.cta is not None for access in ctx.ops_of(ir.LoadSmemOp, ir.StoreSmemOp))
        ctx.analyses[_threads_reach_peers] = found
    return bool(found)


def _cluster_arrive(ctx: KernelLowering, op: ir.ClusterArriveOp) -> None:
    """The leader arrives on the barrier's copy in each CTA of the group (its own included): the
    barrier's shared::cta address mapped to each target rank's shared::cluster window (`mapa`),
    then a remote arrive.  As for a plain arrive, the warpgroup syncs first, so that what its
    threads did is ordered before the release.

    The release is at cluster scope only where it has something to publish to the other CTAs:
    where the kernel's threads reach other CTAs' shared memory (`_threads_reach_peers`), a synced
    arrival publishes what they wrote.  Elsewhere a peer sees this CTA's shared memory only
    through its copy engine writing into it (multicast), and the arrival only says that this
    CTA's reads of a slot are over (the tensor cores', ended by `wgmma_wait`, or the threads'
    own, ordered by the sync); it releases at CTA scope, the instruction's default, as CUTLASS's
    cluster pipelines do.  A cluster-scope release makes the thread wait until its earlier
    writes are visible to the whole cluster, which halved the speed of the 2-CTA GEMM on the
    H200 (docs/hardware.md §7.4)."""
    b = ctx.b
    group = op.group()
    address = barrier_address(ctx, op.barriers, op.index)
    scope = "cluster" if op.unsynced is None and _threads_reach_peers(ctx) else "cta"
    if op.unsynced is None:
        b.bar("sync", ctx.facts.named_barrier, 128)
    shift = _group_shift(ctx, group)
    leader = ctx.facts.leader
    count = op.count.value.data
    for rank in range(group.cluster[0] * group.cluster[1] * group.cluster[2]):
        if not group.base_mask >> rank & 1:
            continue
        target: SSAValue | int
        if shift is None:
            target = rank
        else:
            target = shift if rank == 0 else b.emit("add.s32 {}, {}, {};", "b32", shift, rank)
        remote = b.emit("mapa.shared::cluster.u32 {}, {}, {};", "b32", address, target, instr=ptx.InstrOp)
        b.run(f"mbarrier.arrive.release.{scope}.shared::cluster.b64 _, [{{}}], {count};",
              remote, guard=leader, instr=ptx.MbarrierArriveOp)


def _smem_slice(ctx: KernelLowering, op: ir.SmemSliceOp) -> None:
    ctx.bind(op.result, ctx.b.emit("add.s32 {}, {}, {};", "b32", ctx.reg(op.source), ctx.operand(op.offset)))


def collective_load_form(ctx: KernelLowering, op: ir.TmaLoadOp,
                         barrier: SSAValue) -> tuple[str, str, SSAValue, list[SSAValue]]:
    """(destination state space, instruction modifiers, barrier operand, trailing operands) of a
    multicast or leader-tracked TMA load whose own CTA's barrier is at `barrier`."""
    b = ctx.b
    space, modifiers = "shared::cluster", ""
    extra: list[SSAValue] = []
    if op.multicast_mask is not None:
        modifiers, extra = ".multicast::cluster", [b16_register(ctx, op.multicast_mask)]
    if op.partition is not None:
        if op.partition.data == Partition.PARTITIONED:
            space = "shared::cta"
        modifiers += ".cta_group::2"
        # The pair's bytes complete on the barrier of its CTA at x = 0 (rank - x).
        rank = b.emit("mov.u32 {}, %cluster_ctarank;", "b32")
        x = b.emit("mov.u32 {}, %cluster_ctaid.x;", "b32")
        leader = b.emit("sub.s32 {}, {}, {};", "b32", rank, x)
        barrier = b.emit("mapa.shared::cluster.u32 {}, {}, {};", "b32", barrier, leader, instr=ptx.InstrOp)
    return space, modifiers, barrier, extra


RULES: Rules = {
    ir.ClusterCollectiveMaskOp: _collective_mask,
    ir.ClusterArriveOp: _cluster_arrive,
    ir.SmemSliceOp: _smem_slice,
}
