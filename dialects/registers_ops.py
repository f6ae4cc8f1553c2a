"""Mutable register tiles (`asyncdsl.registers`): allocated once, read and written whole.

    %acc = asyncdsl.alloc_registers layout #asyncdsl.layout<wgmma> : !asyncdsl.registers<vector<64x128xf32>>
    asyncdsl.write_registers %zero, %acc : vector<64x128xf32>, !asyncdsl.registers<vector<64x128xf32>>
    %t = asyncdsl.read_registers %acc : !asyncdsl.registers<vector<64x128xf32>> -> vector<64x128xf32>
    %w = asyncdsl.read_registers %acc {offsets = array<i64: 0, 64>} : ... -> vector<64x32xf32>

A read may take a static window (`offsets`, the result's shape): the registers that hold it,
which the layout's base tiles must line up with (`hw.fragments.TiledLayout.window_registers`),
so nothing moves between threads (an epilogue converts and stores a wide accumulator a slice at
a time, keeping few registers live).

A read is the value of the last write before it in program order (a loop body's reads see the
previous iteration's writes): what PTX's mutable registers give.  Tiles are SSA values; these
refs are how a value crosses an `scf.for` or `scf.if` that the frontend traces once.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, VectorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, opt_prop_def
from xdsl.irdl import result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import WritesTile, registers_type
from asyncdsl.dialects.layout_attrs import GivenLayout, layout_props
from asyncdsl.dialects.memory_attrs import RegistersType
from asyncdsl.hw.fragments import Layout


@irdl_op_definition
class AllocRegistersOp(GivenLayout):
    """A mutable register tile, in `layout` if given (else inferred from its reads and writes)."""

    name = "asyncdsl.alloc_registers"
    result = result_def(RegistersType)

    assembly_format = "(`layout` $layout^)? attr-dict `:` type($result)"

    def __init__(self, tile: VectorType, layout: Layout | None = None):
        super().__init__(
            properties=layout_props(layout),
            result_types=[RegistersType(tile)],
        )


class _RegistersAccess(IRDLOperation):
    """An op that reads or writes the register tile `ref` refers to."""

    ref = operand_def(RegistersType)

    @property
    def held(self) -> VectorType:
        """The type of the tile the ref holds."""
        return registers_type(self.ref.type).tile


@irdl_op_definition
class ReadRegistersOp(_RegistersAccess):
    """The tile a register ref holds now."""

    name = "asyncdsl.read_registers"
    offsets = opt_prop_def(DenseArrayBase)
    result = result_def(VectorType)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$ref attr-dict `:` type($ref) `->` type($result)"

    def __init__(self, ref: SSAValue, window: tuple[tuple[int, ...], tuple[int, ...]] | None = None):
        """The whole tile, or the `window` (offsets, shape) of it."""
        tile = registers_type(ref.type).tile
        if window is None:
            super().__init__(operands=[ref], result_types=[tile])
            return
        offsets, shape = window
        super().__init__(
            operands=[ref],
            properties={"offsets": DenseArrayBase.from_list(i64, list(offsets))},
            result_types=[VectorType(tile.element_type, shape)],
        )

    @property
    def window_offsets(self) -> tuple[int, ...] | None:
        return None if self.offsets is None else tuple(self.offsets.get_values())

    def verify_(self) -> None:
        tile = self.held
        if self.result.type.element_type != tile.element_type:
            raise VerifyException(f"reading a {self.ref.type} gives {tile.element_type} elements")
        shape, full = tuple(self.result.type.get_shape()), tuple(tile.get_shape())
        offsets = self.window_offsets
        if offsets is None:
            if shape != full:
                raise VerifyException(f"reading a whole {self.ref.type} gives a {tile}")
            return
        if len(offsets) != len(full) or any(o < 0 or o + s > f for o, s, f in zip(offsets, shape, full)):
            raise VerifyException(
                f"the window at {offsets} of shape {shape} is not inside the {full} registers")


@irdl_op_definition
class WriteRegistersOp(WritesTile, _RegistersAccess):
    """Make a register ref hold `value`."""

    name = "asyncdsl.write_registers"

    assembly_format = "$value `,` $ref attr-dict `:` type($value) `,` type($ref)"

    def __init__(self, value: SSAValue, ref: SSAValue):
        super().__init__(operands=[value, ref])

    def verify_(self) -> None:
        if self.tile != self.held:
            raise VerifyException(f"a {self.ref.type} holds {self.held} tiles, not {self.tile}")


OPERATIONS: tuple[type[Operation], ...] = (AllocRegistersOp, ReadRegistersOp, WriteRegistersOp)
