"""Moving register tiles to and from memory: `asyncdsl.load` and `asyncdsl.store`.

    x = ad.load(buf.at[stage], layout=ad.WGMMA)         # a whole SMEM buffer (or view), like
                                                        # buf.at[stage][...]
    ad.store(out_buf, y)                                # the same as out_buf[...] = y
    out_buf.peer(1)[...] = y                            # the copy of out_buf in CTA 1 of the cluster
    r = ad.load(x.at[ad.ds(row, 64), :], mask=m, other=0.0)   # a GMEM window, element by element
    ad.store(y.at[ad.ds(row, 64), :], r, mask=m)
    e = ad.load(table.at[ids[:, None], ad.iota((64, 128), ad.int32, dim=1)])   # a gather by computed index
    ad.store(out.at[ids[:, None], ad.iota((64, 128), ad.int32, dim=1)], e * 2)   # and a scatter

Shared memory is read and written whole by ordinary loads and stores of the 128 threads:
generic-proxy accesses, so a TMA store of what they wrote needs `asyncdsl.fence_async_smem()`
first.  A GMEM window is what TMA cannot move: rows whose stride is not a multiple of 16 bytes,
windows that start anywhere, elements chosen by a mask.  Elements outside the array are never
touched: a load gives `other` there (as where `mask` is false), a store leaves them alone.
"""

from __future__ import annotations

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.refs import GmemIndexed, GmemRef, GmemView, PeerSmem, SmemRef
from asyncdsl.frontend.scalars import int32_index
from asyncdsl.frontend.tile_arguments import constant_attr, layout_argument, mask_hint, tile_dtype
from asyncdsl.frontend.tiles import (
    RegisterTile,
    assigned,
    broadcast_shape,
    broadcast_to,
    full,
    stretches_to,
)
from asyncdsl.hw.fragments import Layout


def _window(view) -> GmemView:
    return view.whole() if isinstance(view, GmemRef) else view


def _mask(mask, shape: tuple[int, ...], what: str):
    if mask is None:
        return None
    if isinstance(mask, RegisterTile) and mask.dtype == dtypes.BOOL and stretches_to(mask.shape, shape):
        mask = broadcast_to(mask, shape)  # numpy's rules: a (4, 1) mask for a (4, 128) window
    if not isinstance(mask, RegisterTile) or mask.dtype != dtypes.BOOL or mask.shape != shape:
        raise TraceError(f"{what}: mask must be a bool tile of the window's shape {shape} (a comparison)"
                         f"{mask_hint(getattr(mask, 'dtype', None))}", user_location())
    return mask.use(what)


def _gmem_operands(view: GmemView):
    return ([int32_index(d.start) for d in view.dims],
            [ir.SQUEEZED if d.squeezed else d.size for d in view.dims])


def load(ref, layout: Layout | None = None, mask=None, other=0):
    """The contents of a shared-memory buffer, of a GMEM window, or the elements a gather names
    (`x.at[...]` with int32 tiles among the indices), as a register tile in `layout` (or
    inferred); in GMEM, elements outside the array, or where `mask` is false, are `other`."""
    what = "asyncdsl.load"
    if isinstance(ref, (SmemRef, PeerSmem)):
        if mask is not None:
            raise TraceError(f"{what}: a shared-memory buffer is read whole; mask is for GMEM windows",
                             user_location())
        return ref.load(layout)
    if isinstance(ref, GmemIndexed):
        return _gather(ref, layout_argument(layout, what), mask, other, what)
    if not isinstance(ref, (GmemView, GmemRef)):
        raise TraceError(f"{what} reads a shared-memory buffer or a GMEM window (x.at[...]), got {ref!r}",
                         user_location())
    view = _window(ref)
    tile_dtype(view.dtype, f"{what} of {view.ref.name}")  # the array named where its dtype is refused
    layout = layout_argument(layout, what)
    starts, sizes = _gmem_operands(view)
    other_attr = constant_attr(other, view.dtype, f"{what}: other")
    op = ir.LoadGmemOp(view.ref.value, starts, sizes, other_attr, _mask(mask, view.shape, what), layout)
    return RegisterTile(tracing.current(what).emit(op).results[0], view.dtype)


def _indices(gather: GmemIndexed, what: str) -> tuple[tuple[int, ...], list[RegisterTile]]:
    """The indices' broadcast shape, and each index as an int32 tile of it."""
    tiles = [index for index in gather.indices if isinstance(index, RegisterTile)]
    shape = tiles[0].shape
    for tile in tiles[1:]:
        shape = broadcast_shape(shape, tile.shape, what)
    return shape, [
        broadcast_to(index if isinstance(index, RegisterTile) else full((), index, dtypes.int32), shape)
        for index in gather.indices]


def _gather(gather: GmemIndexed, layout: Layout | None, mask, other, what: str) -> RegisterTile:
    """The elements `gather` names, as a tile of its indices' broadcast shape."""
    shape, indices = _indices(gather, what)
    other_attr = constant_attr(other, gather.dtype, f"{what}: other")
    op = ir.GatherGmemOp(gather.ref.value, [index.use(what) for index in indices], other_attr,
                         _mask(mask, shape, what), layout)
    return RegisterTile(tracing.current(what).emit(op).results[0], gather.dtype)


def store(ref, tile, mask=None) -> None:
    """Write `tile` into a shared-memory buffer (same shape and dtype), into a GMEM window, or to
    the elements a scatter's indices name (`y.at[...]` with int32 tiles among the indices; two
    elements naming one array element leave it undefined), except outside the array or where
    `mask` is false."""
    what = "asyncdsl.store"
    if isinstance(ref, (SmemRef, PeerSmem)):
        if mask is not None:
            raise TraceError(f"{what}: a shared-memory buffer is written whole; mask is for GMEM windows",
                             user_location())
        ref.store(tile)
        return
    if isinstance(ref, GmemIndexed):
        shape, indices = _indices(ref, what)
        tile = assigned(tile, shape, ref.dtype, "the elements the indices name", what)
        op = ir.ScatterGmemOp(tile.use(what), ref.ref.value, [index.use(what) for index in indices],
                              _mask(mask, shape, what))
        tracing.current(what).emit(op)
        return
    if not isinstance(ref, (GmemView, GmemRef)):
        raise TraceError(f"{what} writes a shared-memory buffer or a GMEM window (y.at[...]), got {ref!r}",
                         user_location())
    view = _window(ref)
    tile = assigned(tile, view.shape, view.dtype, "the window", what)
    starts, sizes = _gmem_operands(view)
    store = ir.StoreGmemOp(tile.use(what), view.ref.value, starts, sizes, _mask(mask, view.shape, what))
    tracing.current(what).emit(store)
