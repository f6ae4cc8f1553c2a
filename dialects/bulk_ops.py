"""Hardware-level contiguous bulk copies of the `asyncdsl` dialect: one `cp.async.bulk` each,
addressed from the kernel argument's pointer, no tensor map (`resolve-transforms` produces them
for copies that qualify, see `asyncdsl.hw.bulk`).

Both carry the GMEM window as the user gave it (`starts` per dim of `gmem`, `slice_sizes` with
-1 for squeezed dims); the copy moves the bytes of the whole SMEM buffer from the window's first
element.  `oob` says what happens at the end of the array: "undefined" clamps the byte count to
what is left there (a load still completes every byte of the buffer on its barrier),
"promise_in_bounds" moves everything.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    i64,
)
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
    bool_prop,
    buffer_bytes,
    is_gmem,
    is_smem,
    optional_operand,
    shape_of,
)
from asyncdsl.dialects.memory_attrs import BarriersType
from asyncdsl.dialects.option_attrs import OobAttr
from asyncdsl.hw.limits import BULK_ALIGNMENT
from asyncdsl.hw.options import BULK_OOB_MODES, Oob


class _BulkCopy(IRDLOperation):
    """What bulk loads and stores share: the window and the out-of-bounds mode.  (Operands are
    declared by each op, in order: `gmem`, `smem`, `starts`, then its own.)"""

    slice_sizes = prop_def(DenseArrayBase)
    oob = prop_def(OobAttr)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.slice_sizes.get_values())

    @property
    def transfer_bytes(self) -> int:
        """The bytes of the whole SMEM buffer: what the copy moves unless clamped."""
        return buffer_bytes(self.smem.type)

    def verify_(self) -> None:
        if not is_gmem(self.gmem.type) or not is_smem(self.smem.type):
            raise VerifyException(f"{self.name} takes a GMEM array and a shared-memory buffer")
        if self.gmem.type.element_type != self.smem.type.element_type:
            raise VerifyException(f"{self.name} needs the same element type on both sides")
        rank = len(shape_of(self.gmem))
        if len(self.starts) != rank or len(self.sizes) != rank:
            raise VerifyException(f"{self.name} needs one start and one size per GMEM dim ({rank})")
        if self.oob.data not in BULK_OOB_MODES:
            raise VerifyException(
                f"{self.name} takes oob in {tuple(map(str, BULK_OOB_MODES))}, got {str(self.oob.data)!r}")
        if self.transfer_bytes % BULK_ALIGNMENT:
            raise VerifyException(
                f"{self.name} moves a multiple of {BULK_ALIGNMENT} bytes, not {self.transfer_bytes}"
            )


def _properties(sizes: Sequence[int], oob: str) -> dict:
    return {"slice_sizes": DenseArrayBase.from_list(i64, list(sizes)), "oob": OobAttr(Oob(oob))}


@irdl_op_definition
class BulkLoadOp(_BulkCopy):
    """`cp.async.bulk` GMEM -> SMEM completing on `barriers[barrier_index]`; with `arrive`, the
    issuing warpgroup also arrives with expect-tx of the bytes moved."""

    name = "asyncdsl.bulk_load"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    gmem = operand_def(MemRefType)
    smem = operand_def(MemRefType)
    starts = var_operand_def(IndexType)
    barriers = operand_def(BarriersType)
    barrier_index = operand_def(IndexType)
    predicate = opt_operand_def(IntegerType)
    arrive = prop_def(IntegerAttr)

    def __init__(
        self,
        gmem: SSAValue,
        smem: SSAValue,
        starts: Sequence[SSAValue],
        sizes: Sequence[int],
        barriers: SSAValue,
        barrier_index: SSAValue,
        *,
        oob: str,
        arrive: bool = True,
        predicate: SSAValue | None = None,
    ):
        super().__init__(
            operands=[gmem, smem, starts, barriers, barrier_index, optional_operand(predicate)],
            properties={**_properties(sizes, oob), "arrive": bool_prop(arrive)},
        )


@irdl_op_definition
class BulkStoreOp(_BulkCopy):
    """`cp.async.bulk` SMEM -> GMEM in the issuing warpgroup's bulk group, closed by a commit
    when `commit` is set (await it with `await_async_copy`)."""

    name = "asyncdsl.bulk_store"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    gmem = operand_def(MemRefType)
    smem = operand_def(MemRefType)
    starts = var_operand_def(IndexType)
    predicate = opt_operand_def(IntegerType)
    commit = prop_def(IntegerAttr)

    def __init__(
        self,
        gmem: SSAValue,
        smem: SSAValue,
        starts: Sequence[SSAValue],
        sizes: Sequence[int],
        *,
        oob: str,
        commit: bool = True,
        predicate: SSAValue | None = None,
    ):
        super().__init__(
            operands=[gmem, smem, starts, optional_operand(predicate)],
            properties={**_properties(sizes, oob), "commit": bool_prop(commit)},
        )


OPERATIONS: tuple[type[Operation], ...] = (BulkLoadOp, BulkStoreOp)
