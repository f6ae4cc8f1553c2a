"""Register tiles to and from memory: a whole shared-memory buffer (or view) read into a tile or
written from one, by every thread of the warpgroup at once (ordinary loads and stores, not the
copy engine).

    %t = asyncdsl.load_smem %buf : memref<64x256xbf16, #asyncdsl.smem> -> vector<64x256xbf16>
    asyncdsl.store_smem %t, %buf : vector<64x256xbf16>, memref<64x256xbf16, #asyncdsl.smem>

The tile has the buffer's shape and element type.  A load takes the layout it is given (`layout`)
or the one `infer-layouts` picks; a store writes a tile in whatever layout it has.  Stores are
generic-proxy writes: a TMA store or wgmma that reads the bytes needs `fence_async_smem` first.
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import is_smem
from asyncdsl.dialects.layout_attrs import LayoutAttr
from asyncdsl.hw.fragments import Layout


def _same_tile(buffer: MemRefType, tile: VectorType, what: str) -> None:
    if not is_smem(buffer):
        raise VerifyException(f"{what} takes a shared-memory buffer")
    if tuple(buffer.get_shape()) != tuple(tile.get_shape()) or buffer.element_type != tile.element_type:
        raise VerifyException(
            f"{what} moves a whole buffer: the tile ({tile}) must have the buffer's shape and element type ({buffer})"
        )


@irdl_op_definition
class LoadSmemOp(IRDLOperation):
    """The tile held in shared-memory buffer `smem`."""

    name = "asyncdsl.load_smem"
    smem = operand_def(MemRefType)
    layout = opt_prop_def(LayoutAttr)
    result = result_def(VectorType)

    assembly_format = "$smem (`layout` $layout^)? attr-dict `:` type($smem) `->` type($result)"

    def __init__(self, smem: SSAValue, layout: Layout | None = None):
        buffer = smem.type
        super().__init__(
            operands=[smem],
            properties={"layout": LayoutAttr(layout)} if layout is not None else {},
            result_types=[VectorType(buffer.element_type, buffer.get_shape())],
        )

    def verify_(self) -> None:
        _same_tile(self.smem.type, self.result.type, "load_smem")


@irdl_op_definition
class StoreSmemOp(IRDLOperation):
    """Write the tile `value` into shared-memory buffer `smem`."""

    name = "asyncdsl.store_smem"
    value = operand_def(VectorType)
    smem = operand_def(MemRefType)

    assembly_format = "$value `,` $smem attr-dict `:` type($value) `,` type($smem)"

    def __init__(self, value: SSAValue, smem: SSAValue):
        super().__init__(operands=[value, smem])

    def verify_(self) -> None:
        _same_tile(self.smem.type, self.value.type, "store_smem")


OPERATIONS: tuple[type[Operation], ...] = (LoadSmemOp, StoreSmemOp)
