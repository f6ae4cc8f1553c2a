"""Row gathers and scatters in the `asyncdsl` dialect (Blackwell's `.tile::gather4`/`scatter4`).

A gather loads the rows `rows[0], rows[1], ...` of a column window of a 2-D GMEM array into
consecutive rows of an SMEM buffer; a scatter stores SMEM rows to those GMEM rows. The row
indices are data: they live in an SMEM buffer of unsigned integers (typically loaded there by an
ordinary `async_copy`), and the issuing thread reads them before each instruction.

The user-level `asyncdsl.async_copy_rows` becomes, in `resolve-transforms`, one
`asyncdsl.tma_gather4` or `asyncdsl.tma_scatter4` per four rows, all through one tiled
descriptor whose box is a single row of the window.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, MemRefType, Signedness
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def
from xdsl.irdl import prop_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import Arrives, BarrierTarget, Commits, CopySides, OptionalBarrierTarget
from asyncdsl.dialects.copy_bases import Row4Copy
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.ir_utils import SegmentedOperands, bool_prop, element_bits, int_prop, is_smem
from asyncdsl.dialects.ir_utils import memref_type, optional_operand, shape_of, verify_coordinates
from asyncdsl.dialects.ir_utils import verify_copy_sides, verify_swizzle, verify_swizzled_row
from asyncdsl.hw.limits import GATHER4_ROWS, GATHER4_SMEM_ALIGNMENT, GMEM_STRIDE_ALIGNMENT, MAX_BOX_DIM

MAX_COLUMNS = MAX_BOX_DIM  # the row is a tiled box dim
ROW_INDEX_BITS = (8, 16, 32)


def _row_index_error(type_: Attribute) -> str | None:
    """Why `type_` cannot hold row indices, or None if it can (unsigned, at most 32 bits)."""
    if not isinstance(type_, IntegerType):
        return f"row indices must be unsigned integers (uint8, uint16 or uint32), got {type_}"
    if type_.signedness.data != Signedness.UNSIGNED:
        return f"row indices must be unsigned (uint8, uint16 or uint32), got signed {type_}"
    if type_.width.data not in ROW_INDEX_BITS:
        return (
            f"row indices are unsigned integers of at most 32-bit (uint8, uint16 or uint32), got "
            f"{type_.width.data}-bit {type_}"
        )
    return None


class _RowIndices(IRDLOperation):
    """The GMEM rows a gather or scatter visits (a 1-D SMEM buffer of their indices) and the
    first column of its window."""

    rows = operand_def(MemRefType)
    column_start = operand_def(IndexType)


@irdl_op_definition
class AsyncCopyRowsOp(CopySides, _RowIndices, OptionalBarrierTarget, Arrives, SegmentedOperands):
    """A row gather (GMEM -> SMEM) or scatter (SMEM -> GMEM) as the user wrote it.

    The GMEM side is a 2-D array and the column window `[column_start, column_start + columns)`;
    the SMEM side is a `(len(rows), columns)` buffer; `rows` is a 1-D SMEM buffer of unsigned
    row indices. Gathers complete on `barriers[barrier_index]` (`arrive`: the warpgroup arrives
    with expect-tx of every row's bytes); scatters join the warpgroup's bulk group (`arrive`:
    commit it).
    """

    name = "asyncdsl.async_copy_rows"

    columns = prop_def(IntegerAttr)
    swizzle = prop_def(IntegerAttr)

    def __init__(
        self,
        source: SSAValue,
        destination: SSAValue,
        rows: SSAValue,
        column_start: SSAValue,
        columns: int,
        *,
        barriers: SSAValue | None = None,
        barrier_index: SSAValue | None = None,
        swizzle: int = 0,
        arrive: bool = True,
    ):
        super().__init__(
            operands=[
                source, destination, rows, column_start,
                optional_operand(barriers), optional_operand(barrier_index),
            ],
            properties={"columns": int_prop(columns), "swizzle": int_prop(swizzle),
                        "arrive": bool_prop(arrive)},
        )

    @property
    def row_count(self) -> int:
        return shape_of(self.rows)[0]

    def verify_(self) -> None:
        verify_copy_sides("a row gather/scatter", self.source.type, self.destination.type)
        gmem = shape_of(self.gmem)
        if len(gmem) != 2:
            raise VerifyException(
                f"row gathers/scatters (tile::gather4/scatter4) index the rows of a 2-D GMEM array, got "
                f"rank {len(gmem)} (shape {gmem})"
            )
        self._verify_rows()
        bits = element_bits(self.gmem.type)
        if bits < 8:
            raise VerifyException(f"row gathers/scatters have no sub-byte element type: {bits}-bit elements")
        columns = self.columns.value.data
        smem = shape_of(self.smem)
        if smem != (self.row_count, columns):
            raise VerifyException(
                f"the SMEM buffer must have shape (rows, columns) = ({self.row_count}, {columns}), got {smem}"
            )
        if not 1 <= columns <= MAX_COLUMNS:
            raise VerifyException(f"a row gather/scatter moves 1 to {MAX_COLUMNS} columns, got {columns}")
        verify_coordinates([self.column_start], "column start")
        item = bits // 8
        row_stride = gmem[1] * item
        if row_stride % GMEM_STRIDE_ALIGNMENT:
            raise VerifyException(
                f"GMEM row stride {row_stride} bytes ({gmem[1]} x {item} bytes) is not a multiple of "
                f"{GMEM_STRIDE_ALIGNMENT}"
            )
        instruction_bytes = GATHER4_ROWS * columns * item
        if instruction_bytes % GATHER4_SMEM_ALIGNMENT:
            raise VerifyException(
                f"each gather4/scatter4 instruction moves {GATHER4_ROWS} rows of {columns * item} "
                f"bytes = {instruction_bytes} bytes, which must be a multiple of {GATHER4_SMEM_ALIGNMENT} "
                "(each instruction's SMEM rows start 128-byte aligned)"
            )
        swizzle = self.swizzle.value.data
        verify_swizzle(swizzle)
        verify_swizzled_row(swizzle, columns, item, "columns")
        self.verify_barriers()
        if self.is_load and self.barriers is None:
            raise VerifyException("a row gather needs a barrier to complete on (barrier=...)")
        if not self.is_load and self.barriers is not None:
            raise VerifyException("a row scatter takes no barrier: it completes through await_async_copy")

    def _verify_rows(self) -> None:
        if not is_smem(self.rows.type) or len(shape_of(self.rows)) != 1:
            raise VerifyException(
                f"the row indices must be a 1-D shared-memory buffer, got {self.rows.type}"
            )
        problem = _row_index_error(memref_type(self.rows.type).element_type)
        if problem:
            raise VerifyException(problem)
        if self.row_count % GATHER4_ROWS:
            raise VerifyException(
                f"{self.row_count} row indices: a row gather/scatter moves rows in groups of "
                f"{GATHER4_ROWS} (one gather4/scatter4 instruction each)"
            )


@irdl_op_definition
class TmaGather4Op(Row4Copy, BarrierTarget):
    """One `cp.async.bulk.tensor.2d ... .tile::gather4` load of four GMEM rows into four SMEM
    rows (see `Row4Copy`), completing their bytes on `barriers[barrier_index]`."""

    name = "asyncdsl.tma_gather4"

    def __init__(
        self, smem: SSAValue, rows: SSAValue, column: SSAValue, barriers: SSAValue, barrier_index: SSAValue,
        descriptor: TmaDescriptorAttr, first_row: int,
    ):
        super().__init__(
            operands=[smem, rows, column, barriers, barrier_index],
            properties={"descriptor": descriptor, "first_row": int_prop(first_row)},
        )


@irdl_op_definition
class TmaScatter4Op(Row4Copy, Commits):
    """One `cp.async.bulk.tensor.2d ... .tile::scatter4` store of four SMEM rows to four GMEM
    rows (see `Row4Copy`), in the issuing warpgroup's bulk group (closed when `commit` is set)."""

    name = "asyncdsl.tma_scatter4"

    def __init__(
        self, smem: SSAValue, rows: SSAValue, column: SSAValue, descriptor: TmaDescriptorAttr,
        first_row: int, commit: bool,
    ):
        super().__init__(
            operands=[smem, rows, column],
            properties={"descriptor": descriptor, "first_row": int_prop(first_row),
                        "commit": bool_prop(commit)},
        )


OPERATIONS: tuple[type[Operation], ...] = (AsyncCopyRowsOp, TmaGather4Op, TmaScatter4Op)
