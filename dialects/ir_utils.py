"""Helpers shared by the op modules of the `asyncdsl` dialect: property and operand builders, the
op bases of declarations several modules repeat (segmented operands, an index result, a written
tile, optional collective dims), constant indices, memory-space tests, typed views of operand
types, shapes and sizes of memrefs, and the verifier rules that several copy ops share."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TypeGuard, TypeVar, get_args

from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, ArrayAttr, BoolAttr, FloatAttr, IndexType, IntegerAttr
from xdsl.dialects.builtin import IntegerType, MemRefType, StringAttr, VectorType
from xdsl.dialects.builtin import i1, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation, base, operand_def, opt_prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl import dtypes
from asyncdsl.dialects.memory_attrs import SMEM, RegistersType, SharedMemorySpaceAttr
from asyncdsl.hw.collective import CLUSTER_DIMS
from asyncdsl.hw.limits import MAX_PENDING_GROUPS, MAX_TMA_RANK, SWIZZLE_SPANS, TMA_COORDINATE_BITS
from asyncdsl.hw.smem_layout import SmemLayout

SWIZZLE_BYTES = SWIZZLE_SPANS  # every copy engine here swizzles as TMA does


# Cached like the index attributes below: an op's properties repeat few values, and building an
# attribute checks its value each time (attributes are immutable, so ops can share one).
@functools.lru_cache(maxsize=1024, typed=True)
def int_prop(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@functools.lru_cache(maxsize=4, typed=True)
def bool_prop(value: bool) -> BoolAttr:
    return IntegerAttr(int(value), i1)


# The constraint of a constant a tile is filled with (`full`'s value, the elements a masked read
# leaves out), written with `base` so that the property is typed as either attribute.
TILE_CONSTANT = base(FloatAttr) | base(IntegerAttr)


class SegmentedOperands(IRDLOperation):
    """An op with more than one optional or variadic operand group: IRDL cannot tell the groups
    apart in the flat operand list, so the op records each group's length in its
    `operandSegmentSizes` property."""

    irdl_options = (AttrSizedOperandSegments(as_property=True),)


class IndexValued(IRDLOperation):
    """An op whose one result is an index: an id of where the program runs, an index loaded or
    hinted at, a multicast mask."""

    result = result_def(IndexType)


class IndexQuery(IndexValued):
    """An op that reads one index of where the program runs (which warpgroup, which device):
    no operands, one `index` result, printed as `%0 = asyncdsl.device_id`."""

    assembly_format = "attr-dict"

    def __init__(self) -> None:
        super().__init__(result_types=[IndexType()])


class WritesTile(IRDLOperation):
    """An op that writes the register tile `value` (into memory or a register ref); the ops list
    this base first, as `value` is their first operand."""

    value = operand_def(VectorType)

    @property
    def tile(self) -> VectorType:
        return vector_type(self.value.type)


def collective_prop(dims: Sequence[str]) -> ArrayAttr:
    """`collective` of an op: the cluster dims it names."""
    return ArrayAttr(StringAttr(d) for d in dims)


class OptionallyCollective(IRDLOperation):
    """An op that, with `collective` (cluster dims), acts in every CTA of this CTA's group along
    those dims, not in this CTA alone."""

    collective = opt_prop_def(ArrayAttr)

    @property
    def cluster_dims(self) -> tuple[str, ...]:
        return tuple(d.data for d in self.collective) if self.collective is not None else ()

    def verify_collective(self) -> None:
        if self.collective is not None:
            verify_collective_dims(self.cluster_dims, empty_allowed=False)


def optional_operand(value: SSAValue | None) -> list[SSAValue]:
    """An optional operand as IRDL's operand list takes it: present or empty."""
    return [value] if value is not None else []


def constant_value(value: SSAValue) -> int | None:
    """The value of `value` when it is an `arith.constant` index (what the frontend makes of a
    Python int)."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


_INDEX = IndexType()
_NO_OVERFLOW = {"overflowFlags": arith.IntegerOverflowAttr("none")}


# Index constants and arithmetic are most of a kernel's ops.  `create` builds them with the
# operands, result type and properties their IRDL constructors give them, without those
# constructors' generic argument matching, which costs twice as much as the op itself.
def index_constant(value: int) -> arith.ConstantOp:
    """An `arith.constant` of index type (how the IR spells a Python int)."""
    properties = {"value": _index_attr(value)}
    return arith.ConstantOp.create(result_types=(_INDEX,), properties=properties)


def index_binary(
    op_class: type[arith.SignlessIntegerBinaryOperation], lhs: SSAValue, rhs: SSAValue
) -> Operation:
    """`op_class(lhs, rhs)` (an `arith` integer operation) on two index values."""
    overflows = issubclass(op_class, arith.SignlessIntegerBinaryOperationWithOverflow)
    properties = _NO_OVERFLOW if overflows else {}
    return op_class.create(operands=(lhs, rhs), result_types=(lhs.type,), properties=properties)


@functools.lru_cache(maxsize=1024)  # attributes are immutable, and checking one's value costs microseconds
def _index_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, _INDEX)


def is_smem(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and isinstance(type_.memory_space, SharedMemorySpaceAttr)


def is_gmem(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and not is_smem(type_)


def smem_type(shape: Sequence[int], element_type: Attribute, layout: SmemLayout | None = None) -> MemRefType:
    """A shared-memory buffer of `shape` (the physical one when `layout` is given)."""
    return _smem_type(tuple(shape), element_type, layout)


# Both cached: a kernel's buffers and their views share a few types, and converting between a layout
# and its attribute checks the layout each time (types, attributes and layouts are immutable values).
@functools.lru_cache(maxsize=1024)
def _smem_type(shape: tuple[int, ...], element_type: Attribute, layout: SmemLayout | None) -> MemRefType:
    return MemRefType(element_type, list(shape),
                      memory_space=SMEM if layout is None else SharedMemorySpaceAttr(layout))


def smem_layout(type_: Attribute) -> SmemLayout | None:
    """The layout a shared-memory buffer carries (None: row-major in its memref shape)."""
    return _layout(memref_type(type_).memory_space)


@functools.lru_cache(maxsize=1024)
def _layout(space: SharedMemorySpaceAttr) -> SmemLayout | None:
    return space.layout


def logical_shape(type_: Attribute) -> tuple[int, ...]:
    """The shape kernel code sees of a shared-memory buffer (the memref's unless it has a layout)."""
    layout = smem_layout(type_)
    return tuple(memref_type(type_).get_shape()) if layout is None else layout.logical_shape


_FLOAT_TYPES: tuple[type, ...] = get_args(AnyFloat)
_AttributeT = TypeVar("_AttributeT", bound=Attribute)


def _is_float_type(type_: Attribute) -> TypeGuard[AnyFloat]:
    return isinstance(type_, _FLOAT_TYPES)


def float_type(type_: Attribute) -> AnyFloat:
    """`type_` as the MLIR float type it must be (the type of a float constant)."""
    if _is_float_type(type_):
        return type_
    raise TypeError(f"{type_} is not a float type")


# xDSL types every operand's type as any attribute; what an op's definition guarantees it is, the
# helpers below take it as.
def _narrowed(type_: Attribute, kind: type[_AttributeT], what: str) -> _AttributeT:
    if isinstance(type_, kind):
        return type_
    raise TypeError(f"{type_} is not {what}")


def integer_type(type_: Attribute) -> IntegerType:
    """`type_` as the MLIR integer type it must be (the type of an integer constant)."""
    return _narrowed(type_, IntegerType, "an integer type")


def memref_type(type_: Attribute) -> MemRefType:
    """`type_` as the memref type it must be (a GMEM array's or a shared-memory buffer's)."""
    return _narrowed(type_, MemRefType, "a memref type")


def vector_type(type_: Attribute) -> VectorType:
    """`type_` as the vector type it must be (a register tile's)."""
    return _narrowed(type_, VectorType, "a vector type")


def registers_type(type_: Attribute) -> RegistersType:
    """`type_` as the type of a ref to a mutable register tile it must be."""
    return _narrowed(type_, RegistersType, "a register tile ref type")


def shaped_type(type_: Attribute) -> MemRefType | VectorType:
    """`type_` as the memref (a buffer) or vector (a register tile) type it must be."""
    if isinstance(type_, (MemRefType, VectorType)):
        return type_
    raise TypeError(f"{type_} is neither a memref nor a vector type")


def shape_of(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, MemRefType)
    return tuple(value.type.get_shape())


def element_bits(type_: Attribute) -> int:
    """Bits of one element of a buffer or a tile."""
    return dtypes.from_mlir(shaped_type(type_).element_type).bits


def buffer_bytes(type_: Attribute) -> int:
    count = 1
    for d in shaped_type(type_).get_shape():
        count *= d
    return count * element_bits(type_) // 8


def verify_copy_sides(subject: str, source: Attribute, destination: Attribute) -> None:
    """A copy goes between GMEM and SMEM, one each, and keeps the element type."""
    if not ((is_gmem(source) and is_smem(destination)) or (is_smem(source) and is_gmem(destination))):
        raise VerifyException(f"{subject} copies between GMEM and SMEM: exactly one side must be each")
    verify_same_element_type(subject, memref_type(source), memref_type(destination))


def verify_same_element_type(subject: str, source: MemRefType, destination: MemRefType) -> None:
    if source.element_type != destination.element_type:
        raise VerifyException(
            f"{subject} needs the same element type on both sides, got {source.element_type} "
            f"and {destination.element_type}"
        )


def verify_gmem_slice(rank: int, starts: Sequence[SSAValue], sizes: Sequence[int]) -> None:
    """A slice of a rank-`rank` GMEM ref: one start and one size per dim, -1 for a squeezed dim."""
    if len(starts) != rank or len(sizes) != rank:
        raise VerifyException(
            f"the GMEM slice needs one index per dim: the ref has {rank} dims, the slice "
            f"{len(starts)} starts and {len(sizes)} sizes"
        )
    if any(s == 0 or s < -1 for s in sizes):
        raise VerifyException(f"slice sizes must be positive (or -1 for a squeezed dim), got {sizes}")


def verify_coordinates(values: Sequence[SSAValue], what: str) -> None:
    """Constant TMA coordinates fit signed 32 bits (docs/hardware.md §3.1): one that does not
    would wrap to another element."""
    low, high = -(1 << (TMA_COORDINATE_BITS - 1)), 1 << (TMA_COORDINATE_BITS - 1)
    for position, value in enumerate(values):
        known = constant_value(value)
        if known is not None and not low <= known < high:
            raise VerifyException(
                f"{what}{f' {position}' if len(values) > 1 else ''} is {known}, which does not fit the "
                f"signed {TMA_COORDINATE_BITS}-bit coordinates of TMA ({low} .. {high - 1})"
            )


def verify_swizzle(swizzle: int) -> None:
    if swizzle not in SWIZZLE_BYTES:
        raise VerifyException(f"swizzle must be one of {SWIZZLE_BYTES} bytes, got {swizzle}")


def verify_swizzled_row(swizzle: int, count: int, item_bytes: int, unit: str) -> None:
    """A swizzled SMEM row of `count` `unit`s (columns, channels) spans exactly the swizzle span."""
    row_bytes = count * item_bytes
    if swizzle and row_bytes != swizzle:
        raise VerifyException(
            f"swizzle {swizzle} needs each row to span exactly {swizzle} bytes ({swizzle // item_bytes} "
            f"{unit}), got {count} {unit} ({row_bytes} bytes)"
        )


def verify_int32_element(array: SSAValue, indices: Sequence[SSAValue], subject: str, verb: str,
                          elements: str) -> None:
    """`array[indices]` is one 32-bit integer element (what the op `verb`s, its `elements`) of a
    GMEM array argument."""
    if not is_gmem(array.type):
        raise VerifyException(f"{subject} {verb} a GMEM array argument")
    rank = len(shape_of(array))
    if len(indices) != rank:
        raise VerifyException(f"{subject} takes one index per dim of its array ({rank}), got {len(indices)}")
    element = memref_type(array.type).element_type
    if not isinstance(element, IntegerType) or element.width.data != 32:
        raise VerifyException(f"{subject} {verb} 32-bit integer {elements}, not {element}")


def verify_barrier_pair(barriers: SSAValue | None, barrier_index: SSAValue | None) -> None:
    if (barriers is None) != (barrier_index is None):
        raise VerifyException("a barrier needs both the barrier group and the index")


def verify_predicate(subject: str, predicate: SSAValue | None) -> None:
    if predicate is not None and predicate.type != i1:
        raise VerifyException(f"{subject}'s predicate is a condition (i1), got {predicate.type}")


def verify_collective_dims(dims: Sequence[str], *, empty_allowed: bool) -> None:
    """Collective dims name distinct cluster dims; none at all only where `empty_allowed`."""
    if ((not dims and not empty_allowed) or any(d not in CLUSTER_DIMS for d in dims)
            or len(set(dims)) != len(dims)):
        raise VerifyException(f"collective must name distinct cluster dims among {CLUSTER_DIMS}, got {dims}")


def verify_allow_groups(allow_groups: int) -> None:
    if not 0 <= allow_groups <= MAX_PENDING_GROUPS:
        raise VerifyException(f"allow_groups must be in [0, {MAX_PENDING_GROUPS}], got {allow_groups}")


def verify_descriptor_coordinates(rank: int, coords: Sequence[SSAValue]) -> None:
    """A tiled TMA descriptor has 1 to 5 dims and its instruction one coordinate per dim."""
    if not 1 <= rank <= MAX_TMA_RANK:
        raise VerifyException(f"TMA descriptors have 1 to {MAX_TMA_RANK} dims, got {rank}")
    if len(coords) != rank:
        raise VerifyException(f"a rank-{rank} descriptor takes {rank} coordinates, got {len(coords)}")
