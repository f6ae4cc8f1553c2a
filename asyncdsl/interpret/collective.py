"""Collective loads in the interpreter: multicast masks, parts of SMEM buffers, and TMA loads
that land in several CTAs of a cluster or complete on another CTA's barrier.

A multicast load (`multicast_mask`) reads its box once and, for every CTA of the mask, writes it
at the same SMEM offset and completes its bytes on that CTA's barrier at the same offset, as the
hardware does (ptx-hopper.md §3.1). A leader-tracked load (`partition`, Blackwell
`cta_group::2`) completes every destination's bytes on the barrier of the pair's CTA at x = 0
instead; a partitioned one writes only its own CTA. Each destination's race log records the write
with the barrier phase that completes it, so a warpgroup of any destination CTA that reads those
bytes must know that phase (its own wait, or a cluster barrier after one).

`CollectiveFunctions` is a mixin of `functions.AsyncDslFunctions` (it uses that class's
`warpgroup` and `_box_range`); `run_tma_load` hands collective loads to `run_collective_load`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType
from xdsl.interpreter import Interpreter, PythonValues, impl
from xdsl.interpreters.builtin import scalar_attr

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import AsyncDSLError, InterpretError, OutOfBoundsError
from asyncdsl.interpret import tma
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.memory import SmemBuffer
from asyncdsl.interpret.operands import barrier_address
from asyncdsl.interpret.races import AsyncWrite
from asyncdsl.interpret.state import Cta


class CollectiveFunctions:
    """The ops `partition-collectives` builds, and the collective form of `tma_load`."""

    @impl(ir.ClusterCollectiveMaskOp)
    def run_cluster_collective_mask(
        self, interpreter: Interpreter, op: ir.ClusterCollectiveMaskOp, args: PythonValues
    ):
        mask = op.group().mask(self.warpgroup.cta.cluster_cta_id)
        return (scalar_attr(mask, IndexType(), interpreter.index_bitwidth),)

    @impl(ir.SmemSliceOp)
    @diagnosed
    def run_smem_slice(self, interpreter: Interpreter, op: ir.SmemSliceOp, args: PythonValues):
        source, offset = args
        start = source.offset + offset.value.data
        part = SmemBuffer(start, ir.shape_of(op.result), source.element_bytes, source.origin)
        if offset.value.data < 0 or part.offset + part.nbytes > source.offset + source.nbytes:
            raise OutOfBoundsError(
                f"the part at byte {offset.value.data} of {part.nbytes} bytes lies outside the "
                f"{source.nbytes}-byte shared-memory buffer allocated at {source.origin}"
            )
        return (part,)

    def run_collective_load(self, op: ir.TmaLoadOp, values: dict) -> tuple:
        """A multicast or leader-tracked `tma_load` (operand values by SSA value)."""
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        spec = tma.descriptor_spec(op.descriptor)
        address = barrier_address(op, values)
        expect = op.expect_tx_bytes.value.data
        if expect:
            cta.mbarriers[address].arrive_expect_tx(expect, warpgroup.clock)
        what = "the multicast TMA load" if op.multicast_mask is not None else "the partitioned TMA load"
        start, end = self._box_range(values[op.smem], spec, what)
        if op.multicast_mask is not None:
            destinations = _destinations(cta, values[op.multicast_mask].value.data)
        else:
            destinations = [cta]
        # cta_group::2: the pair's CTA at x = 0 tracks the bytes of both.
        tracker = cta.cluster_ctas[cta.rank - cta.cluster_cta_id[0]] if op.partition is not None else None
        for destination in destinations:
            destination.accesses.check_write(start, end, warpgroup.clock, f"{what} into {destination.label}")
        argument = cta.launch.arguments[spec.arg_index]
        coords = [values[c].value.data for c in op.coords]
        box = tma.read_gmem_box(argument.raw, spec, coords, argument.name)
        delivered = tma.box_bytes(spec)
        for destination in destinations:
            tma.write_smem_box(destination.smem.bytes, start, spec, box)
            owner = tracker or destination
            barrier = owner.mbarriers[address]
            try:
                phase = barrier.complete_tx(delivered)
            except AsyncDSLError as error:
                raise type(error)(f"in {owner.label}: {error.message}") from None
            name = barrier.name if owner is cta else f"{barrier.name} in {owner.label}"
            destination.accesses.record_write(AsyncWrite(start, end, barrier.key, phase, name, origin(op)))
        return ()


def _destinations(cta: Cta, mask: int) -> list[Cta]:
    """The CTAs of `cta`'s cluster named by the bits of a multicast mask."""
    cluster = cta.cluster_ctas
    if not 0 < mask < 1 << len(cluster):
        raise InterpretError(
            f"multicast mask {mask:#x} names no CTA or a CTA rank beyond the {len(cluster)} of the cluster"
        )
    return [cluster[rank] for rank in range(len(cluster)) if mask >> rank & 1]
