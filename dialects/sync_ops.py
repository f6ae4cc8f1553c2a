"""Synchronisation ops of the `asyncdsl` dialect: mbarriers (allocation, arrivals, waits), the
generic-to-async proxy fence, and warpgroup-, CTA- and cluster-wide barriers."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, IndexType, IntegerAttr, UnitAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_operand_def, opt_prop_def, prop_def
from xdsl.irdl import result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import OptionallyCollective, collective_prop, int_prop
from asyncdsl.dialects.memory_attrs import BarriersType
from asyncdsl.hw.limits import MAX_ARRIVAL_COUNT, MAX_BARRIERS_PER_GROUP, MAX_EXPECT_TX_BYTES


class BarrierSlot(IRDLOperation):
    """An op on one barrier of a group: `barriers[index]`."""

    barriers = operand_def(BarriersType)
    index = operand_def(IndexType)


class Arrival(BarrierSlot):
    """The warpgroup arrives `count` times on the barrier (one elected thread).  Its threads meet
    first (so that their own shared-memory reads are over before the arrival releases the
    bytes), unless `unsynced`: for a release of what only the tensor cores read, whose
    `wgmma_wait` already ended the reads."""

    count = prop_def(IntegerAttr[I64])
    unsynced = opt_prop_def(UnitAttr)

    def verify_count(self) -> None:
        if self.count.value.data < 1:
            raise VerifyException(f"arrive count must be positive, got {self.count.value.data}")


@irdl_op_definition
class AllocBarriersOp(IRDLOperation):
    """`count` mbarriers, each initialised with `arrival_count` before the kernel body runs."""

    name = "asyncdsl.alloc_barriers"
    arrival_count = prop_def(IntegerAttr[I64])
    offset = opt_prop_def(IntegerAttr[I64])
    result = result_def(BarriersType)

    assembly_format = "`arrivals` $arrival_count (`offset` $offset^)? attr-dict `:` type($result)"

    def __init__(self, count: int, arrival_count: int):
        super().__init__(
            properties={"arrival_count": int_prop(arrival_count)},
            result_types=[BarriersType(count)],
        )

    def verify_(self) -> None:
        count = self.result.type.count.data
        arrivals = self.arrival_count.value.data
        if not 1 <= count <= MAX_BARRIERS_PER_GROUP:
            raise VerifyException(
                f"a barrier group holds 1 to {MAX_BARRIERS_PER_GROUP} barriers, got {count}")
        if not 1 <= arrivals <= MAX_ARRIVAL_COUNT:
            raise VerifyException(f"arrival_count must be in [1, 2^20 - 1], got {arrivals}")


@irdl_op_definition
class ArriveOp(Arrival, OptionallyCollective):
    """The warpgroup's arrivals on `barriers[index]` (`Arrival`).

    With `collective` (cluster dims), it arrives on the barrier at the same offset in every CTA
    of this CTA's group along those dims (the CTAs a collective copy multicasts to, this one
    included); `partition-collectives` rewrites it into `asyncdsl.cluster_arrive`.
    """

    name = "asyncdsl.arrive"

    assembly_format = (
        "$barriers `[` $index `]` `count` $count (`collective` $collective^)? (`unsynced` $unsynced^)? "
        "attr-dict `:` type($barriers)"
    )

    def __init__(self, barriers: SSAValue, index: SSAValue, count: int = 1, collective: Sequence[str] = (),
                 sync: bool = True):
        properties: dict[str, Attribute] = {"count": int_prop(count)}
        if collective:
            properties["collective"] = collective_prop(collective)
        if not sync:
            properties["unsynced"] = UnitAttr()
        super().__init__(operands=[barriers, index], properties=properties)

    def verify_(self) -> None:
        self.verify_count()
        self.verify_collective()


@irdl_op_definition
class ArriveExpectTxOp(BarrierSlot):
    """One arrival plus `bytes` expected transaction bytes on `barriers[index]`."""

    name = "asyncdsl.arrive_expect_tx"
    bytes = prop_def(IntegerAttr[I64])

    assembly_format = "$barriers `[` $index `]` `bytes` $bytes attr-dict `:` type($barriers)"

    def __init__(self, barriers: SSAValue, index: SSAValue, num_bytes: int):
        super().__init__(operands=[barriers, index], properties={"bytes": int_prop(num_bytes)})

    def verify_(self) -> None:
        if not 0 <= self.bytes.value.data <= MAX_EXPECT_TX_BYTES:
            raise VerifyException(f"expect-tx bytes must be in [0, 2^20), got {self.bytes.value.data}")


@irdl_op_definition
class WaitOp(IRDLOperation):
    """Every thread of the warpgroup waits for a phase of `barriers[index]` to complete.

    Without `parity`, the phase is tracked for the user: each wait of a warpgroup on a barrier
    waits for the phase after the one its previous wait on that barrier saw.
    """

    name = "asyncdsl.wait"
    barriers = operand_def(BarriersType)  # not from BarrierSlot, whose operands would follow parity
    index = operand_def(IndexType)
    parity = opt_operand_def(IndexType)

    assembly_format = "$barriers `[` $index `]` (`parity` $parity^)? attr-dict `:` type($barriers)"

    def __init__(self, barriers: SSAValue, index: SSAValue, parity: SSAValue | None = None):
        super().__init__(operands=[barriers, index, [parity] if parity is not None else []])


class _Standalone(IRDLOperation):
    """An op of no operands and no results: it prints as its name alone."""

    assembly_format = "attr-dict"


@irdl_op_definition
class FenceAsyncSmemOp(_Standalone):
    """Make this warpgroup's ordinary SMEM writes visible to the async proxy (TMA, wgmma),
    then sync the warpgroup (`fence.proxy.async.shared::cta` + warpgroup barrier)."""

    name = "asyncdsl.fence_async_smem"


@irdl_op_definition
class WarpgroupBarrierOp(_Standalone):
    """All 128 threads of the warpgroup meet."""

    name = "asyncdsl.warpgroup_barrier"


@irdl_op_definition
class CtaBarrierOp(_Standalone):
    """All threads of the CTA meet (`bar.sync 0`)."""

    name = "asyncdsl.cta_barrier"


@irdl_op_definition
class ClusterBarrierOp(_Standalone):
    """All threads of every CTA in the cluster meet."""

    name = "asyncdsl.cluster_barrier"


OPERATIONS: tuple[type[Operation], ...] = (
    AllocBarriersOp, ArriveOp, ArriveExpectTxOp, WaitOp,
    FenceAsyncSmemOp, WarpgroupBarrierOp, CtaBarrierOp, ClusterBarrierOp,
)
