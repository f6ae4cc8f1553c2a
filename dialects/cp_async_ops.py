"""cp.async ops of the `asyncdsl` dialect: the warpgroup-wide per-thread copy (Ampere's
`cp.async`, the fallback copy engine) and waiting for its commit groups.

`asyncdsl.cp_async_load` is what `resolve-transforms` makes of `async_copy(...,
implementation="cp_async")`: the GMEM window as the user gave it (`starts` per dim, `slice_sizes`
with -1 for squeezed dims) and the layout every thread follows, as `asyncdsl.hw.cp_async`
describes it (rows of the window, tiles and swizzle in SMEM, the chunk each `cp.async` moves).
It completes either on `barriers[barrier_index]` (every thread's copies are tracked by the
barrier without changing its arrival count; with `arrive`, the warpgroup then arrives once, as
for any other copy) or, without a barrier, in the warpgroup's cp.async commit group (closed when
`arrive` is set), which `asyncdsl.await_cp_async_copy` waits for.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, IndexType, IntegerAttr, MemRefType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import (
    SWIZZLE_BYTES,
    bool_prop,
    buffer_bytes,
    int_prop,
    is_gmem,
    is_smem,
    optional_operand,
    shape_of,
    verify_allow_groups,
    verify_barrier_pair,
)
from asyncdsl.dialects.memory_attrs import BarriersType
from asyncdsl.hw.cp_async import CpAsyncPlan
from asyncdsl.hw.limits import CP_ASYNC_CHUNK_SIZES

_LAYOUT_FIELDS = (
    "rows", "row_bytes", "row_stride_bytes", "tile_rows", "tile_row_bytes", "swizzle_bytes", "chunk_bytes",
)


@irdl_op_definition
class CpAsyncLoadOp(IRDLOperation):
    """Every thread of the warpgroup copies its chunks of the window into `smem` (see above)."""

    name = "asyncdsl.cp_async_load"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    gmem = operand_def(MemRefType)
    smem = operand_def(MemRefType)
    starts = var_operand_def(IndexType)
    barriers = opt_operand_def(BarriersType)
    barrier_index = opt_operand_def(IndexType)

    slice_sizes = prop_def(DenseArrayBase)
    rows = prop_def(IntegerAttr)
    row_bytes = prop_def(IntegerAttr)
    row_stride_bytes = prop_def(IntegerAttr)
    tile_rows = prop_def(IntegerAttr)
    tile_row_bytes = prop_def(IntegerAttr)
    swizzle_bytes = prop_def(IntegerAttr)
    chunk_bytes = prop_def(IntegerAttr)
    arrive = prop_def(IntegerAttr)

    def __init__(
        self,
        gmem: SSAValue,
        smem: SSAValue,
        starts: Sequence[SSAValue],
        sizes: Sequence[int],
        plan: CpAsyncPlan,
        *,
        barriers: SSAValue | None = None,
        barrier_index: SSAValue | None = None,
        arrive: bool = True,
    ):
        properties = {field: int_prop(getattr(plan, field)) for field in _LAYOUT_FIELDS}
        properties["slice_sizes"] = DenseArrayBase.from_list(i64, list(sizes))
        properties["arrive"] = bool_prop(arrive)
        super().__init__(
            operands=[gmem, smem, starts, optional_operand(barriers), optional_operand(barrier_index)],
            properties=properties,
        )

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.slice_sizes.get_values())

    def plan(self) -> CpAsyncPlan:
        return CpAsyncPlan(*(getattr(self, field).value.data for field in _LAYOUT_FIELDS))

    def verify_(self) -> None:
        if not is_gmem(self.gmem.type) or not is_smem(self.smem.type):
            raise VerifyException("cp_async_load copies a GMEM array into a shared-memory buffer")
        if self.gmem.type.element_type != self.smem.type.element_type:
            raise VerifyException("cp_async_load needs the same element type on both sides")
        rank = len(shape_of(self.gmem))
        if len(self.starts) != rank or len(self.sizes) != rank:
            raise VerifyException(f"cp_async_load needs one start and one size per GMEM dim ({rank})")
        verify_barrier_pair(self.barriers, self.barrier_index)
        plan = self.plan()
        if plan.chunk_bytes not in CP_ASYNC_CHUNK_SIZES or plan.swizzle_bytes not in SWIZZLE_BYTES:
            raise VerifyException(
                f"cp_async_load chunks are {CP_ASYNC_CHUNK_SIZES} bytes, swizzles {SWIZZLE_BYTES}")
        if (
            plan.tile_row_bytes % plan.chunk_bytes
            or plan.row_bytes % plan.tile_row_bytes
            or plan.rows % plan.tile_rows
        ):
            raise VerifyException("cp_async_load tiles must divide the rows and chunks the tile rows")
        held = buffer_bytes(self.smem.type)
        if plan.total_bytes != held:
            raise VerifyException(f"cp_async_load moves {plan.total_bytes} bytes into a buffer of {held}")


@irdl_op_definition
class AwaitCpAsyncCopyOp(IRDLOperation):
    """Wait until at most `allow_groups` cp.async commit groups of this warpgroup are pending,
    then sync the warpgroup (`cp.async.wait_group` + warpgroup barrier)."""

    name = "asyncdsl.await_cp_async_copy"
    allow_groups = prop_def(IntegerAttr[I64])

    assembly_format = "`pending` $allow_groups attr-dict"

    def __init__(self, allow_groups: int = 0):
        super().__init__(properties={"allow_groups": int_prop(allow_groups)})

    def verify_(self) -> None:
        verify_allow_groups(self.allow_groups.value.data)


OPERATIONS: tuple[type[Operation], ...] = (CpAsyncLoadOp, AwaitCpAsyncCopyOp)
