"""Hardware-level TMA ops of the `asyncdsl` dialect: one `cp.async.bulk.tensor` instruction each,
with the descriptor the host encodes. `resolve-transforms` produces them."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, opt_operand_def
from xdsl.irdl import opt_prop_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import Commits, PeerArray, Predicated, TmaBox, TxCounted
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.ir_utils import OptionallyCollective, SegmentedOperands, bool_prop, collective_prop
from asyncdsl.dialects.ir_utils import int_prop, optional_operand
from asyncdsl.dialects.option_attrs import EvictionAttr, PartitionAttr, ReductionAttr, optional_copy_options
from asyncdsl.hw.options import Partition
from asyncdsl.hw.reduction import hardware_violation


class _MulticastMask(IRDLOperation):
    """A load landing in every CTA of `multicast_mask` (bit i: CTA rank i of the cluster)."""

    multicast_mask = opt_operand_def(IndexType)


@irdl_op_definition
class TmaLoadOp(TmaBox, TxCounted, Predicated, _MulticastMask, PeerArray, OptionallyCollective,
                SegmentedOperands):
    """One `cp.async.bulk.tensor` load of the box at `coords` (descriptor dims, array order) into
    `smem`, completing `expect_tx_bytes` on `barriers[barrier_index]` (0: the user arrives).

    `collective` (cluster dims) marks a load of the whole slice that `partition-collectives` has
    still to split among the CTAs of a cluster. After that pass, `multicast_mask` (an index
    value, bit i = CTA rank i of the cluster) makes the box land in every CTA of the mask at the
    same offset, and `partition` ("partitioned" or "replicated") makes it a Blackwell
    `cta_group::2` load whose bytes complete on the barrier of the pair's CTA at x = 0.
    """

    name = "asyncdsl.tma_load"

    partition = opt_prop_def(PartitionAttr)
    eviction = opt_prop_def(EvictionAttr)  # the L2 eviction priority of the loaded lines

    def __init__(
        self,
        smem: SSAValue,
        coords: Sequence[SSAValue],
        barriers: SSAValue,
        barrier_index: SSAValue,
        descriptor: TmaDescriptorAttr,
        expect_tx_bytes: int,
        predicate: SSAValue | None = None,
        multicast_mask: SSAValue | None = None,
        collective: Sequence[str] = (),
        partition: str | None = None,
        peer: SSAValue | None = None,
        eviction: str | None = None,
    ):
        properties: dict[str, Attribute] = {
            "descriptor": descriptor,
            "expect_tx_bytes": int_prop(expect_tx_bytes),
        }
        if collective:
            properties["collective"] = collective_prop(collective)
        properties |= optional_copy_options(partition=partition, eviction=eviction)
        super().__init__(
            operands=[
                smem, coords, barriers, barrier_index, optional_operand(predicate),
                optional_operand(multicast_mask),
                optional_operand(peer),
            ],
            properties=properties,
        )

    def verify_(self) -> None:
        self.verify_box()
        self.verify_collective()
        if self.collective is not None and self.multicast_mask is not None:
            raise VerifyException("a load still to be split among its collective has no multicast mask yet")
        if self.partition is not None:
            if self.partition.data == Partition.PARTITIONED and self.multicast_mask is not None:
                raise VerifyException("a partitioned load fills only its own CTA: it takes no multicast mask")


@irdl_op_definition
class TmaStoreOp(TmaBox, Predicated, PeerArray, Commits, SegmentedOperands):
    """One `cp.async.bulk.tensor` store (or `cp.reduce.async.bulk.tensor` with `reduction`) of
    `smem` into the box at `coords`, committed as a bulk group when `commit` is set."""

    name = "asyncdsl.tma_store"

    reduction = opt_prop_def(ReductionAttr)

    def __init__(
        self,
        smem: SSAValue,
        coords: Sequence[SSAValue],
        descriptor: TmaDescriptorAttr,
        commit: bool = True,
        reduction: str | None = None,
        predicate: SSAValue | None = None,
        peer: SSAValue | None = None,
    ):
        properties: dict[str, Attribute] = {"descriptor": descriptor, "commit": bool_prop(commit)}
        properties |= optional_copy_options(reduction=reduction)
        super().__init__(
            operands=[smem, coords, optional_operand(predicate), optional_operand(peer)],
            properties=properties
        )

    def verify_(self) -> None:
        self.verify_box()
        if self.reduction is not None:
            problem = hardware_violation(self.reduction.data, self.descriptor.dtype_code.data)
            if problem is not None:
                raise VerifyException(problem)


OPERATIONS: tuple[type[Operation], ...] = (TmaLoadOp, TmaStoreOp)
