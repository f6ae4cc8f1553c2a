"""TMA boxes between a GMEM argument's bytes and a CTA's shared memory, vectorised.

The rules are those of `asyncdsl.tma_emulation` (docs/ptx-hopper.md §3.6 and §5): a load
zero-fills what lies outside the descriptor's view, a store clips at the high end and faults at
negative coordinates, and SMEM rows are padded to the swizzle span with 16-byte chunks moved by
the swizzle of their absolute address.  Boxes travel as raw bytes (shape `(*box, element_bytes)`)
so that every dtype, NaN payloads included, moves bit for bit.

Speed matters here (the test suite runs grids of thousands of CTAs), so the common case takes a
faster road to the same bytes: with unit element strides the in-bounds part of a box is a strided
window of the argument's bytes (a numpy view, no index arrays), and a swizzled box moves as
16-byte chunks whose positions come from `tma_emulation.smem_byte_offsets`, cached per layout.
Element strides and NaN fill go through `tma_emulation` itself.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import as_strided

from asyncdsl import tma_emulation
from asyncdsl.dialects.asyncdsl_attrs import TmaDescriptorAttr
from asyncdsl.errors import ArgumentError, InterpretError, OutOfBoundsError
from asyncdsl.kernel_binary import TiledTensorMapSpec

SWIZZLE_CHUNK = 16  # bytes the swizzle moves as a unit
SWIZZLE_PERIOD = 1024  # the pattern repeats every 8 rows of 128 bytes at most
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@lru_cache(maxsize=512)
def descriptor_spec(descriptor: TmaDescriptorAttr) -> TiledTensorMapSpec:
    """The host encoding an IR descriptor stands for (cached: attributes are immutable)."""
    return descriptor.spec()


@lru_cache(maxsize=512)
def box_shape(spec: TiledTensorMapSpec) -> tuple[int, ...]:
    """The elements one copy moves, in array order (element strides skip some)."""
    return tma_emulation.box_shape(spec)


def box_bytes(spec: TiledTensorMapSpec) -> int:
    """Bytes one copy delivers to SMEM, and completes on its barrier, even out of bounds."""
    return math.prod(box_shape(spec)) * spec.element_bytes


def smem_footprint(spec: TiledTensorMapSpec) -> int:
    """Bytes of SMEM a box spans: rows are padded to the swizzle span."""
    return tma_emulation.smem_footprint_bytes(box_shape(spec), spec.element_bytes, spec.swizzle_bytes)


def _fast(spec: TiledTensorMapSpec) -> bool:
    return not spec.oob_nan and all(stride == 1 for stride in spec.element_strides)


def check_view_fits(
    raw: np.ndarray, spec: TiledTensorMapSpec, argument: str, descriptor: str = "the TMA descriptor"
) -> None:
    """The descriptor's view lies inside `raw` (argument `argument`'s bytes), or the GPU faults."""
    last = tma_emulation.view_extent_bytes(spec)
    if last > raw.size:
        raise OutOfBoundsError(
            f"{descriptor} views bytes up to {last} of argument {argument!r}, which has "
            f"{raw.size} (dims {spec.global_dims}, byte strides {spec.global_strides})"
        )


def _window(raw: np.ndarray, spec: TiledTensorMapSpec, lows, highs) -> np.ndarray:
    """The bytes of view elements [lows, highs) as an array of shape (*extent, element_bytes)."""
    start = spec.base_offset_bytes + sum(low * stride for low, stride in zip(lows, spec.global_strides))
    shape = tuple(high - low for low, high in zip(lows, highs)) + (spec.element_bytes,)
    return as_strided(raw[start:], shape=shape, strides=(*spec.global_strides, 1))


def _in_bounds(spec: TiledTensorMapSpec, coords) -> tuple[list[int], list[int]]:
    lows = [min(max(c, 0), d) for c, d in zip(coords, spec.global_dims)]
    highs = [max(min(c + b, d), low) for c, b, d, low in zip(coords, spec.box_dims, spec.global_dims, lows)]
    return lows, highs


def read_gmem_box(raw: np.ndarray, spec: TiledTensorMapSpec, coords, argument: str) -> np.ndarray:
    """The box at `coords` of the descriptor's view of `raw` (an argument's bytes), as bytes."""
    check_view_fits(raw, spec, argument)
    element = _UINT_OF_SIZE[spec.element_bytes]
    if not _fast(spec):
        box = tma_emulation.load_box(raw, spec, coords, dtype=element)
        return box.view(np.uint8).reshape(*box.shape, spec.element_bytes)
    box = np.zeros((*spec.box_dims, spec.element_bytes), np.uint8)
    lows, highs = _in_bounds(spec, coords)
    if all(high > low for low, high in zip(lows, highs)):
        inside = tuple(slice(low - c, high - c) for low, high, c in zip(lows, highs, coords))
        box[inside] = _window(raw, spec, lows, highs)
    return box


def write_gmem_box(raw: np.ndarray, spec: TiledTensorMapSpec, coords, box: np.ndarray, argument: str) -> None:
    """Store `box` (bytes, as `read_gmem_box` returns) at `coords`, clipped at the high end."""
    check_view_fits(raw, spec, argument)
    if not raw.flags.writeable:
        raise ArgumentError(f"TMA store to argument {argument!r}, whose numpy array is read-only")
    for dim, coord in enumerate(coords):
        if coord < 0:
            raise OutOfBoundsError(
                f"TMA store to argument {argument!r} at coordinate {coord} along dim {dim} "
                f"(coordinates {tuple(coords)}): stores at negative coordinates fault on the H200 "
                "(CUDA_ERROR_ILLEGAL_INSTRUCTION)"
            )
    if not _fast(spec):
        element = _UINT_OF_SIZE[spec.element_bytes]
        tma_emulation.store_box(raw, spec, coords, box.view(element).reshape(box.shape[:-1]))
        return
    lows, highs = _in_bounds(spec, coords)
    if all(high > low for low, high in zip(lows, highs)):
        inside = tuple(slice(low - c, high - c) for low, high, c in zip(lows, highs, coords))
        _window(raw, spec, lows, highs)[...] = box[inside]


@lru_cache(maxsize=256)
def _chunk_positions(rows: int, inner_bytes: int, swizzle: int, phase: int) -> np.ndarray:
    """Where each 16-byte chunk of a box lands, in chunks from the box's SMEM offset.

    `phase` is the offset modulo the swizzle period; the CTA's base is 1024-aligned, so it is
    all of the absolute address the pattern depends on.
    """
    offsets = tma_emulation.smem_byte_offsets((rows, inner_bytes), 1, swizzle, phase)
    return (offsets[:, ::SWIZZLE_CHUNK] // SWIZZLE_CHUNK).reshape(-1)


def _smem_layout(spec: TiledTensorMapSpec, offset: int):
    if offset % tma_emulation.SMEM_ALIGNMENT:
        raise InterpretError(
            f"TMA shared-memory operand at offset {offset} is not {tma_emulation.SMEM_ALIGNMENT}-byte "
            "aligned: the H200 faults (CUDA_ERROR_MISALIGNED_ADDRESS)"
        )
    shape = box_shape(spec)
    rows = math.prod(shape[:-1])
    inner = shape[-1] * spec.element_bytes
    if not spec.swizzle_bytes:
        return rows, inner, None
    return rows, inner, _chunk_positions(rows, inner, spec.swizzle_bytes, offset % SWIZZLE_PERIOD)


def write_smem_box(smem: np.ndarray, offset: int, spec: TiledTensorMapSpec, box: np.ndarray) -> None:
    """Lay `box` (bytes) out in `smem` at `offset` as a TMA load does; padding stays untouched."""
    rows, inner, chunks = _smem_layout(spec, offset)
    if chunks is None:
        smem[offset : offset + rows * inner] = box.reshape(-1)
        return
    region = smem[offset : offset + rows * spec.swizzle_bytes].reshape(-1, SWIZZLE_CHUNK)
    region[chunks] = box.reshape(-1, SWIZZLE_CHUNK)


def read_smem_box(smem: np.ndarray, offset: int, spec: TiledTensorMapSpec) -> np.ndarray:
    """The box (bytes, shape `(*box, element_bytes)`) a TMA store reads from `smem` at `offset`."""
    rows, inner, chunks = _smem_layout(spec, offset)
    shape = (*box_shape(spec), spec.element_bytes)
    if chunks is None:
        return smem[offset : offset + rows * inner].reshape(shape)
    region = smem[offset : offset + rows * spec.swizzle_bytes].reshape(-1, SWIZZLE_CHUNK)
    return region[chunks].reshape(shape)


def write_smem_rows(smem: np.ndarray, start: int, end: int, spec, rows: np.ndarray) -> None:
    """Lay `rows` (bytes, shape `(*rows, columns, element_bytes)`) into `smem[start:end]` as a TMA
    load lays a tiled box of those rows: swizzled on their absolute address (im2col rows, gathered
    rows)."""
    elements = rows.view(np.dtype(f"u{spec.element_bytes}")).reshape(rows.shape[:-1])
    tma_emulation.box_to_smem_bytes(elements, spec.swizzle_bytes, start, smem[start:end])
