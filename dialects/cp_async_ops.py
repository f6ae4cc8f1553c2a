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

from xdsl.dialects.builtin import I64, IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import Arrives, GmemWindow, OptionalBarrierTarget, sizes_prop
from asyncdsl.dialects.ir_utils import SWIZZLE_BYTES, bool_prop, buffer_bytes, int_prop, optional_operand
from asyncdsl.dialects.ir_utils import SegmentedOperands
from asyncdsl.dialects.ir_utils import verify_allow_groups
from asyncdsl.hw.cp_async import CpAsyncPlan
from asyncdsl.hw.limits import CP_ASYNC_CHUNK_SIZES

_LAYOUT_FIELDS = (
    "rows", "row_bytes", "row_stride_bytes", "tile_rows", "tile_row_bytes", "swizzle_bytes", "chunk_bytes",
)


@irdl_op_definition
class CpAsyncLoadOp(GmemWindow, OptionalBarrierTarget, Arrives, SegmentedOperands):
    """Every thread of the warpgroup copies its chunks of the window into `smem` (see above)."""

    name = "asyncdsl.cp_async_load"

    rows = prop_def(IntegerAttr)
    row_bytes = prop_def(IntegerAttr)
    row_stride_bytes = prop_def(IntegerAttr)
    tile_rows = prop_def(IntegerAttr)
    tile_row_bytes = prop_def(IntegerAttr)
    swizzle_bytes = prop_def(IntegerAttr)
    chunk_bytes = prop_def(IntegerAttr)

    def __init__(
        self, gmem: SSAValue, smem: SSAValue, starts: Sequence[SSAValue], sizes: Sequence[int],
        plan: CpAsyncPlan, *,
        barriers: SSAValue | None = None, barrier_index: SSAValue | None = None, arrive: bool = True,
    ):
        properties: dict[str, Attribute] = {field: int_prop(getattr(plan, field)) for field in _LAYOUT_FIELDS}
        properties["slice_sizes"] = sizes_prop(sizes)
        properties["arrive"] = bool_prop(arrive)
        super().__init__(
            operands=[gmem, smem, starts, optional_operand(barriers), optional_operand(barrier_index)],
            properties=properties,
        )

    def plan(self) -> CpAsyncPlan:
        return CpAsyncPlan(*(getattr(self, field).value.data for field in _LAYOUT_FIELDS))

    def verify_(self) -> None:
        self.verify_window("cp_async_load")
        self.verify_barriers()
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
