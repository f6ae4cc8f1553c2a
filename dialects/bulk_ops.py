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

from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, prop_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import Arrives, BarrierTarget, Commits, GmemWindow, Predicated, sizes_prop
from asyncdsl.dialects.ir_utils import SegmentedOperands, bool_prop, buffer_bytes, optional_operand
from asyncdsl.dialects.option_attrs import OobAttr
from asyncdsl.hw.limits import BULK_ALIGNMENT
from asyncdsl.hw.options import BULK_OOB_MODES, Oob


class _BulkCopy(GmemWindow, SegmentedOperands):
    """What bulk loads and stores share: the window and the out-of-bounds mode."""


    oob = prop_def(OobAttr)

    @property
    def transfer_bytes(self) -> int:
        """The bytes of the whole SMEM buffer: what the copy moves unless clamped."""
        return buffer_bytes(self.smem.type)

    def verify_(self) -> None:
        self.verify_window(self.name)
        if self.oob.data not in BULK_OOB_MODES:
            raise VerifyException(
                f"{self.name} takes oob in {tuple(map(str, BULK_OOB_MODES))}, got {str(self.oob.data)!r}")
        if self.transfer_bytes % BULK_ALIGNMENT:
            raise VerifyException(
                f"{self.name} moves a multiple of {BULK_ALIGNMENT} bytes, not {self.transfer_bytes}"
            )


def _properties(sizes: Sequence[int], oob: str) -> dict:
    return {"slice_sizes": sizes_prop(sizes), "oob": OobAttr(Oob(oob))}


@irdl_op_definition
class BulkLoadOp(_BulkCopy, BarrierTarget, Predicated, Arrives):
    """`cp.async.bulk` GMEM -> SMEM completing on `barriers[barrier_index]`; with `arrive`, the
    issuing warpgroup also arrives with expect-tx of the bytes moved."""

    name = "asyncdsl.bulk_load"

    def __init__(
        self, gmem: SSAValue, smem: SSAValue, starts: Sequence[SSAValue], sizes: Sequence[int],
        barriers: SSAValue, barrier_index: SSAValue, *,
        oob: str, arrive: bool = True, predicate: SSAValue | None = None,
    ):
        super().__init__(
            operands=[gmem, smem, starts, barriers, barrier_index, optional_operand(predicate)],
            properties={**_properties(sizes, oob), "arrive": bool_prop(arrive)},
        )


@irdl_op_definition
class BulkStoreOp(_BulkCopy, Predicated, Commits):
    """`cp.async.bulk` SMEM -> GMEM in the issuing warpgroup's bulk group, closed by a commit
    when `commit` is set (await it with `await_async_copy`)."""

    name = "asyncdsl.bulk_store"

    def __init__(
        self, gmem: SSAValue, smem: SSAValue, starts: Sequence[SSAValue], sizes: Sequence[int], *,
        oob: str, commit: bool = True, predicate: SSAValue | None = None,
    ):
        super().__init__(
            operands=[gmem, smem, starts, optional_operand(predicate)],
            properties={**_properties(sizes, oob), "commit": bool_prop(commit)},
        )


OPERATIONS: tuple[type[Operation], ...] = (BulkLoadOp, BulkStoreOp)
