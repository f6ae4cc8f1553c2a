"""Register tiles in the `asyncdsl` dialect: making them, reshaping them, reducing them.

A register tile is a `vector<...>` value: the warpgroup's tile, spread over its 128 threads by a
register layout (`#asyncdsl.layout`).  Elementwise math on tiles is `arith` and `math` on vectors;
the ops here are what those dialects lack:

    %z = asyncdsl.full 0.0 : f32 -> vector<64x128xf32>              // every element the constant
    %s = asyncdsl.splat %x : f32 -> vector<64x128xf32>              // every element a traced scalar
    %i = asyncdsl.iota dim 1 : vector<64x128xi32>                   // each element's column
    %b = asyncdsl.broadcast_in_dim %r [0] : vector<64xf32> -> vector<64x128xf32>
    %m = asyncdsl.reduce max %t [1] : vector<64x128xf32> -> vector<64xf32>
    %l = asyncdsl.relayout %t #asyncdsl.layout<wgmma> : vector<64x128xf32>

Ops that make a tile may carry the layout the user gave (`layout`); `infer-layouts` gives every
tile one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, FloatAttr, IntegerAttr, IntegerType, VectorType, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def
from xdsl.irdl import prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import TILE_CONSTANT, element_bits, vector_type
from asyncdsl.dialects.layout_attrs import GivenLayout, LayoutAttr, layout_of, layout_props
from asyncdsl.dialects.option_attrs import TileReductionAttr
from asyncdsl.hw.fragments import Layout, SplatLayout
from asyncdsl.hw.options import TileReduction
from asyncdsl.hw.reduction_tree import reduction_tree


def tile_shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, VectorType)
    return tuple(value.type.get_shape())


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


class _MakesTile(GivenLayout):
    """An op that makes a tile."""

    result = result_def(VectorType)

    def verify_element(self, given: Attribute, subject: str) -> None:
        """The tile's elements are of the type `given` (`subject` names what the op was given)."""
        if given != self.result.type.element_type:
            raise VerifyException(f"{subject} makes a tile of {self.result.type.element_type}")


@irdl_op_definition
class FullOp(_MakesTile):
    """A tile whose every element is the constant `value`."""

    name = "asyncdsl.full"
    value = prop_def(TILE_CONSTANT)

    assembly_format = "$value (`layout` $layout^)? attr-dict `:` type($result)"

    def __init__(self, value: FloatAttr | IntegerAttr, result_type: VectorType, layout: Layout | None = None):
        super().__init__(properties={"value": value, **layout_props(layout)}, result_types=[result_type])

    def verify_(self) -> None:
        self.verify_element(self.value.type, f"full of {self.value.type}")


@irdl_op_definition
class SplatOp(_MakesTile):
    """A tile whose every element is the traced scalar `scalar` (of the tile's element type)."""

    name = "asyncdsl.splat"
    scalar = operand_def()

    assembly_format = "$scalar (`layout` $layout^)? attr-dict `:` type($scalar) `->` type($result)"

    def __init__(self, scalar: SSAValue, result_type: VectorType, layout: Layout | None = None):
        super().__init__(operands=[scalar], properties=layout_props(layout), result_types=[result_type])

    def verify_(self) -> None:
        self.verify_element(self.scalar.type, f"splat of a {self.scalar.type}")


@irdl_op_definition
class IotaOp(_MakesTile):
    """A tile of integers: each element's index along `dim`."""

    name = "asyncdsl.iota"
    dim = prop_def(IntegerAttr[I64])

    assembly_format = "`dim` $dim (`layout` $layout^)? attr-dict `:` type($result)"

    def __init__(self, result_type: VectorType, dim: int, layout: Layout | None = None):
        super().__init__(properties={"dim": IntegerAttr(dim, i64), **layout_props(layout)},
                         result_types=[result_type])

    def verify_(self) -> None:
        if not isinstance(self.result.type.element_type, IntegerType):
            raise VerifyException(f"iota makes a tile of integers, not {self.result.type.element_type}")
        if not 0 <= self.dim.value.data < self.result.type.get_num_dims():
            raise VerifyException(
                f"iota along dim {self.dim.value.data} of a rank-{self.result.type.get_num_dims()} tile")


class _TileToTile(IRDLOperation):
    """An op that makes a tile of another, `operand`."""

    operand = operand_def(VectorType)
    result = result_def(VectorType)


@irdl_op_definition
class BroadcastInDimOp(_TileToTile):
    """`operand` repeated along the dims of the result it does not have (numpy broadcasting):
    its dim i becomes the result's dim `dims[i]`, of the same size or of size 1 broadcast."""

    name = "asyncdsl.broadcast_in_dim"
    dims = prop_def(DenseArrayBase)

    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, operand: SSAValue, result_type: VectorType, dims: Sequence[int]):
        super().__init__(operands=[operand], properties={"dims": _ints(dims)}, result_types=[result_type])

    def verify_(self) -> None:
        dims = tuple(self.dims.get_values())
        source, target = tile_shape(self.operand), tile_shape(self.result)
        if (len(dims) != len(source) or list(dims) != sorted(set(dims))
                or any(not 0 <= d < len(target) for d in dims)):
            raise VerifyException(
                f"broadcast dims {dims} must be increasing dims of the result, one per operand dim")
        if any(size not in (1, target[d]) for size, d in zip(source, dims)):
            raise VerifyException(f"cannot broadcast a {source} tile to {target} along {dims}")
        if vector_type(self.operand.type).element_type != self.result.type.element_type:
            raise VerifyException("broadcast_in_dim keeps the element type")


@irdl_op_definition
class ReduceOp(_TileToTile):
    """`operand` reduced with `kind` over `axes` (in the fixed order of `hw.reduction_tree`)."""

    name = "asyncdsl.reduce"
    kind = prop_def(TileReductionAttr)
    axes = prop_def(DenseArrayBase)

    assembly_format = "$kind $operand attr-dict `:` type($operand) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, operand: SSAValue, kind: TileReduction, axes: Sequence[int]):
        shape = tile_shape(operand)
        kept = [size for dim, size in enumerate(shape) if dim not in axes]
        super().__init__(
            operands=[operand],
            properties={"kind": TileReductionAttr(TileReduction(kind)), "axes": _ints(sorted(axes))},
            result_types=[VectorType(vector_type(operand.type).element_type, kept)],
        )

    def verify_(self) -> None:
        axes = tuple(self.axes.get_values())
        shape = tile_shape(self.operand)
        distinct = list(axes) == sorted(set(axes)) and all(0 <= a < len(shape) for a in axes)
        if not axes or not distinct:
            raise VerifyException(f"reduce over axes {axes} of a {shape} tile: distinct axes of the tile")


@irdl_op_definition
class RelayoutOp(_TileToTile):
    """`operand` in register layout `layout` (the user's `tile.to_layout(L)`)."""

    name = "asyncdsl.relayout"
    layout = prop_def(LayoutAttr)

    assembly_format = "$operand $layout attr-dict `:` type($operand) `->` type($result)"

    def __init__(self, operand: SSAValue, layout: Layout):
        super().__init__(operands=[operand], properties={"layout": LayoutAttr(layout)},
                         result_types=[operand.type])


def scratch_bytes(op: Operation) -> int:
    """The shared memory (bytes, per warpgroup) `op` exchanges register data through; needs
    the layouts infer-layouts records."""
    if isinstance(op, ReduceOp):
        layout = layout_of(op.operand)
        if layout is None or isinstance(layout, SplatLayout):
            return 0
        tree = reduction_tree(layout, tile_shape(op.operand), tuple(op.axes.get_values()))
        return math.prod(tree.scratch_shape) * _register_bytes(op.operand) if tree.scratch_shape else 0
    if isinstance(op, RelayoutOp) and layout_of(op.operand) != op.layout.layout:
        return math.prod(tile_shape(op.operand)) * _register_bytes(op.operand)
    return 0


def _register_bytes(value: SSAValue) -> int:
    """Bytes one element takes in scratch: 4, or 2 for the 16-bit (and narrower) types."""
    return 4 if element_bits(value.type) >= 32 else 2


OPERATIONS: tuple[type[Operation], ...] = (FullOp, SplatOp, IotaOp, BroadcastInDimOp, ReduceOp, RelayoutOp)
