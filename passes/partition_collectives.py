"""`partition-collectives`: split collective loads across the CTAs of a cluster.

Expects: TMA loads resolved (`resolve-transforms`); a load with `collective` (cluster dims, which
the kernel's `asyncdsl.cluster` declares) moves the whole slice in every CTA of its group, except
a partitioned one, which resolution already cut to this CTA's half before the transforms.
Guarantees: no load or arrive carries `collective` any more, or a CopyError at the copy's line says why
it cannot be split (no dim divides, a part would not start 128-byte aligned). Each collective
load (multicast, or `partition = "replicated"`) becomes the load of this CTA's part of the
transformed box (as `asyncdsl.hw.collective.split_box` cuts it): coordinates offset by the
part's position, which is computed from `asyncdsl.cluster_cta_id` along the collective dims; the
SMEM destination an `asyncdsl.smem_slice` at the part's offset (128-byte aligned, as TMA needs;
swizzled rows are never cut, and the swizzle pattern follows the absolute address, so a part
lands exactly where the whole box would put it); the descriptor's box the part's box; and a
`multicast_mask`, the `asyncdsl.cluster_collective_mask` of its group. A multicast load keeps its
expect-tx of the whole slice: each CTA's barrier receives every part. A leader-tracked load
(`partition`) arrives on the barrier only in the pair's CTA at x = 0, in an `scf.if`, with every
byte the pair's loads complete there (the halves of a partitioned load; both copies of a
replicated one), and its own op expects nothing.  An arrive with `collective`
(`bar.arrive(collective="x")`) becomes `asyncdsl.cluster_arrive` over the same group: one arrival
on the barrier at that offset in every CTA the group's copies multicast to.

Example: `cluster=(2, 2, 1)`, a 64x64xf32 box multicast along x

    "asyncdsl.tma_load"(%buf, %row, %c0, %bars, %c0) <{collective = ["x"], descriptor =
        #asyncdsl.tma_desc<..., box = [64, 64], ...>, expect_tx_bytes = 16384 : i64}>

becomes

    %x = "asyncdsl.cluster_cta_id"() <{axis = 0 : i64}> : () -> index
    %rows = arith.muli %x, %c32 : index
    %bytes = arith.muli %x, %c8192 : index
    %row2 = arith.addi %row, %rows : index
    %part = "asyncdsl.smem_slice"(%buf, %bytes) : (memref<64x64xf32, #asyncdsl.smem>, index)
        -> memref<32x64xf32, #asyncdsl.smem>
    %mask = "asyncdsl.cluster_collective_mask"() <{collective = ["x"], cluster = array<i64: 2, 2, 1>}>
    "asyncdsl.tma_load"(%part, %row2, %c0, %bars, %c0, %mask) <{descriptor =
        #asyncdsl.tma_desc<..., box = [32, 64], ...>, expect_tx_bytes = 16384 : i64}>
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.ir_utils import constant_value
from asyncdsl.dialects.option_attrs import eviction_of
from asyncdsl.errors import AsyncDSLError, CopyError
from asyncdsl.hw.collective import CollectiveGroup, collective_group, split_box
from asyncdsl.hw.limits import TMA_SMEM_ALIGNMENT
from asyncdsl.hw.options import Partition
from asyncdsl.ir_locations import from_ir_location
from asyncdsl.passes.resolve.collective import cluster_cta_ids
from asyncdsl.passes.resolve.index_builder import IndexBuilder


@dataclass(frozen=True)
class PartitionCollectives(ModulePass):
    name = "partition-collectives"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in attrs.kernels(op):
            cluster = attrs.dims(fn, attrs.CLUSTER)
            for load in [o for o in fn.walk() if isinstance(o, ir.TmaLoadOp) and o.collective is not None]:
                try:
                    _partition(load, collective_group(cluster, load.cluster_dims))
                except AsyncDSLError as error:
                    raise error.at(from_ir_location(load)) from None
            for arrive in [o for o in fn.walk() if isinstance(o, ir.ArriveOp) and o.collective is not None]:
                try:
                    _cluster_arrive(arrive, collective_group(cluster, arrive.cluster_dims))
                except AsyncDSLError as error:
                    raise error.at(from_ir_location(arrive)) from None


def _cluster_arrive(arrive: ir.ArriveOp, group: CollectiveGroup) -> None:
    """An arrival on the barrier in every CTA of the group; a group of one CTA (dims along which
    the cluster has one CTA drop out, as for copies) arrives here only."""
    new: ir.ClusterArriveOp | ir.ArriveOp
    if group.size > 1:
        new = ir.ClusterArriveOp(arrive.barriers, arrive.index, arrive.count.value.data, group.dims,
                                 group.cluster, sync=arrive.unsynced is None)
    else:
        new = ir.ArriveOp(arrive.barriers, arrive.index, arrive.count.value.data,
                          sync=arrive.unsynced is None)
    new.location = arrive.location
    Rewriter.replace_op(arrive, new, new_results=[])


def _partition(load: ir.TmaLoadOp, group: CollectiveGroup) -> None:
    builder = IndexBuilder(load)
    index = group.index(cluster_cta_ids(builder, group))
    partition = load.partition.data if load.partition is not None else None
    if partition is not None:
        _leader_arrives(load, builder, index, load.expect_tx_bytes.value.data * group.size)
    if partition == Partition.PARTITIONED:  # already this CTA's half (resolve/collective.py)
        _replace(load, load.smem, list(load.coords), load.descriptor, 0, None, partition)
        return
    spec = load.descriptor.spec()
    swizzled = spec.swizzle_bytes > 0
    _check_part_alignment(spec.box_dims, group.size, spec.element_bytes, swizzled)
    part = split_box(spec.box_dims, group.size, index, swizzled=swizzled, element_bytes=spec.element_bytes)
    coords = []
    for coord, offset in zip(load.coords, part.offsets):
        if isinstance(offset, int) and offset == 0:
            coords.append(coord)
            continue
        known = constant_value(coord)
        coords.append(builder.value((known if known is not None else builder.wrap(coord)) + offset))
    shape = _smem_shape(load.smem, part.box, spec)
    smem = builder.emit(ir.SmemSliceOp(load.smem, builder.value(part.smem_offset), shape))
    mask = builder.emit(ir.ClusterCollectiveMaskOp(group.dims, group.cluster))
    descriptor = TmaDescriptorAttr.from_spec(dataclasses.replace(spec, box_dims=part.box))
    # Every CTA of the group expects the whole slice: each part lands in every barrier.
    expect = 0 if partition == Partition.REPLICATED else load.expect_tx_bytes.value.data
    _replace(load, smem, coords, descriptor, expect, mask, partition)


def _smem_shape(smem, box, spec) -> tuple[int, ...]:
    """The part's shape in the SMEM buffer's elements (a packed sub-byte buffer holds several
    per byte element of the descriptor)."""
    per_element = spec.element_bytes * 8 // ir.element_bits(smem.type)
    return (*box[:-1], box[-1] * per_element)


def _check_part_alignment(box, group_size: int, element_bytes: int, swizzled: bool) -> None:
    for position in range(group_size):
        part = split_box(box, group_size, position, swizzled=swizzled, element_bytes=element_bytes)
        offset = part.smem_offset
        if offset % TMA_SMEM_ALIGNMENT:
            raise CopyError(
                f"the collective splits the box {tuple(box)} among {group_size} CTAs, so CTA "
                f"{position} of the group would land its part at byte {offset} of the SMEM "
                f"buffer; TMA destinations must be {TMA_SMEM_ALIGNMENT}-byte aligned (use a box "
                "whose leading dims hold larger parts)"
            )


def _leader_arrives(load: ir.TmaLoadOp, builder: IndexBuilder, index, num_bytes: int) -> None:
    """Only the pair's CTA at x = 0 arrives, expecting `num_bytes` (nothing with arrive=False)."""
    if not num_bytes:
        return
    leader = builder.emit(arith.CmpiOp(builder.value(index), builder.value(0), "eq"))
    if load.predicate is not None:
        leader = builder.emit(arith.AndIOp(load.predicate, leader))
    arrive = ir.ArriveExpectTxOp(load.barriers, load.barrier_index, num_bytes)
    done = scf.YieldOp()
    for op in (arrive, done):
        op.location = load.location
    branch = scf.IfOp(leader, [], Region(Block([arrive, done])))
    branch.location = load.location
    Rewriter.insert_op(branch, InsertPoint.before(load))


def _replace(load: ir.TmaLoadOp, smem, coords, descriptor, expect: int, mask, partition) -> None:
    new = ir.TmaLoadOp(
        smem, coords, load.barriers, load.barrier_index, descriptor, expect,
        predicate=load.predicate, multicast_mask=mask, partition=partition,
        eviction=eviction_of(load),
    )
    new.location = load.location
    Rewriter.replace_op(load, new, new_results=[])
