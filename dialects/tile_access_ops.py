"""Register tiles to and from memory: a whole shared-memory buffer (or view) read into a tile or
written from one, and a window of a GMEM array read or written element by element with a mask,
by every thread of the warpgroup at once (ordinary loads and stores, not the copy engine).

    %t = asyncdsl.load_smem %buf : memref<64x256xbf16, #asyncdsl.smem> -> vector<64x256xbf16>
    asyncdsl.store_smem %t, %buf : vector<64x256xbf16>, memref<64x256xbf16, #asyncdsl.smem>

The tile has the buffer's shape (its logical one when it carries a layout, `hw.smem_layout`) and
element type.  A load takes the layout it is given (`layout`)
or the one `infer-layouts` picks; a store writes a tile in whatever layout it has.  Stores are
generic-proxy writes: a TMA store or wgmma that reads the bytes needs `fence_async_smem` first.
With `in cta %r` they reach the copy of the buffer in the CTA of cluster rank %r (distributed
shared memory, `ld/st.shared::cluster`):

    asyncdsl.store_smem %t, %buf in cta %r : vector<64x128xf32>, memref<64x128xf32, #asyncdsl.smem>

    %t = asyncdsl.load_gmem %x[%i, %c0] mask %m : vector<64x100xi1> other 0.0 : memref<1000x100xf32>
        -> vector<64x100xf32>
    asyncdsl.store_gmem %t, %y[%i, %c0] : vector<64x100xf32>, memref<1000x100xf32>

GMEM windows are what TMA cannot move (rows whose stride is not a multiple of 16 bytes, windows
that start anywhere): elements outside the array are never touched.  A gather reads element
(i0[e], i1[e], ...) of the array for each element e of its int32 index tiles (one per dim, all of
the result's shape), under the same rules:

    %t = asyncdsl.gather_gmem %x[%rows, %cols] mask %m : vector<64x128xi1> other 0.0 : memref<1000x100xf32>,
        vector<64x128xi32>, vector<64x128xi32> -> vector<64x128xf32>
    asyncdsl.scatter_gmem %t, %y[%rows, %cols] : vector<64x128xf32>, memref<1000x100xf32>, vector<64x128xi32>,
        vector<64x128xi32>

A scatter writes element e of its tile to the element its indices name, under the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, FloatAttr, IndexType, IntegerAttr, IntegerType, MemRefType
from xdsl.dialects.builtin import VectorType, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation, ParsePropInAttrDict, irdl_op_definition
from xdsl.irdl import operand_def, opt_operand_def, prop_def, result_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import TILE_CONSTANT, WritesTile, is_smem, logical_shape, memref_type
from asyncdsl.dialects.ir_utils import vector_type
from asyncdsl.dialects.layout_attrs import GivenLayout, layout_props
from asyncdsl.hw.fragments import Layout

SQUEEZED = -1  # the size of an indexed (squeezed) dim in a GMEM window


def _same_tile(buffer: Attribute, tile: VectorType, what: str) -> None:
    if not is_smem(buffer):
        raise VerifyException(f"{what} takes a shared-memory buffer")
    element = memref_type(buffer).element_type
    if logical_shape(buffer) != tuple(tile.get_shape()) or element != tile.element_type:
        raise VerifyException(
            f"{what} moves a whole buffer: the tile ({tile}) must have the buffer's (logical) shape and "
            f"element type ({buffer})"
        )


class _SmemTile(IRDLOperation):
    """A whole shared-memory buffer `smem` as a tile: this CTA's, or with `cta` the copy of the
    buffer in the CTA of that rank of the cluster (distributed shared memory)."""

    smem = operand_def(MemRefType)
    cta = opt_operand_def(IndexType)


@irdl_op_definition
class LoadSmemOp(_SmemTile, GivenLayout):
    """The tile the buffer holds."""

    name = "asyncdsl.load_smem"
    result = result_def(VectorType)

    assembly_format = ("$smem (`in` `cta` $cta^)? (`layout` $layout^)? attr-dict `:` type($smem) "
                       "`->` type($result)")

    def __init__(self, smem: SSAValue, layout: Layout | None = None, cta: SSAValue | None = None):
        buffer = memref_type(smem.type)
        super().__init__(
            operands=[smem, [] if cta is None else [cta]],
            properties=layout_props(layout),
            result_types=[VectorType(buffer.element_type, logical_shape(buffer))],
        )

    def verify_(self) -> None:
        _same_tile(self.smem.type, self.result.type, "load_smem")


@irdl_op_definition
class StoreSmemOp(WritesTile, _SmemTile):
    """Write the tile `value` into the buffer."""

    name = "asyncdsl.store_smem"

    assembly_format = "$value `,` $smem (`in` `cta` $cta^)? attr-dict `:` type($value) `,` type($smem)"

    def __init__(self, value: SSAValue, smem: SSAValue, cta: SSAValue | None = None):
        super().__init__(operands=[value, smem, [] if cta is None else [cta]])

    def verify_(self) -> None:
        _same_tile(self.smem.type, self.tile, "store_smem")




def _gmem_tile_shape(sizes: Sequence[int]) -> tuple[int, ...]:
    return tuple(size for size in sizes if size != SQUEEZED)


class _GmemWindow(IRDLOperation):
    """Every element of the window of GMEM array `gmem` at `starts` (`sizes[d]` along dim d, -1
    for an index), except those outside the array or where the bool tile `mask` is false."""

    gmem = operand_def(MemRefType)
    starts = var_operand_def(IndexType)
    mask = opt_operand_def(VectorType)
    sizes = prop_def(DenseArrayBase)

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())

    def verify_window(self, tile: VectorType, what: str) -> None:
        sizes = tuple(self.sizes.get_values())
        gmem = memref_type(self.gmem.type)
        shape = tuple(gmem.get_shape())
        if len(sizes) != len(shape) or len(self.starts) != len(shape):
            raise VerifyException(f"{what}: one start and one size per dim of the {shape} array")
        if any(size != SQUEEZED and not 0 < size for size in sizes):
            raise VerifyException(f"{what}: window sizes {sizes} must be positive (or -1 for an index)")
        if (_gmem_tile_shape(sizes) != tuple(tile.get_shape())
                or tile.element_type != gmem.element_type):
            raise VerifyException(
                f"{what}: the tile ({tile}) must have the window's shape and the array's element type")
        if self.mask is not None and self.mask.type != VectorType(IntegerType(1), tile.get_shape()):
            raise VerifyException(f"{what}: the mask must be a bool tile of the window's shape")


class _GmemIndexed(IRDLOperation):
    """Element (indices[0][e], indices[1][e], ...) of GMEM array `gmem` for each element e of the
    int32 index tiles, except where the indices fall outside the array or `mask` is false."""

    gmem = operand_def(MemRefType)
    indices = var_operand_def(VectorType)
    mask = opt_operand_def(VectorType)

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())

    def verify_indexed(self, tile: VectorType, what: str) -> None:
        shape = tuple(tile.get_shape())
        gmem = memref_type(self.gmem.type)
        if len(self.indices) != len(gmem.get_shape()):
            raise VerifyException(f"{what}: one index tile per dim of the {tuple(gmem.get_shape())} array")
        for index in self.indices:
            if index.type != VectorType(IntegerType(32), shape):
                raise VerifyException(
                    f"{what}: the index tiles must be {shape} int32 tiles, got {index.type}")
        if tile.element_type != gmem.element_type:
            raise VerifyException(f"{what}: the tile holds the array's element type")
        if self.mask is not None and self.mask.type != VectorType(IntegerType(1), shape):
            raise VerifyException(f"{what}: the mask must be a bool tile of the indices' shape")


class _FilledRead(GivenLayout):
    """A GMEM read into a tile: the elements it does not read hold `other`, a constant of the
    tile's element type."""

    other = prop_def(TILE_CONSTANT)
    result = result_def(VectorType)

    def verify_other(self, what: str) -> None:
        if self.other.type != self.result.type.element_type:
            raise VerifyException(
                f"{what}: `other` is a {self.other.type}, the tile holds {self.result.type.element_type}")


@irdl_op_definition
class LoadGmemOp(_GmemWindow, _FilledRead):
    """The window as a tile."""

    name = "asyncdsl.load_gmem"

    assembly_format = (
        "$gmem `[` $starts `]` (`mask` $mask^ `:` type($mask))? `other` $other (`layout` $layout^)? "
        "attr-dict `:` type($gmem) `->` type($result)"
    )

    def __init__(self, gmem: SSAValue, starts: Sequence[SSAValue], sizes: Sequence[int],
                 other: FloatAttr | IntegerAttr, mask: SSAValue | None = None, layout: Layout | None = None):
        element = memref_type(gmem.type).element_type
        super().__init__(
            operands=[gmem, list(starts), [mask] if mask is not None else []],
            properties={
                "sizes": DenseArrayBase.from_list(i64, list(sizes)), "other": other,
                **layout_props(layout),
            },
            result_types=[VectorType(element, _gmem_tile_shape(sizes))],
        )

    def verify_(self) -> None:
        self.verify_window(self.result.type, "load_gmem")
        self.verify_other("load_gmem")


@irdl_op_definition
class StoreGmemOp(WritesTile, _GmemWindow):
    """Write tile `value` into the window (the elements left out are left alone)."""

    name = "asyncdsl.store_gmem"

    assembly_format = (
        "$value `,` $gmem `[` $starts `]` (`mask` $mask^ `:` type($mask))? attr-dict `:` "
        "type($value) `,` type($gmem)"
    )

    def __init__(self, value: SSAValue, gmem: SSAValue, starts: Sequence[SSAValue],
                 sizes: Sequence[int], mask: SSAValue | None = None):
        super().__init__(
            operands=[value, gmem, list(starts), [mask] if mask is not None else []],
            properties={"sizes": DenseArrayBase.from_list(i64, list(sizes))},
        )

    def verify_(self) -> None:
        self.verify_window(self.tile, "store_gmem")


@irdl_op_definition
class GatherGmemOp(_GmemIndexed, _FilledRead):
    """The indexed elements as a tile of the index tiles' shape."""

    name = "asyncdsl.gather_gmem"

    assembly_format = (
        "$gmem `[` $indices `]` (`mask` $mask^ `:` type($mask))? `other` $other (`layout` $layout^)? "
        "attr-dict `:` type($gmem) `,` type($indices) `->` type($result)"
    )

    def __init__(self, gmem: SSAValue, indices: Sequence[SSAValue], other: FloatAttr | IntegerAttr,
                 mask: SSAValue | None = None, layout: Layout | None = None):
        shape = vector_type(indices[0].type).get_shape()
        super().__init__(
            operands=[gmem, list(indices), [mask] if mask is not None else []],
            properties={"other": other, **layout_props(layout)},
            result_types=[VectorType(memref_type(gmem.type).element_type, shape)],
        )

    def verify_(self) -> None:
        self.verify_indexed(self.result.type, "gather_gmem")
        self.verify_other("gather_gmem")


@irdl_op_definition
class ScatterGmemOp(WritesTile, _GmemIndexed):
    """Write element e of tile `value` to the element its indices name.  Two elements written to
    one array element leave it undefined (the interpreter refuses them)."""

    name = "asyncdsl.scatter_gmem"

    assembly_format = (
        "$value `,` $gmem `[` $indices `]` (`mask` $mask^ `:` type($mask))? attr-dict "
        "`:` type($value) `,` type($gmem) `,` type($indices)"
    )

    def __init__(self, value: SSAValue, gmem: SSAValue, indices: Sequence[SSAValue],
                 mask: SSAValue | None = None):
        super().__init__(operands=[value, gmem, list(indices), [mask] if mask is not None else []])

    def verify_(self) -> None:
        self.verify_indexed(self.tile, "scatter_gmem")


OPERATIONS: tuple[type[Operation], ...] = (
    LoadSmemOp, StoreSmemOp, LoadGmemOp, StoreGmemOp, GatherGmemOp, ScatterGmemOp,
)
