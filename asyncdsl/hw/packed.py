"""Sub-byte (4-bit) elements: packed two per byte, moved by the copy engine as bytes.

Layout.  An array of 4-bit elements (`float4_e2m1fn`, `int4`, `uint4`) of logical shape S
occupies `ceil(prod(S) / 2)` bytes in GMEM and SMEM: element 2k of its row-major order sits in
the low nibble of byte k, element 2k + 1 in the high nibble.  numpy (ml_dtypes) holds such arrays
unpacked, one element per byte with the value in the low nibble; `pack` and `unpack` convert
between the two at the host boundary (`kernel.interpret`, `runtime.to_device`/`to_host`).

Copies.  Hopper's TMA has no 4-bit element type (the packed 4-bit tensor-map types are
Blackwell's), so a copy of 4-bit elements is planned as the copy of the same bytes as uint8:
the GMEM array's minor dim, the slice window along it, the innermost tile of a `TileTransform`
and the SMEM buffer's minor dim are all halved.  That is exact when each of them is a whole
number of bytes, i.e. an even number of elements; `as_byte_copy` says which one is not
otherwise.  Transforms must leave the minor dim where it is (TMA needs that anyway).

Example: `x: (64, 256) float4_e2m1fn`, `x.at[ds(i, 16), ds(64, 128)]` into a `(16, 128)` buffer
is the uint8 copy of `x_bytes: (64, 128)`, `x_bytes.at[ds(i, 16), ds(32, 64)]` into `(16, 64)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asyncdsl.dtypes import DType
from asyncdsl.errors import CopyError
from asyncdsl.hw.transforms import (
    CollapseLeadingIndicesTransform,
    DropUnitDimsTransform,
    MemRefTransform,
    TileTransform,
    TransposeTransform,
    apply_chain_shape,
    divisor_of,
)

_NIBBLE = 0x0F


def is_packed(dtype: DType) -> bool:
    """Whether elements of `dtype` share bytes."""
    return dtype.bits < 8


def elements_per_byte(dtype: DType) -> int:
    return 8 // dtype.bits


def packed_nbytes(shape: Sequence[int], dtype: DType) -> int:
    """Bytes an array of `shape` elements of `dtype` occupies on the GPU."""
    return (math.prod(shape) * dtype.bits + 7) // 8


def pack(array: np.ndarray) -> np.ndarray:
    """The packed bytes (flat uint8) of an unpacked ml_dtypes array of 4-bit elements."""
    nibbles = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & _NIBBLE
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))  # the unused high nibble of the last byte
    return nibbles[0::2] | (nibbles[1::2] << 4)


def unpack(packed: np.ndarray, dtype: DType, shape: Sequence[int]) -> np.ndarray:
    """The unpacked ml_dtypes array of `shape` whose packed bytes are `packed`."""
    raw = np.ascontiguousarray(packed).reshape(-1).view(np.uint8)
    nibbles = np.empty(raw.size * 2, np.uint8)
    nibbles[0::2] = raw & _NIBBLE
    nibbles[1::2] = raw >> 4
    count = math.prod(shape)
    return nibbles[:count].view(dtype.numpy).reshape(tuple(shape))


@dataclass(frozen=True)
class ByteCopy:
    """A copy of packed elements restated as a copy of their bytes (uint8)."""

    gmem_shape: tuple[int, ...]
    gmem_slice: tuple[Any, ...]
    transforms: tuple[MemRefTransform, ...]
    smem_shape: tuple[int, ...] | None
    note: str  # how the copy was restated, for error messages about the byte copy


def as_byte_copy(
    gmem_shape: Sequence[int],
    dtype: DType,
    gmem_slice: Sequence[Any],
    transforms: Sequence[MemRefTransform],
    smem_shape: Sequence[int] | None,
) -> ByteCopy:
    """Restate the copy of `transforms(gmem[gmem_slice])` (4-bit `dtype`) as a uint8 copy.

    Arguments are those of `hw.tma.plan_tiled_copy`.  Raises CopyError when a minor-dim extent
    or start is not a whole number of bytes, or a transform moves the minor dim.
    """
    per_byte = elements_per_byte(dtype)
    rule = (
        f"{dtype} elements travel packed {per_byte} per byte and Hopper's TMA moves them as "
        f"bytes, so {{}} must be a multiple of {per_byte} elements"
    )
    gmem_shape = tuple(gmem_shape)
    if len(gmem_slice) != len(gmem_shape):
        raise CopyError(
            f"the slice has {len(gmem_slice)} entries but the GMEM array has {len(gmem_shape)} "
            f"dims (shape {gmem_shape})"
        )
    if gmem_shape[-1] % per_byte:
        raise CopyError(rule.format(f"the minor dim of the GMEM array (size {gmem_shape[-1]})"))
    minor = gmem_slice[-1]
    if type(minor) is not tuple:
        raise CopyError(
            f"a copy of {dtype} elements must take a window of the minor dim, not index it: the "
            "elements travel packed as bytes"
        )
    start, size = minor
    if size % per_byte:
        raise CopyError(rule.format(f"the slice's minor window (size {size})"))
    if type(start) is int and start % per_byte:
        raise CopyError(rule.format(f"the slice's start along the minor dim ({start})"))
    if type(start) is not int and divisor_of(start) % per_byte:
        raise CopyError(
            rule.format("the slice's start along the minor dim")
            + "; it is computed on the GPU and asyncdsl can only prove it a multiple of "
            f"{divisor_of(start)}: if it always is a multiple of {per_byte}, say so with "
            f"asyncdsl.multiple_of(start, {per_byte})"
        )

    sliced = tuple(entry[1] for entry in gmem_slice if type(entry) is tuple)
    transformed = apply_chain_shape(transforms, sliced)
    if smem_shape is not None and tuple(smem_shape) != transformed:
        raise CopyError(
            f"SMEM buffer shape {tuple(smem_shape)} does not match the transformed slice shape "
            f"{transformed}"
        )
    byte_slice = (*gmem_slice[:-1], (start // per_byte, size // per_byte))
    byte_transforms = _byte_transforms(transforms, sliced, per_byte, rule)
    return ByteCopy(
        gmem_shape=(*gmem_shape[:-1], gmem_shape[-1] // per_byte),
        gmem_slice=byte_slice,
        transforms=byte_transforms,
        smem_shape=None if smem_shape is None else (*transformed[:-1], transformed[-1] // per_byte),
        note=f"{dtype} elements are copied as uint8 bytes, {per_byte} per byte along the minor dim",
    )


def _byte_transforms(
    transforms: Sequence[MemRefTransform], shape: tuple[int, ...], per_byte: int, rule: str
) -> tuple[MemRefTransform, ...]:
    """The chain acting on the byte view: the innermost tile shrinks, the minor dim stays last."""
    restated = []
    for original in transforms:
        rank = len(shape)
        transform = original
        if isinstance(transform, TileTransform):
            *outer, inner = transform.tiling
            if inner % per_byte:
                raise CopyError(rule.format(f"the innermost tile of {transform} ({inner})"))
            transform = TileTransform((*outer, inner // per_byte), transform.rounding)
        elif isinstance(transform, TransposeTransform):
            if transform.permutation[-1] != rank - 1:
                raise CopyError(f"{transform} moves the minor dim; packed elements need it last")
        elif isinstance(transform, DropUnitDimsTransform):
            pass  # the minor dim holds a whole byte, at least 2 elements: it is never dropped
        elif isinstance(transform, CollapseLeadingIndicesTransform):
            if transform.batch_rank + len(transform.strides) >= rank:
                raise CopyError(f"{transform} merges the minor dim; packed elements need it alone")
            if any(stride % per_byte for stride in transform.strides):
                raise CopyError(rule.format(f"every stride of {transform}"))
            # Its strides count elements; the byte view's count bytes.
            strides = tuple(stride // per_byte for stride in transform.strides)
            transform = CollapseLeadingIndicesTransform(strides, transform.batch_rank)
        else:
            raise CopyError(f"{transform} cannot be applied to packed {per_byte}-per-byte elements")
        restated.append(transform)
        shape = original.transform_shape(shape)
    return tuple(restated)
