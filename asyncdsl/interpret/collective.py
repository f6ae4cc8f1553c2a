"""Collective loads in the interpreter: multicast masks, parts of SMEM buffers, and TMA loads
that land in several CTAs of a cluster or complete on another CTA's barrier.

A multicast load (`multicast_mask`) reads its box once and, for every CTA of the mask, writes it
at the same SMEM offset and completes its bytes on that CTA's barrier at the same offset, as the
hardware does (docs/hardware.md §7.2). A leader-tracked load (`partition`, Blackwell
`cta_group::2`) completes every destination's bytes on the barrier of the pair's CTA at x = 0
instead; a partitioned one writes only its own CTA. Each destination's race log records the write
with the barrier phase that completes it, so a warpgroup of any destination CTA that reads those
bytes must know that phase (its own wait, or a cluster barrier after one).

An arrival with `collective` (`asyncdsl.cluster_arrive`) counts on the barrier at the same offset
in every CTA of the group, as the lowering's remote `mbarrier.arrive` through `mapa` does.

`CollectiveFunctions` implements the ops `partition-collectives` builds; the collective forms of
`tma_load` are `tma.TmaFunctions.run_tma_load`'s, with the destinations and tracker named here.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.interpreters.builtin import scalar_attr

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError, OutOfBoundsError
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import SmemBuffer
from asyncdsl.interpret.state import Cta
from asyncdsl.interpret.sync import synced


@register_impls
class CollectiveFunctions(WarpgroupFunctions):
    """The ops `partition-collectives` builds: multicast masks and parts of SMEM buffers."""

    @impl(ir.ClusterCollectiveMaskOp)
    def run_cluster_collective_mask(
        self, interpreter: Interpreter, op: ir.ClusterCollectiveMaskOp, args: PythonValues
    ):
        mask = op.group().mask(self.warpgroup.cta.cluster_cta_id)
        return (scalar_attr(mask, IndexType(), interpreter.index_bitwidth),)

    @impl(ir.ClusterArriveOp)
    @diagnosed
    def run_cluster_arrive(self, interpreter: Interpreter, op: ir.ClusterArriveOp, args: PythonValues):
        # The arrival lands on the barrier at the same offset in each CTA of the group, with
        # what this warpgroup knows: that its reads of the slot are over, and (a kernel whose
        # threads reach other CTAs' buffers releases at cluster scope then) what it wrote.
        synced(self.warpgroup, op)
        group, index = args
        address = group.address(index.value.data)
        cta = self.warpgroup.cta
        for target in multicast_destinations(cta, op.group().mask(cta.cluster_cta_id)):
            target.mbarriers[address].arrive(
                op.count.value.data, self.warpgroup.clock,
                f"the collective arrive at {origin(op)} in {self.warpgroup.label}")
        return ()

    @impl(ir.SmemSliceOp)
    @diagnosed
    def run_smem_slice(self, interpreter: Interpreter, op: ir.SmemSliceOp, args: PythonValues):
        source, offset = args
        start = source.offset + offset.value.data
        part = SmemBuffer.of_type(start, op.result.type, source.origin)
        if offset.value.data < 0 or part.offset + part.nbytes > source.offset + source.nbytes:
            raise OutOfBoundsError(
                f"the part at byte {offset.value.data} of {part.nbytes} bytes lies outside the "
                f"{source.nbytes}-byte shared-memory buffer allocated at {source.origin}"
            )
        return (part,)


def multicast_destinations(cta: Cta, mask: int) -> list[Cta]:
    """The CTAs of `cta`'s cluster named by the bits of a multicast mask."""
    cluster = cta.cluster_ctas
    if not 0 < mask < 1 << len(cluster):
        raise InterpretError(
            f"multicast mask {mask:#x} names no CTA or a CTA rank beyond the {len(cluster)} of the cluster"
        )
    return [cluster[rank] for rank in range(len(cluster)) if mask >> rank & 1]


def pair_leader(cta: Cta) -> Cta:
    """The CTA at x = 0 of `cta`'s pair: it tracks the bytes of a leader-tracked (`cta_group::2`) load."""
    return cta.cluster_ctas[cta.rank - cta.cluster_cta_id[0]]
