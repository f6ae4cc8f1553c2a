"""Core ops of the `asyncdsl` dialect: program ids, shared memory, mbarriers, fences and CTA-level
synchronisation."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import int_prop, is_smem, shape_of, smem_type
from asyncdsl.dialects.memory_attrs import BarriersType

# ---------------------------------------------------------------------------------------------
# Identifiers of the running program.


class _AxisIdOp(IRDLOperation):
    axis = prop_def(IntegerAttr)
    result = result_def(IndexType)

    def __init__(self, axis: int):
        super().__init__(properties={"axis": int_prop(axis)}, result_types=[IndexType()])

    def verify_(self) -> None:
        if self.axis.value.data not in (0, 1, 2):
            raise VerifyException(f"axis must be 0, 1 or 2, got {self.axis.value.data}")


@irdl_op_definition
class ProgramIdOp(_AxisIdOp):
    """Index of this CTA in the grid along `axis` (`%ctaid`)."""

    name = "asyncdsl.program_id"


@irdl_op_definition
class NumProgramsOp(_AxisIdOp):
    """Number of CTAs in the grid along `axis` (`%nctaid`)."""

    name = "asyncdsl.num_programs"


@irdl_op_definition
class ClusterCtaIdOp(_AxisIdOp):
    """Index of this CTA inside its cluster along `axis` (`%cluster_ctaid`)."""

    name = "asyncdsl.cluster_cta_id"


@irdl_op_definition
class ClusterIdOp(_AxisIdOp):
    """Index of this CTA's cluster in the grid along `axis` (`%clusterid`)."""

    name = "asyncdsl.cluster_id"


@irdl_op_definition
class WarpgroupIdxOp(IRDLOperation):
    """Index of the executing warpgroup inside its CTA (0 for `block=128`)."""

    name = "asyncdsl.warpgroup_idx"
    result = result_def(IndexType)

    def __init__(self):
        super().__init__(result_types=[IndexType()])


# ---------------------------------------------------------------------------------------------
# Shared memory and barriers.


@irdl_op_definition
class AllocSmemOp(IRDLOperation):
    """A shared-memory buffer of the CTA. `allocate-smem` fills in `offset`."""

    name = "asyncdsl.alloc_smem"
    alignment = prop_def(IntegerAttr)
    offset = opt_prop_def(IntegerAttr)
    result = result_def(MemRefType)

    def __init__(self, shape: Sequence[int], element_type: Attribute, alignment: int = 128):
        super().__init__(
            properties={"alignment": int_prop(alignment)},
            result_types=[smem_type(shape, element_type)],
        )

    def verify_(self) -> None:
        if not is_smem(self.result.type):
            raise VerifyException("alloc_smem must produce a memref in #asyncdsl.smem")
        alignment = self.alignment.value.data
        if alignment < 16 or alignment & (alignment - 1):
            raise VerifyException(f"alignment must be a power of two >= 16, got {alignment}")
        if any(d <= 0 for d in shape_of(self.result)):
            raise VerifyException(f"shared-memory buffers need positive dims, got {shape_of(self.result)}")


@irdl_op_definition
class AllocBarriersOp(IRDLOperation):
    """`count` mbarriers, each initialised with `arrival_count` before the kernel body runs."""

    name = "asyncdsl.alloc_barriers"
    arrival_count = prop_def(IntegerAttr)
    offset = opt_prop_def(IntegerAttr)
    result = result_def(BarriersType)

    def __init__(self, count: int, arrival_count: int):
        super().__init__(
            properties={"arrival_count": int_prop(arrival_count)},
            result_types=[BarriersType(count)],
        )

    def verify_(self) -> None:
        count = self.result.type.count.data
        arrivals = self.arrival_count.value.data
        if not 1 <= count <= 32:
            raise VerifyException(f"a barrier group holds 1 to 32 barriers, got {count}")
        if not 1 <= arrivals < 2**20:
            raise VerifyException(f"arrival_count must be in [1, 2^20 - 1], got {arrivals}")


@irdl_op_definition
class SmemViewOp(IRDLOperation):
    """The sub-buffer of a shared-memory buffer selected by integer indices on its leading dims."""

    name = "asyncdsl.smem_view"
    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(MemRefType)

    def __init__(self, source: SSAValue, indices: Sequence[SSAValue]):
        shape = shape_of(source)[len(indices):]
        super().__init__(
            operands=[source, indices],
            result_types=[smem_type(shape, source.type.element_type)],
        )

    def verify_(self) -> None:
        if not is_smem(self.source.type):
            raise VerifyException("smem_view takes a shared-memory buffer")
        source_shape = shape_of(self.source)
        if len(self.indices) >= len(source_shape):
            raise VerifyException(
                f"smem_view indexes leading dims only: {len(self.indices)} indices for a "
                f"{len(source_shape)}-d buffer would leave nothing"
            )
        if shape_of(self.result) != source_shape[len(self.indices):]:
            raise VerifyException("smem_view result shape must be the source's trailing dims")


@irdl_op_definition
class ArriveOp(IRDLOperation):
    """The warpgroup arrives `count` times on barrier `barriers[index]` (one elected thread)."""

    name = "asyncdsl.arrive"
    barriers = operand_def(BarriersType)
    index = operand_def(IndexType)
    count = prop_def(IntegerAttr)

    def __init__(self, barriers: SSAValue, index: SSAValue, count: int = 1):
        super().__init__(operands=[barriers, index], properties={"count": int_prop(count)})

    def verify_(self) -> None:
        if self.count.value.data < 1:
            raise VerifyException(f"arrive count must be positive, got {self.count.value.data}")


@irdl_op_definition
class ArriveExpectTxOp(IRDLOperation):
    """One arrival plus `bytes` expected transaction bytes on `barriers[index]`."""

    name = "asyncdsl.arrive_expect_tx"
    barriers = operand_def(BarriersType)
    index = operand_def(IndexType)
    bytes = prop_def(IntegerAttr)

    def __init__(self, barriers: SSAValue, index: SSAValue, num_bytes: int):
        super().__init__(operands=[barriers, index], properties={"bytes": int_prop(num_bytes)})

    def verify_(self) -> None:
        if not 0 <= self.bytes.value.data < 2**20:
            raise VerifyException(f"expect-tx bytes must be in [0, 2^20), got {self.bytes.value.data}")


@irdl_op_definition
class WaitOp(IRDLOperation):
    """Every thread of the warpgroup waits for a phase of `barriers[index]` to complete.

    Without `parity`, the phase is tracked for the user: each wait of a warpgroup on a barrier
    waits for the phase after the one its previous wait on that barrier saw.
    """

    name = "asyncdsl.wait"
    barriers = operand_def(BarriersType)
    index = operand_def(IndexType)
    parity = opt_operand_def(IndexType)

    def __init__(self, barriers: SSAValue, index: SSAValue, parity: SSAValue | None = None):
        super().__init__(operands=[barriers, index, [parity] if parity is not None else []])


@irdl_op_definition
class FenceAsyncSmemOp(IRDLOperation):
    """Make this warpgroup's ordinary SMEM writes visible to the async proxy (TMA, wgmma),
    then sync the warpgroup (`fence.proxy.async.shared::cta` + warpgroup barrier)."""

    name = "asyncdsl.fence_async_smem"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class WarpgroupBarrierOp(IRDLOperation):
    """All 128 threads of the warpgroup meet."""

    name = "asyncdsl.warpgroup_barrier"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class CtaBarrierOp(IRDLOperation):
    """All threads of the CTA meet (`bar.sync 0`)."""

    name = "asyncdsl.cta_barrier"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class ClusterBarrierOp(IRDLOperation):
    """All threads of every CTA in the cluster meet."""

    name = "asyncdsl.cluster_barrier"

    def __init__(self):
        super().__init__()



OPERATIONS: tuple[type[Operation], ...] = (
    ProgramIdOp, NumProgramsOp, ClusterCtaIdOp, ClusterIdOp, WarpgroupIdxOp,
    AllocSmemOp, AllocBarriersOp, SmemViewOp,
    ArriveOp, ArriveExpectTxOp, WaitOp,
    FenceAsyncSmemOp, WarpgroupBarrierOp, CtaBarrierOp, ClusterBarrierOp,
)
