"""The user-level copy ops of the `asyncdsl` dialect: what the kernel author wrote, before
`resolve-transforms` decides how the hardware does it."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, ArrayAttr, BoolAttr, IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition
from xdsl.irdl import opt_prop_def, prop_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import Arrives, CopySides, GmemSlice, OptionalBarrierTarget, PeerArray
from asyncdsl.dialects.copy_bases import Predicated, sizes_prop
from asyncdsl.dialects.ir_utils import SegmentedOperands, bool_prop, collective_prop, int_prop
from asyncdsl.dialects.ir_utils import optional_operand, shape_of
from asyncdsl.dialects.ir_utils import verify_allow_groups, verify_collective_dims
from asyncdsl.dialects.ir_utils import verify_copy_sides, verify_gmem_slice, verify_predicate, verify_swizzle
from asyncdsl.dialects.option_attrs import EvictionAttr, ImplementationAttr, OobAttr, PartitionAttr
from asyncdsl.dialects.option_attrs import ReductionAttr, optional_copy_options
from asyncdsl.hw.options import Implementation, Oob, Partition


@irdl_op_definition
class AsyncCopyOp(
    CopySides, GmemSlice, OptionalBarrierTarget, Predicated, PeerArray, Arrives, SegmentedOperands
):
    """An asynchronous copy between a GMEM slice and a whole SMEM buffer, as the user wrote it.

    `starts` has one index per GMEM dim; `slice_sizes[d]` is the window size along dim d or -1
    when the dim is squeezed (indexed by `starts[d]` and dropped). `transforms` rearrange the
    slice on its way to SMEM. Loads (GMEM -> SMEM) complete on `barriers[barrier_index]`; stores
    join the issuing warpgroup's bulk group.
    """

    name = "asyncdsl.async_copy"

    transforms = prop_def(ArrayAttr)
    swizzle = prop_def(IntegerAttr)
    collective = prop_def(ArrayAttr)
    partition = opt_prop_def(PartitionAttr)
    partition_axis = opt_prop_def(IntegerAttr)
    reduction = opt_prop_def(ReductionAttr)
    implementation = prop_def(ImplementationAttr)
    oob = prop_def(OobAttr)
    eviction = opt_prop_def(EvictionAttr)  # a load's L2 eviction priority (TMA loads only)

    def __init__(
        self,
        source: SSAValue,
        destination: SSAValue,
        starts: Sequence[SSAValue],
        slice_sizes: Sequence[int],
        *,
        barriers: SSAValue | None = None,
        barrier_index: SSAValue | None = None,
        predicate: SSAValue | None = None,
        transforms: Sequence[Attribute] = (),
        swizzle: int = 0,
        arrive: bool = True,
        collective: Sequence[str] = (),
        partition: str | None = None,
        partition_axis: int | None = None,
        reduction: str | None = None,
        implementation: str = "tma",
        oob: str = Oob.ZEROS,
        peer: SSAValue | None = None,
        eviction: str | None = None,
    ):
        properties: dict[str, Attribute] = {
            "slice_sizes": sizes_prop(slice_sizes),
            "transforms": ArrayAttr(transforms),
            "swizzle": int_prop(swizzle),
            "arrive": bool_prop(arrive),
            "collective": collective_prop(collective),
            "implementation": ImplementationAttr(Implementation(implementation)),
            "oob": OobAttr(Oob(oob)),
            **optional_copy_options(partition=partition),
        }
        if partition_axis is not None:
            properties["partition_axis"] = int_prop(partition_axis)
        properties |= optional_copy_options(reduction=reduction, eviction=eviction)
        super().__init__(
            operands=[
                source, destination, starts,
                optional_operand(barriers), optional_operand(barrier_index), optional_operand(predicate),
                optional_operand(peer),
            ],
            properties=properties,
        )

    # Derived views used by passes and the interpreter (with `CopySides`' and `GmemSlice`'s).
    @property
    def cluster_dims(self) -> tuple[str, ...]:
        return tuple(d.data for d in self.collective)

    def verify_(self) -> None:
        verify_copy_sides("async_copy", self.source.type, self.destination.type)
        verify_gmem_slice(len(shape_of(self.gmem)), self.starts, self.sizes)
        verify_swizzle(self.swizzle.value.data)
        self.verify_barriers()
        dims = self.cluster_dims
        verify_collective_dims(dims, empty_allowed=True)
        if self.is_load:
            if self.barriers is None and self.implementation.data == Implementation.TMA:
                raise VerifyException("a GMEM -> SMEM copy needs a barrier to complete on (barrier=...)")
            if self.reduction is not None:
                raise VerifyException("reductions apply to SMEM -> GMEM copies only")
        else:
            if self.barriers is not None:
                raise VerifyException(
                    "SMEM -> GMEM copies take no barrier: they complete through await_async_copy"
                )
            if dims:
                raise VerifyException("only GMEM -> SMEM copies can be collective")
        if self.reduction is not None and self.implementation.data != Implementation.TMA:
            raise VerifyException(
                f"only TMA copies reduce: reduction={self.reduction.data!r} needs implementation='tma', "
                f"got {self.implementation.data!r}"
            )
        verify_predicate("a copy", self.predicate)
        if self.partition is not None:
            if not dims:
                raise VerifyException("only collective loads can be partitioned or replicated")
            if (self.partition.data == Partition.PARTITIONED) != (self.partition_axis is not None):
                raise VerifyException("a partitioned copy names exactly one axis (and a replicated one none)")
        if self.implementation.data == Implementation.CP_ASYNC:
            self._verify_cp_async()
        if self.peer is not None and (dims or self.implementation.data != Implementation.TMA):
            raise VerifyException(
                "a copy to or from a peer device's array is a plain (not collective) TMA copy")

    def _verify_cp_async(self) -> None:
        """What the per-thread cp.async fallback cannot do (the reference's restrictions)."""
        if not self.is_load:
            raise VerifyException("implementation='cp_async' copies GMEM -> SMEM only; store with TMA")
        if self.cluster_dims:
            raise VerifyException(
                "implementation='cp_async' copies cannot be collective: only TMA multicasts")
        if self.predicate is not None:
            raise VerifyException(
                "implementation='cp_async' copies are issued by every thread of the warpgroup and "
                "take no predicate"
            )
        if self.oob.data == Oob.UNDEFINED:
            raise VerifyException(
                "implementation='cp_async' copies never read out of bounds, so there is nothing for "
                "oob='undefined' to clamp; keep their slices inside the array"
            )


@irdl_op_definition
class AwaitAsyncCopyOp(IRDLOperation):
    """Wait until at most `allow_groups` bulk groups of this warpgroup are pending (with
    `read_only`, only until their SMEM sources may be reused), then sync the warpgroup."""

    name = "asyncdsl.await_async_copy"
    allow_groups = prop_def(IntegerAttr[I64])
    read_only = prop_def(BoolAttr)

    assembly_format = "`pending` $allow_groups `read_only` $read_only attr-dict"

    def __init__(self, allow_groups: int = 0, read_only: bool = False):
        super().__init__(
            properties={"allow_groups": int_prop(allow_groups), "read_only": bool_prop(read_only)})

    def verify_(self) -> None:
        verify_allow_groups(self.allow_groups.value.data)



OPERATIONS: tuple[type[Operation], ...] = (AsyncCopyOp, AwaitAsyncCopyOp)
