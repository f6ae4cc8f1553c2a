"""Helpers shared by the op modules of the `asyncdsl` dialect: property builders, memory-space
tests, shapes and sizes of memrefs, and the option vocabularies of copies."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BoolAttr, IntegerAttr, MemRefType, i1, i64
from xdsl.ir import Attribute, SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects.asyncdsl_attrs import SMEM, SharedMemorySpaceAttr

SWIZZLE_BYTES = (0, 32, 64, 128)
IMPLEMENTATIONS = ("tma", "cp_async")
OOB_MODES = ("zeros", "undefined", "promise_in_bounds")
CLUSTER_DIMS = ("x", "y", "z")
REDUCTIONS = ("add", "min", "max", "umin", "umax", "smin", "smax", "inc", "dec", "and", "or", "xor")


def int_prop(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def bool_prop(value: bool) -> BoolAttr:
    return IntegerAttr(int(value), i1)


def is_smem(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and isinstance(type_.memory_space, SharedMemorySpaceAttr)


def is_gmem(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and not is_smem(type_)


def smem_type(shape: Sequence[int], element_type: Attribute) -> MemRefType:
    return MemRefType(element_type, list(shape), memory_space=SMEM)


def shape_of(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, MemRefType)
    return tuple(value.type.get_shape())


def element_bits(type_: MemRefType) -> int:
    return dtypes.from_mlir(type_.element_type).bits


def buffer_bytes(type_: MemRefType) -> int:
    count = 1
    for d in type_.get_shape():
        count *= d
    return count * element_bits(type_) // 8
