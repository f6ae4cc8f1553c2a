"""Reading an index from device memory: `asyncdsl.load_index(offsets.at[b])`.

    start = ad.load_index(cu_seqlens.at[b])          # a traced index, as program_id gives
    ad.async_copy(x.at[ad.ds(start + row, 64), :], buf, barrier=landed)
    for j in ad.range(ad.load_index(counts.at[b])):  # a loop bound
        ...

What a batch's layout says (sequence offsets, block tables, group sizes) stays on the device, so
the host never waits for it and one compiled kernel takes every batch.  The element is an int32
or uint32 of a kernel array argument, indexed in every dim.
"""

from __future__ import annotations

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.refs import GmemRef, GmemView
from asyncdsl.frontend.scalars import Scalar, int32_index

_INDEX_DTYPES = (dtypes.int32, dtypes.uint32)


def load_index(cell) -> Scalar:
    """The int32 (or uint32) element `cell` (`x.at[i, ...]`, every dim indexed) of a GMEM array
    argument, as a traced index."""
    what = "asyncdsl.load_index"
    if isinstance(cell, GmemRef) and cell.shape == (1,):
        cell = cell.at[0]
    if not isinstance(cell, GmemView) or not all(d.squeezed for d in cell.dims):
        raise TraceError(f"{what} reads one element of a kernel array argument: index every dim "
                         f"(offsets.at[b]), got {cell!r}", user_location())
    if cell.ref.peer_index is not None:
        raise TraceError(f"{what} reads this device's arrays only (no .peer)", user_location())
    if cell.dtype not in _INDEX_DTYPES:
        raise TraceError(f"{what} reads an int32 or uint32 element, {cell.ref.name} holds {cell.dtype}",
                         user_location())
    op = ir.LoadIndexOp(cell.ref.value, [int32_index(d.start) for d in cell.dims])
    return Scalar(tracing.current(what).emit(op).results[0])
