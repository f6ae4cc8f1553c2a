"""Mutable register tiles (`asyncdsl.registers`): allocated once, read and written whole.

    %acc = asyncdsl.alloc_registers layout #asyncdsl.layout<wgmma> : !asyncdsl.registers<vector<64x128xf32>>
    asyncdsl.write_registers %zero, %acc : vector<64x128xf32>, !asyncdsl.registers<vector<64x128xf32>>
    %t = asyncdsl.read_registers %acc : !asyncdsl.registers<vector<64x128xf32>> -> vector<64x128xf32>

A read is the value of the last write before it in program order (a loop body's reads see the
previous iteration's writes): what PTX's mutable registers give.  Tiles are SSA values; these
refs are how a value crosses an `scf.for` or `scf.if` that the frontend traces once.
"""

from __future__ import annotations

from xdsl.dialects.builtin import VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.layout_attrs import LayoutAttr
from asyncdsl.dialects.memory_attrs import RegistersType
from asyncdsl.hw.fragments import Layout


@irdl_op_definition
class AllocRegistersOp(IRDLOperation):
    """A mutable register tile, in `layout` if given (else inferred from its reads and writes)."""

    name = "asyncdsl.alloc_registers"
    layout = opt_prop_def(LayoutAttr)
    result = result_def(RegistersType)

    assembly_format = "(`layout` $layout^)? attr-dict `:` type($result)"

    def __init__(self, tile: VectorType, layout: Layout | None = None):
        super().__init__(
            properties={"layout": LayoutAttr(layout)} if layout is not None else {},
            result_types=[RegistersType(tile)],
        )


@irdl_op_definition
class ReadRegistersOp(IRDLOperation):
    """The tile a register ref holds now."""

    name = "asyncdsl.read_registers"
    ref = operand_def(RegistersType)
    result = result_def(VectorType)

    assembly_format = "$ref attr-dict `:` type($ref) `->` type($result)"

    def __init__(self, ref: SSAValue):
        super().__init__(operands=[ref], result_types=[ref.type.tile])

    def verify_(self) -> None:
        if self.result.type != self.ref.type.tile:
            raise VerifyException(f"reading a {self.ref.type} gives a {self.ref.type.tile}")


@irdl_op_definition
class WriteRegistersOp(IRDLOperation):
    """Make a register ref hold `value`."""

    name = "asyncdsl.write_registers"
    value = operand_def(VectorType)
    ref = operand_def(RegistersType)

    assembly_format = "$value `,` $ref attr-dict `:` type($value) `,` type($ref)"

    def __init__(self, value: SSAValue, ref: SSAValue):
        super().__init__(operands=[value, ref])

    def verify_(self) -> None:
        if self.value.type != self.ref.type.tile:
            raise VerifyException(f"a {self.ref.type} holds {self.ref.type.tile} tiles, not {self.value.type}")


OPERATIONS: tuple[type[Operation], ...] = (AllocRegistersOp, ReadRegistersOp, WriteRegistersOp)
