"""One element of a GMEM integer array read as an index: what a kernel computes addresses, loop
bounds and copy coordinates from when they live in device memory (a batch's sequence offsets, a
block table), with no trip through the host.

    %i = asyncdsl.load_index %offsets[%b] : memref<9xi32>

Every thread of the warpgroup reads the element (the same address: one transaction), as an
ordinary read-only load.  The element type is a 32-bit integer; the index holds its bits.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, var_operand_def

from asyncdsl.dialects.ir_utils import IndexValued, verify_int32_element


@irdl_op_definition
class LoadIndexOp(IndexValued):
    """The 32-bit integer `array[indices]` of a GMEM array argument, as an index."""

    name = "asyncdsl.load_index"

    array = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    def __init__(self, array: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[array, indices], result_types=[IndexType()])

    def verify_(self) -> None:
        verify_int32_element(self.array, self.indices, "load_index", "reads", "elements")


OPERATIONS: tuple[type[Operation], ...] = (LoadIndexOp,)
