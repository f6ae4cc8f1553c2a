"""`asyncdsl.async_gather` / `asyncdsl.async_scatter`: rows of a 2-D GMEM array picked by index.

    idx = ad.smem((64,), ad.uint32)                 # row indices: data, loaded like any other
    ad.async_copy(routes.at[ad.ds(k * 64, 64)], idx, barrier=got_idx)
    got_idx.wait()
    tokens = ad.smem((64, 128), x.dtype)
    ad.async_gather(x.at[:, ad.ds(0, 128)], tokens, rows=idx, barrier=got_rows)

Row i of `tokens` receives row `idx[i]` of the column window. These are Blackwell instructions
(`.tile::gather4` / `.tile::scatter4`, four rows each): kernels using them compile for
`arch="sm_100a"` and are refused for Hopper.

Why the indices come from shared memory: the hardware takes four row coordinates per
instruction, in registers of the issuing thread. In asyncdsl's value model a kernel has no
per-thread register arrays yet, and the only traced scalars are functions of program ids; row
indices of a real gather (a routing table, a permutation) are data in memory. An SMEM buffer is
where such data lands (`async_copy` of the index array), and the issuing thread reads four
indices from it right before each instruction, which is what the instruction needs anyway.
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.options import flag, swizzle_bytes
from asyncdsl.frontend.refs import GmemRef, GmemView, SmemRef
from asyncdsl.frontend.scalars import IndexLike, index_value
from asyncdsl.frontend.sync import Barrier


def _column_window(side: object, what: str) -> tuple[GmemRef, IndexLike, int]:
    """(array, first column, columns) of the GMEM side: the array, or a view taking every row."""
    if isinstance(side, GmemRef):
        side = side.whole()
    if not isinstance(side, GmemView):
        raise TraceError(
            f"{what} GMEM side must be a kernel array argument, optionally .at[:, asyncdsl.ds(col, n)], "
            f"got {type(side).__name__}",
            user_location(),
        )
    *leading, columns = side.dims
    for dim, (index, size) in enumerate(zip(leading, side.ref.shape)):
        if index.squeezed or not isinstance(index.start, int) or index.start != 0 or index.size != size:
            raise TraceError(
                f"{what} picks rows with rows=...: dim {dim} of the GMEM view must be whole (':'), "
                "only the column window may be sliced",
                user_location(),
            )
    if columns.size is None:  # squeezed
        raise TraceError(
            f"{what} moves a window of columns; index the last dim with asyncdsl.ds(start, size)",
            user_location())
    return side.ref, columns.start, columns.size


def _row_indices(rows: object, what: str) -> SmemRef:
    if not isinstance(rows, SmemRef):
        raise TraceError(
            f"{what} takes its row indices from an asyncdsl.smem buffer of unsigned integers, got "
            f"{type(rows).__name__}",
            user_location(),
        )
    return rows.plain(what)


def async_gather(src, dst: SmemRef, *, rows: SmemRef, barrier: Barrier, swizzle: int | None = None,
                 arrive: bool = True) -> None:
    """Load rows `rows[0], rows[1], ...` of a column window of a 2-D GMEM array into the rows of
    `dst` (shape `(len(rows), columns)`), completing on `barrier`.

    `rows` is a 1-D SMEM buffer of uint8/16/32 indices, a multiple of 4 long; each group of four
    rows must span a multiple of 128 bytes. Rows past the end of the array read zeros. `arrive`
    and `swizzle` work as in `async_copy`.
    """
    tracer = tracing.current("asyncdsl.async_gather")
    array, column, columns = _column_window(src, "async_gather")
    if not isinstance(dst, SmemRef):
        raise TraceError(
            f"async_gather destination must be an asyncdsl.smem buffer, got {type(dst).__name__}",
            user_location())
    if not isinstance(barrier, Barrier):
        raise TraceError(f"barrier must come from asyncdsl.barrier(...), got {barrier!r}", user_location())
    barriers, barrier_index = barrier.operands()
    tracer.emit(ir.AsyncCopyRowsOp(
        array.value, dst.plain("async_gather").value, _row_indices(rows, "async_gather").value,
        index_value(column), columns,
        barriers=barriers, barrier_index=barrier_index, swizzle=swizzle_bytes(swizzle),
        arrive=flag(arrive, "arrive"),
    ))


def async_scatter(src: SmemRef, dst, *, rows: SmemRef, swizzle: int | None = None,
                  arrive: bool = True) -> None:
    """Store the rows of `src` (shape `(len(rows), columns)`) to rows `rows[0], rows[1], ...` of a
    column window of a 2-D GMEM array, in the warpgroup's bulk group (wait with
    `await_async_copy`; `arrive=False` leaves the group open).

    Same rules as `async_gather`; rows past the end of the array are not written.
    """
    tracer = tracing.current("asyncdsl.async_scatter")
    array, column, columns = _column_window(dst, "async_scatter")
    if not isinstance(src, SmemRef):
        raise TraceError(f"async_scatter source must be an asyncdsl.smem buffer, got {type(src).__name__}",
                         user_location())
    tracer.emit(ir.AsyncCopyRowsOp(
        src.plain("async_scatter").value, array.value, _row_indices(rows, "async_scatter").value,
        index_value(column), columns,
        swizzle=swizzle_bytes(swizzle), arrive=flag(arrive, "arrive"),
    ))
