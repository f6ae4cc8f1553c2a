"""How a copied window is laid out in shared memory, from first principles, on numpy arrays.

This is the reference's own transform algebra, written from the documented semantics of the
public transform objects (tiling: tile counts first, then the tile; transposition: dim d of the
result is dim permutation[d]), the hardware's swizzle formula and the packing of 4-bit elements.
Nothing here calls asyncdsl: the fuzzer compares asyncdsl against it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class ElementType:
    name: str  # the attribute of `asyncdsl` that names it
    numpy: np.dtype
    bits: int
    kind: str  # "int", "uint", "float"

    @property
    def nbytes_per_element(self) -> float:
        return self.bits / 8

    @property
    def packed(self) -> bool:
        return self.bits < 8


def _types() -> dict[str, ElementType]:
    table = {}
    for name, numpy_type, kind in (
        ("int8", np.int8, "int"), ("uint8", np.uint8, "uint"), ("int16", np.int16, "int"),
        ("uint16", np.uint16, "uint"), ("int32", np.int32, "int"), ("uint32", np.uint32, "uint"),
        ("int64", np.int64, "int"), ("uint64", np.uint64, "uint"), ("float16", np.float16, "float"),
        ("bfloat16", ml_dtypes.bfloat16, "float"), ("float32", np.float32, "float"),
        ("float64", np.float64, "float"), ("float8_e4m3fn", ml_dtypes.float8_e4m3fn, "float"),
        ("float8_e5m2", ml_dtypes.float8_e5m2, "float"),
        ("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, "float"),
    ):
        dtype = np.dtype(numpy_type)
        table[name] = ElementType(name, dtype, dtype.itemsize * 8, kind)
    for name, numpy_type, kind in (
        ("float4_e2m1fn", ml_dtypes.float4_e2m1fn, "float"), ("int4", ml_dtypes.int4, "int"),
        ("uint4", ml_dtypes.uint4, "uint"),
    ):
        table[name] = ElementType(name, np.dtype(numpy_type), 4, kind)
    return table


ELEMENT_TYPES = _types()


def byte_size(shape: Sequence[int], element: ElementType) -> int:
    """Bytes an array of `shape` occupies on the GPU (4-bit elements two per byte)."""
    return (math.prod(shape) * element.bits + 7) // 8


# -- transforms as data -----------------------------------------------------------------------


@dataclass(frozen=True)
class Tile:
    tiling: tuple[int, ...]
    round_down: bool = False  # Rounding.DOWN: a partial GMEM tile is cut off the array


@dataclass(frozen=True)
class Transpose:
    permutation: tuple[int, ...]


Transform = Tile | Transpose


class Unfit(Exception):
    """The transform chain does not apply to the window's shape (the user's error)."""


def transformed_shape(chain: Sequence[Transform], shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(shape)
    for transform in chain:
        if isinstance(transform, Tile):
            rank = len(transform.tiling)
            if rank > len(shape) or any(s % t for s, t in zip(shape[len(shape) - rank:], transform.tiling)):
                raise Unfit(f"{transform} does not tile {shape}")
            outer, inner = shape[: len(shape) - rank], shape[len(shape) - rank:]
            shape = (*outer, *(s // t for s, t in zip(inner, transform.tiling)), *transform.tiling)
        else:
            if sorted(transform.permutation) != list(range(len(shape))):
                raise Unfit(f"{transform} does not permute {shape}")
            shape = tuple(shape[p] for p in transform.permutation)
    return shape


def transformed(chain: Sequence[Transform], array: np.ndarray) -> np.ndarray:
    """`array` (the window, squeezed dims gone) laid out as the chain says."""
    for transform in chain:
        if isinstance(transform, Tile):
            rank = len(transform.tiling)
            outer = array.ndim - rank
            split = list(array.shape[:outer])
            for size, tile in zip(array.shape[outer:], transform.tiling):
                split += [size // tile, tile]
            counts = [outer + 2 * k for k in range(rank)]
            array = array.reshape(split).transpose(*range(outer), *counts, *(c + 1 for c in counts))
        else:
            array = array.transpose(transform.permutation)
    return array


Label = TypeVar("Label")  # what names a window dim: its GMEM dim, say


def transformed_labels(chain: Sequence[Transform], labels: Sequence[Label | None]) -> list[Label | None]:
    """Which window dim each transformed dim comes from: a window dim's label while it is whole,
    None once a tiling has cut it (tile counts and tiles are no GMEM dim of their own)."""
    found = list(labels)
    for transform in chain:
        if isinstance(transform, Tile):
            rank = len(transform.tiling)
            found = found[: len(found) - rank] + [None] * (2 * rank)
        else:
            found = [found[p] for p in transform.permutation]
    return found


def tiled_dims(chain: Sequence[Transform], labels: Sequence[Label]) -> list[tuple[Label, int, bool]]:
    """(window dim label, tile size, rounds down) for every whole window dim a tiling cuts."""
    current: list[Label | None] = list(labels)
    cuts = []
    for transform in chain:
        if isinstance(transform, Tile):
            rank = len(transform.tiling)
            for label, tile in zip(current[len(current) - rank:], transform.tiling):
                if label is not None:
                    cuts.append((label, tile, transform.round_down))
        current = transformed_labels((transform,), current)
    return cuts


def inverse_positions(chain: Sequence[Transform], window_shape: Sequence[int]) -> np.ndarray:
    """For each element of the transformed array (row-major), its flat index in the window."""
    positions = np.arange(math.prod(window_shape), dtype=np.int64).reshape(tuple(window_shape))
    return np.ascontiguousarray(transformed(chain, positions)).reshape(-1)


# -- bytes ------------------------------------------------------------------------------------


def packed_bytes(array: np.ndarray, element: ElementType) -> np.ndarray:
    """The bytes of `array` as the GPU holds them (flat uint8); 4-bit elements two per byte,
    element 2k in the low nibble of byte k."""
    flat = np.ascontiguousarray(array).reshape(-1)
    if not element.packed:
        return flat.view(np.uint8).copy()
    nibbles = flat.view(np.uint8) & 0x0F
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def unpacked(raw: np.ndarray, element: ElementType, shape: Sequence[int]) -> np.ndarray:
    """The array of `shape` whose GPU bytes are `raw` (the inverse of `packed_bytes`)."""
    raw = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    count = math.prod(shape)
    if not element.packed:
        return raw[: count * element.numpy.itemsize].copy().view(element.numpy).reshape(tuple(shape))
    nibbles = np.empty(raw.size * 2, np.uint8)
    nibbles[0::2] = raw & 0x0F
    nibbles[1::2] = raw >> 4
    return nibbles[:count].copy().view(element.numpy).reshape(tuple(shape))


def swizzle_permutation(length: int, swizzle: int, offset: int) -> np.ndarray:
    """For the `length` bytes of a buffer starting `offset` bytes after a swizzle-period boundary,
    the byte each one holds: the 16-byte chunk of absolute address A lands at
    A ^ (((A >> 7) & m) << 4), m = swizzle / 16 - 1.  The map is an involution, so the same
    permutation swizzles (`physical = logical[perm]`) and unswizzles."""
    local = np.arange(length, dtype=np.int64)
    if not swizzle:
        return local
    address = local + offset
    moved = address ^ (((address >> 7) & (swizzle // 16 - 1)) << 4)
    return moved - offset
