"""Planning a cp.async copy: the warpgroup's threads move a GMEM window in 4-, 8- or 16-byte chunks.

Ampere's per-thread `cp.async` (docs/hardware.md §9) is the fallback copy engine,
`async_copy(..., implementation="cp_async")`: GMEM -> SMEM only, no tensor map, no zero fill.

A copy is `rows` GMEM rows of `row_bytes` consecutive bytes, `row_stride_bytes` apart, from the
window's first element.  In SMEM the rows are cut into tiles of `tile_rows` rows by
`tile_row_bytes` bytes, stored tile after tile, row-major within a tile: the layout
`TileTransform((tile_rows, tile_cols))` gives the slice.  With a swizzle, each byte then moves by
the swizzle of its absolute shared address, `A ^ (((A >> 7) & m) << 4)`, so the SMEM bytes are
exactly those of a TMA load with the same slice, transforms and swizzle.  An untiled copy is one
tile (its rows stored densely).

The copy is cut into chunks of `chunk_bytes`: chunk j is row `j // per_row`, bytes from
`(j % per_row) * chunk_bytes`; thread t of the warpgroup copies chunks t, t + 128, ...

Variants:

- plain (no transforms, no swizzle): any window that is rows of consecutive elements at one
  stride (`gmem_runs.strided_rows`), stored densely in the slice's shape;
- tiled (one 2-D `TileTransform`, the tile dividing the slice) and/or swizzled (32, 64 or 128
  bytes): a 2-D window whose minor dim is the array's last; with a swizzle the tile row (the
  whole row without a tiling) spans exactly the swizzle.

The chunk is the widest of 16, 8 and 4 bytes that divides the tile row, the row stride (with
several rows) and the static part of the window's byte offset.  (The SMEM side is aligned to it:
the buffer, or view, holds a multiple of the chunk and allocations are 16-byte aligned.)  A
traced start is assumed to keep that alignment, and a window to stay in bounds (cp.async cannot
zero-fill): static starts are checked here, traced ones by the interpreter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asyncdsl.dtypes import DType
from asyncdsl.errors import CopyError
from asyncdsl.hw import gmem_runs
from asyncdsl.hw.gmem_runs import contiguous_strides
from asyncdsl.hw.limits import CP_ASYNC_CHUNK_SIZES
from asyncdsl.hw.transforms import Index, MemRefTransform, TileTransform


@dataclass(frozen=True)
class CpAsyncPlan:
    """What every thread of the warpgroup copies (see the module docstring for the layout)."""

    rows: int
    row_bytes: int
    row_stride_bytes: int
    tile_rows: int
    tile_row_bytes: int
    swizzle_bytes: int
    chunk_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.rows * self.row_bytes

    @property
    def chunks(self) -> int:
        return self.total_bytes // self.chunk_bytes

    @property
    def chunks_per_row(self) -> int:
        return self.row_bytes // self.chunk_bytes

    @property
    def tiles_per_row(self) -> int:
        return self.row_bytes // self.tile_row_bytes

    def chunk_offsets(self) -> tuple[np.ndarray, np.ndarray]:
        """(GMEM byte offset from the window's first element, unswizzled SMEM byte offset from
        the buffer) of every chunk, in chunk order."""
        chunk = np.arange(self.chunks, dtype=np.int64)
        row = chunk // self.chunks_per_row
        byte = chunk % self.chunks_per_row * self.chunk_bytes
        gmem = row * self.row_stride_bytes + byte
        tile = row // self.tile_rows * self.tiles_per_row + byte // self.tile_row_bytes
        smem = (
            tile * (self.tile_rows * self.tile_row_bytes)
            + row % self.tile_rows * self.tile_row_bytes
            + byte % self.tile_row_bytes
        )
        return gmem, smem


def plan_cp_async_copy(
    gmem_shape: Sequence[int],
    dtype: DType,
    starts: Sequence[Index],
    sizes: Sequence[int],
    transforms: Sequence[MemRefTransform],
    swizzle_bytes: int,
    smem_shape: Sequence[int],
) -> CpAsyncPlan:
    """Plan the cp.async copy of `transforms(gmem[window])` into an SMEM buffer, swizzled.

    `starts` are ints or traced values, `sizes` -1 for squeezed dims.  Raises CopyError naming
    the broken rule.
    """
    if dtype.bits < 8:
        raise CopyError(f"cp.async copies of {dtype.bits}-bit elements ({dtype}) are not supported")
    problems = gmem_runs.out_of_bounds_dims(gmem_shape, starts, sizes)
    if problems:
        raise CopyError(
            "cp.async copies cannot read out of bounds (there is no zero fill): " + "; ".join(problems)
        )
    item = dtype.itemsize
    if transforms or swizzle_bytes:
        layout, expected = _tiled_layout(gmem_shape, sizes, transforms, swizzle_bytes, item)
    else:
        layout, expected = _plain_layout(gmem_shape, sizes, item)
    if tuple(smem_shape) != expected:
        raise CopyError(
            f"SMEM buffer shape {tuple(smem_shape)} does not match the shape of the copied slice {expected}"
        )
    rows, row_bytes, row_stride_bytes, tile_rows, tile_row_bytes = layout
    alignment_needs = {
        "the tile row" if transforms else "the row": tile_row_bytes,
        "the GMEM row stride": row_stride_bytes if rows > 1 else 0,
        "the slice's static byte offset": gmem_runs.static_offset_bytes(gmem_shape, dtype, starts),
    }
    for chunk in CP_ASYNC_CHUNK_SIZES:
        if all(value % chunk == 0 for value in alignment_needs.values()):
            break
    else:
        spelled = ", ".join(f"{name} {value} bytes" for name, value in alignment_needs.items() if value)
        raise CopyError(
            f"cp.async moves 4, 8 or 16 aligned bytes per thread, but no such chunk divides "
            f"{spelled}"
        )
    return CpAsyncPlan(rows, row_bytes, row_stride_bytes, tile_rows, tile_row_bytes, swizzle_bytes, chunk)


def _plain_layout(gmem_shape, sizes, item: int):
    rows = gmem_runs.strided_rows(gmem_shape, sizes)
    if rows is None:
        raise CopyError(
            f"a cp.async copy without transforms moves rows of consecutive elements at one "
            f"stride; the slice of sizes {tuple(sizes)} (-1: squeezed) of an array of shape "
            f"{tuple(gmem_shape)} is not one (copy it in parts)"
        )
    count, row_elements, stride = rows
    layout = (count, row_elements * item, stride * item, count, row_elements * item)
    return layout, gmem_runs.sliced_sizes(sizes)


def _tiled_layout(gmem_shape, sizes, transforms, swizzle_bytes: int, item: int):
    tiling = _tiling(transforms) if transforms else None
    sliced = gmem_runs.sliced_sizes(sizes)
    strides = [s for s, n in zip(contiguous_strides(gmem_shape), sizes) if n != gmem_runs.SQUEEZED]
    if len(sliced) != 2 or strides[1] != 1:
        raise CopyError(
            "tiled and swizzled cp.async copies move a 2-D slice whose minor dim is the array's "
            f"last; the slice has shape {sliced} (squeezed dims removed)"
        )
    rows, cols = sliced
    tile_rows, tile_cols = tiling or sliced
    if rows % tile_rows or cols % tile_cols:
        raise CopyError(
            f"the tiling {(tile_rows, tile_cols)} must divide the slice {sliced} of a cp.async copy"
        )
    if swizzle_bytes and tile_cols * item != swizzle_bytes:
        what = "tile rows" if tiling else "rows of the slice"
        raise CopyError(
            f"swizzle {swizzle_bytes} needs {what} of exactly {swizzle_bytes} bytes "
            f"({swizzle_bytes // item} elements), got {tile_cols} elements ({tile_cols * item} bytes)"
        )
    layout = (rows, cols * item, strides[0] * item, tile_rows, tile_cols * item)
    shape = (rows // tile_rows, cols // tile_cols, tile_rows, tile_cols) if tiling else sliced
    return layout, shape


def _tiling(transforms: Sequence[MemRefTransform]) -> tuple[int, int]:
    tile = transforms[0]
    if len(transforms) != 1 or not isinstance(tile, TileTransform) or len(tile.tiling) != 2 or tile.rounding:
        raise CopyError(
            "cp.async copies take no transforms or one 2-D TileTransform without rounding "
            f"(the tiled variant); got {', '.join(map(str, transforms))}"
        )
    return tile.tiling
