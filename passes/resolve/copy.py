"""Which copy engine performs a user's `asyncdsl.async_copy`, as JAX Mosaic GPU picks it."""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import CopyError
from asyncdsl.hw.options import Implementation
from asyncdsl.passes.resolve.bulk import resolve_bulk, takes_bulk_path
from asyncdsl.passes.resolve.collective import is_collective, resolve_collective_copy
from asyncdsl.passes.resolve.cp_async import resolve_cp_async
from asyncdsl.passes.resolve.tile_boxes import needs_tile_boxes, resolve_tile_boxes
from asyncdsl.passes.resolve.tma import resolve_tma


def resolve_copy(copy: ir.AsyncCopyOp) -> None:
    """Replace `copy` by the hardware ops that perform it (raises CopyError if none can).

    The engine, as the reference picks it: cp.async when asked for; a plain bulk copy when the
    caller gave up zero fill (`oob` other than "zeros", the default) and the slice is one
    contiguous run needing no tensor map; tiled TMA (which zero-fills) otherwise, one box per
    layout tile when the array does not divide into the tiling (`tile_boxes.py`).  A copy to or
    from a peer device's array (`peer`) always takes tiled TMA.
    """
    if copy.eviction is not None and (copy.implementation.data == Implementation.CP_ASYNC or not copy.is_load
                                      or copy.peer is None and takes_bulk_path(copy)):
        raise CopyError(f"eviction_policy={copy.eviction.data!r} is a hint of TMA tensor loads (GMEM -> SMEM "
                        "through a tensor map): this copy is a store, a cp.async copy or a plain bulk copy")
    if is_collective(copy):
        if needs_tile_boxes(copy):
            resolve_tile_boxes(copy, resolve_collective_copy)
        else:
            resolve_collective_copy(copy)
        return
    if copy.implementation.data == Implementation.CP_ASYNC:
        resolve_cp_async(copy)
        return
    if copy.peer is None and takes_bulk_path(copy):
        resolve_bulk(copy)
        return
    if needs_tile_boxes(copy):
        resolve_tile_boxes(copy, resolve_tma)
        return
    resolve_tma(copy)
