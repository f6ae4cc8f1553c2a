"""What the op families of the copy engines share, declared once: operand groups and properties as
base classes an op lists, in the order its operands come.

IRDL takes an op's fields from its class and then from its bases in method-resolution order, so
`class BulkLoadOp(GmemWindow, BarrierTarget, Predicated)` has the operands `gmem, smem, starts,
barriers, barrier_index, predicate` in that order. Each base here is one concept: the two sides
of a user's copy, the GMEM slice it names, the window a contiguous copy moves, the mbarrier a
load completes on, the predicate that may skip it, the TMA descriptor a tensor copy goes
through, the rows of a gather4/scatter4.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntegerAttr, IntegerType, MemRefType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, operand_def, opt_operand_def, opt_prop_def, prop_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.ir_utils import buffer_bytes, is_gmem, is_smem, shape_of
from asyncdsl.dialects.ir_utils import verify_barrier_pair, verify_descriptor_coordinates
from asyncdsl.dialects.memory_attrs import BarriersType
from asyncdsl.hw.limits import GATHER4_ROWS


def sizes_prop(sizes: Sequence[int]) -> DenseArrayBase:
    """`slice_sizes` of a GMEM window: the window size per dim, -1 where the dim is squeezed."""
    return DenseArrayBase.from_list(i64, list(sizes))


class CopySides(IRDLOperation):
    """A user-level copy from `source` to `destination`: GMEM -> SMEM (a load) or SMEM -> GMEM
    (a store)."""

    source = operand_def(MemRefType)
    destination = operand_def(MemRefType)

    @property
    def is_load(self) -> bool:
        return is_gmem(self.source.type)

    @property
    def gmem(self) -> SSAValue:
        return self.source if self.is_load else self.destination

    @property
    def smem(self) -> SSAValue:
        return self.destination if self.is_load else self.source


class GmemSlice(IRDLOperation):
    """The slice of a GMEM array at `starts`, `slice_sizes[d]` long along dim d (-1: the dim is
    squeezed, indexed by `starts[d]` and dropped)."""

    starts = var_operand_def(IndexType)
    slice_sizes = prop_def(DenseArrayBase)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.slice_sizes.get_values())


class GmemWindow(GmemSlice):
    """A contiguous copy between the slice (the window) of `gmem` and the whole shared-memory
    buffer `smem`."""

    gmem = operand_def(MemRefType)
    smem = operand_def(MemRefType)

    def verify_window(self, subject: str) -> None:
        gmem, smem = self.gmem.type, self.smem.type
        if (not isinstance(gmem, MemRefType) or not isinstance(smem, MemRefType)
                or not is_gmem(gmem) or not is_smem(smem)):
            raise VerifyException(f"{subject} copies between a GMEM array and a shared-memory buffer")
        if gmem.element_type != smem.element_type:
            raise VerifyException(f"{subject} needs the same element type on both sides")
        rank = len(shape_of(self.gmem))
        if len(self.starts) != rank or len(self.sizes) != rank:
            raise VerifyException(f"{subject} needs one start and one size per GMEM dim ({rank})")


class BarrierTarget(IRDLOperation):
    """A load completing its bytes on `barriers[barrier_index]`."""

    barriers = operand_def(BarriersType)
    barrier_index = operand_def(IndexType)


class TxCounted(BarrierTarget):
    """A TMA load that adds `expect_tx_bytes` to the barrier's expected bytes as it is issued
    (0: the user's own arrive-expect-tx counts them)."""

    expect_tx_bytes = prop_def(IntegerAttr)


class OptionalBarrierTarget(IRDLOperation):
    """A copy completing on `barriers[barrier_index]` where it has them (both or neither), else
    in a commit group."""

    barriers = opt_operand_def(BarriersType)
    barrier_index = opt_operand_def(IndexType)

    def verify_barriers(self) -> None:
        verify_barrier_pair(self.barriers, self.barrier_index)


class Predicated(IRDLOperation):
    """A copy only warpgroups where `predicate` (an i1) holds issue; every one without it."""

    predicate = opt_operand_def(IntegerType)


class Arrives(IRDLOperation):
    """With `arrive` set, the issuing warpgroup arrives on the barrier (or closes its commit
    group) once the copy is issued."""

    arrive = prop_def(IntegerAttr)


class Commits(IRDLOperation):
    """A store in the issuing warpgroup's bulk group, closed by a commit when `commit` is set."""

    commit = prop_def(IntegerAttr)


class DescriptorSlot(IRDLOperation):
    """A copy through a tensor map, which the kernel holds at `descriptor_index` once
    `allocate-descriptor-scratch` has placed it."""

    descriptor_index = opt_prop_def(IntegerAttr)


class TmaDescribed(DescriptorSlot):
    """A tensor copy through the tiled-mode tensor map `descriptor`."""

    descriptor = prop_def(TmaDescriptorAttr)


class TmaBox(TmaDescribed):
    """One tensor copy of the box at `coords` (descriptor dims, array order) to or from `smem`."""

    smem = operand_def(MemRefType)
    coords = var_operand_def(IndexType)

    def verify_box(self) -> None:
        spec = self.descriptor.spec()
        smem = self.smem.type
        if not isinstance(smem, MemRefType) or not is_smem(smem):
            raise VerifyException("a TMA copy's SMEM operand must be a shared-memory buffer")
        verify_descriptor_coordinates(spec.rank, self.coords)
        # Bytes, not elements: packed 4-bit buffers travel through byte (uint8) descriptors.
        smem_bytes = buffer_bytes(smem)
        if smem_bytes != spec.box_bytes:
            raise VerifyException(
                f"the SMEM buffer holds {smem_bytes} bytes but the TMA box {spec.box_dims} of "
                f"{spec.element_bytes}-byte elements holds {spec.box_bytes}"
            )


class PeerArray(IRDLOperation):
    """A copy (or a signal) whose GMEM array may be device `peer`'s (`distributed_ops`)."""

    peer = opt_operand_def(IndexType)


class Row4Copy(TmaDescribed):
    """One gather4/scatter4 instruction: SMEM rows `first_row .. first_row + 3` of `smem` (the
    whole SMEM side of the copy) and the GMEM rows `rows[first_row ..]` of the column window
    starting at `column` (descriptor dim 1)."""

    smem = operand_def(MemRefType)
    rows = operand_def(MemRefType)
    column = operand_def(IndexType)
    first_row = prop_def(IntegerAttr)

    def verify_(self) -> None:
        spec = self.descriptor.spec()
        first = self.first_row.value.data
        smem = shape_of(self.smem)
        if spec.rank != 2 or spec.box_dims[0] != 1:
            raise VerifyException(
                f"gather4/scatter4 descriptors are 2-D with one-row boxes, got box {spec.box_dims}")
        if len(smem) != 2 or smem[1] != spec.box_dims[1]:
            raise VerifyException(f"the SMEM buffer {smem} does not hold rows of the box {spec.box_dims}")
        if first % GATHER4_ROWS or not 0 <= first <= smem[0] - GATHER4_ROWS:
            raise VerifyException(f"first_row {first} is not the start of a group of 4 of the {smem[0]} rows")
        if shape_of(self.rows) != (smem[0],):
            raise VerifyException(f"{shape_of(self.rows)} row indices for {smem[0]} SMEM rows")
