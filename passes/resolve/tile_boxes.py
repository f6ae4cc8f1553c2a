"""Copies into (or out of) a tiled buffer whose GMEM array does not divide into the tiling, or
whose window starts at a traced row or column not provably on a tile boundary: one TMA box per
run of contiguous tiles, through the untiled tensor map.

A tiled TMA copy views the whole GMEM array through the tiling (`hw.tma`), which needs every dim
of the array to be a whole number of tiles (a partial tile at the array's edge would otherwise
read past the end of a tile dim that TMA cannot bound) and the window to start on a tile
boundary (a sequence's rows in a packed batch start anywhere).  A buffer tiled `TileTransform((r, c))`
over a 2-d window is, in shared memory, its (r, c) tiles one after another (row of tiles by row
of tiles).  Each tile is exactly what a 2-d box of (r, c) elements lands, with the same swizzle,
so the copy becomes one box per tile at the tile's byte offset, from the array as it is: boxes
past the array's edge are zero-filled (loads) or clipped (stores) by TMA itself.  Tiles one
above the other in a single column of tiles are one contiguous run and go as one box.

The first load of the group announces every box's bytes on the barrier (one arrival, as the
copy would make); a store commits its bulk group after the last box.  A collective load's boxes
are each split among the CTAs of the collective and multicast, as the whole copy would be.
"""

from __future__ import annotations

from xdsl.rewriter import InsertPoint, Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.ir_utils import bool_prop, constant_value, int_prop
from asyncdsl.dialects.option_attrs import eviction_of
from asyncdsl.dialects.transform_attrs import transform_from_attr
from asyncdsl.errors import CopyError
from asyncdsl.hw.limits import MAX_BOX_DIM, TMA_SMEM_ALIGNMENT
from asyncdsl.hw.transforms import TileTransform
from asyncdsl.passes.resolve.index_builder import IndexBuilder
from asyncdsl.passes.resolve.index_facts import known_divisor


def _tiling(copy: ir.AsyncCopyOp) -> tuple[int, int] | None:
    transforms = [transform_from_attr(t) for t in copy.transforms]
    if len(transforms) != 1 or not isinstance(transforms[0], TileTransform):
        return None
    tile = transforms[0]
    return tile.tiling if len(tile.tiling) == 2 and tile.rounding is None else None


def _window_dims(copy: ir.AsyncCopyOp) -> tuple[int, int] | None:
    """The GMEM dims of a 2-d window: the two that are not squeezed (others may sit between
    them: the rows of one head in a (B, S, H, D) array)."""
    dims = tuple(d for d, size in enumerate(copy.sizes) if size != ir.SQUEEZED)
    return dims if len(dims) == 2 else None


def needs_tile_boxes(copy: ir.AsyncCopyOp) -> bool:
    """A 2-d window copied through one 2-d tiling whose tiles the GMEM array's window dims do
    not divide, or that starts at a traced index the divisibility analysis cannot prove a
    multiple of its tile (the cases the tiled view refuses)."""
    tiling, dims = _tiling(copy), _window_dims(copy)
    if tiling is None or dims is None:
        return False
    shape = ir.shape_of(copy.gmem)
    if any(shape[d] > tile and shape[d] % tile for d, tile in zip(dims, tiling)):
        return True
    return any(constant_value(copy.starts[d]) is None and known_divisor(copy.starts[d]) % tile
               for d, tile in zip(dims, tiling))


def _runs(window: tuple[int, int], tiling: tuple[int, int]) -> list[tuple[int, int, int]]:
    """(first row, first column, rows) of each box: a whole column of tiles when there is only
    one column (it is contiguous), else each tile."""
    rows, columns = window
    r, c = tiling
    if columns == c:  # contiguous rows: boxes of up to 256 of them (a multiple of 8: whole swizzle repeats)
        return [(start, 0, min(MAX_BOX_DIM, rows - start)) for start in range(0, rows, MAX_BOX_DIM)]
    if r > MAX_BOX_DIM:
        raise CopyError(f"a tile of {r} rows is taller than a TMA box ({MAX_BOX_DIM} rows) can be")
    return [(i, j, r) for i in range(0, rows, r) for j in range(0, columns, c)]


def _check_buffer(copy: ir.AsyncCopyOp, window: tuple[int, int], tiling: tuple[int, int], element) -> None:
    """The rules the tiled view would have checked: the window is whole tiles and the buffer has
    its tiled shape; and, one box a tile, each tile starts where TMA can write (128 bytes)."""
    tiled = TileTransform(tiling).transform_shape(window)  # TransformError for a partial tile
    if ir.shape_of(copy.smem) != tiled:
        raise CopyError(f"SMEM buffer shape {ir.shape_of(copy.smem)} does not match the transformed slice "
                        f"shape {tiled}")
    tile_bytes = tiling[0] * tiling[1] * element.bits // 8  # 4-bit elements pack two to a byte
    if window[1] != tiling[1] and tile_bytes % TMA_SMEM_ALIGNMENT:
        raise CopyError(
            f"the GMEM array is not whole {tiling} tiles, so this copy goes one TMA box per tile, and its "
            f"{tile_bytes}-byte tiles would put boxes at shared-memory offsets that are no multiple of "
            f"{TMA_SMEM_ALIGNMENT} bytes, where TMA cannot write (the H200 faults): use tiles of a multiple "
            f"of {TMA_SMEM_ALIGNMENT} bytes, a window one tile wide, or an array of whole tiles"
        )


def resolve_tile_boxes(copy: ir.AsyncCopyOp, resolve_box) -> None:
    """Replace `copy` by one untiled copy per run of tiles, each resolved by `resolve_box`
    (which replaces it by its hardware op and returns that)."""
    tiling, dims = _tiling(copy), _window_dims(copy)
    assert tiling is not None and dims is not None, "a copy in tile boxes is one of a tiled 2-d window"
    r, c = tiling
    row_dim, column_dim = dims
    window = (copy.sizes[row_dim], copy.sizes[column_dim])
    element = dtypes.from_mlir(ir.shaped_type(copy.gmem.type).element_type)
    _check_buffer(copy, window, (r, c), element)
    columns_of_tiles = window[1] // c
    builder = IndexBuilder(copy)
    row_start, column_start = (builder.wrap(copy.starts[d]) for d in (row_dim, column_dim))
    boxes = []
    for row, column, rows in _runs(window, (r, c)):
        # A single column of tiles is its rows one after another; else tile (i, j) is number
        # i * columns_of_tiles + j.
        tile_number = (row // r) * columns_of_tiles + column // c
        offset = (row * c if columns_of_tiles == 1 else tile_number * r * c) * element.bits // 8
        part = ir.SmemSliceOp(copy.smem, builder.value(offset), (rows, c))
        Rewriter.insert_op(part, InsertPoint.before(copy))
        starts, gmem_sizes = list(copy.starts), list(copy.sizes)
        starts[row_dim], starts[column_dim] = (builder.value(row_start + row),
                                               builder.value(column_start + column))
        gmem_sizes[row_dim], gmem_sizes[column_dim] = rows, c
        source, destination = (copy.gmem, part.result) if copy.is_load else (part.result, copy.gmem)
        box = ir.AsyncCopyOp(
            source, destination, starts, gmem_sizes, barriers=copy.barriers, barrier_index=copy.barrier_index,
            predicate=copy.predicate, swizzle=copy.swizzle.value.data, arrive=bool(copy.arrive.value.data),
            oob=copy.oob.data, reduction=copy.reduction.data if copy.reduction is not None else None,
            collective=copy.cluster_dims, implementation=copy.implementation.data,
            partition=copy.partition.data if copy.partition is not None else None,
            partition_axis=copy.partition_axis.value.data if copy.partition_axis is not None else None,
            peer=copy.peer, eviction=eviction_of(copy),
        )
        box.location = copy.location
        Rewriter.insert_op(box, InsertPoint.before(copy))
        boxes.append(resolve_box(box))
    Rewriter.erase_op(copy)
    if copy.is_load:
        total = sum(b.expect_tx_bytes.value.data for b in boxes)
        for number, load in enumerate(boxes):
            load.expect_tx_bytes = int_prop(total if number == 0 else 0)
    else:
        committing = bool(boxes[-1].commit.value.data)
        for number, store in enumerate(boxes):
            store.commit = bool_prop(committing and number == len(boxes) - 1)
