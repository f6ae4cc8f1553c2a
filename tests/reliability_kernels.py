"""Kernels of the silent-wrong-data regressions (CPU and GPU suites): each once read or wrote the
wrong bytes without an error."""

from __future__ import annotations

import asyncdsl as ad


@ad.kernel(grid=(2,))
def row_past_a_unit_dim(x, y):
    """x (1, 16): CTA i loads row i + 1, which lies outside x: zeros (it once read row 0)."""
    buf = ad.smem((16,), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.program_id(0) + 1, :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[ad.program_id(0), :])
    ad.await_async_copy(0)


@ad.kernel(grid=(2,))
def dropped_row_past_a_unit_dim(x, y):
    """x (1, 8, 16): CTA i loads the window ds(i, 1) of x's unit dim, dropped from the buffer by
    DropUnitDimsTransform: zeros in CTA 1 (the dropped dim once took its start with it: x[0])."""
    buf = ad.smem((8, 16), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(ad.program_id(0), 1), :, :], buf, barrier=bar,
                  transforms=[ad.DropUnitDimsTransform((0,))])
    bar.wait()
    ad.async_copy(buf, y.at[ad.program_id(0), :, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def last_row(x, y):
    """The literal index -1: x's last row, as in numpy (it once was a coordinate: zeros)."""
    buf = ad.smem((16,), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[-1, :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[0, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(2,))
def store_past_a_unit_dim(x, y):
    """y (1, 16): CTA i stores row i + 5, outside y: nothing lands (it once overwrote y[0])."""
    buf = ad.smem((16,), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.program_id(0), :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[ad.program_id(0) + 5, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(2,))
def hinted_tiles(x, y, OFFSET: ad.constexpr, HINT: ad.constexpr = True):
    """CTA i loads 8 rows through an (8, 16) tiling from row num_programs * 4 * i + OFFSET: a
    multiple of 8 for OFFSET 0 (the grid has 2 CTAs), which only the hint tells the compiler."""
    row = ad.num_programs(0) * 4 * ad.program_id(0) + OFFSET
    if HINT:
        row = ad.multiple_of(row, 8)  # the hint
    buf = ad.smem((1, 1, 8, 16), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(row, 8), :], buf, barrier=bar, transforms=ad.TileTransform((8, 16)))
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(ad.program_id(0) * 8, 8), :], transforms=ad.TileTransform((8, 16)))
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def folded_negative_row(x, y):
    """program_id(1) * 0 - 1 folds to -1 while tracing: row -1 lies outside x (zeros), as the same
    value computed on the GPU does; it once wrapped to the last row."""
    buf = ad.smem((16,), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.program_id(1) * 0 - 1, :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[0, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def multicast_tile(x, y):
    """Both CTAs of the cluster get the whole (16, 256) tile, each loading half (4-bit types once
    failed in the interpreter)."""
    buf = ad.smem((16, 256), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], buf, barrier=bar, collective="x")
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(ad.program_id(0) * 16, 16), :])
    ad.await_async_copy(0)


@ad.kernel(grid=(2,))
def stores_above(x, y):
    """CTA 0 stores at row -16 of y: a traced negative store coordinate (the H200 faults)."""
    buf = ad.smem((16, 16), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, 16), :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(ad.program_id(0) * 16 - 16, 16), :])  # the store
    ad.await_async_copy(0)


@ad.kernel(grid=lambda x, y, SLAB, ROW, STEP, GUARD=False: (x.shape[0],))
def bulk_store_rows(x, y, SLAB: ad.constexpr, ROW: ad.constexpr, STEP: ad.constexpr,
                    GUARD: ad.constexpr = False):
    """y (4, 4, 16): CTA i stores x[i] (2 rows of 16) at rows ROW + STEP * i and the next of
    y[SLAB] with oob="undefined", one bulk store of a 128-byte run.  Past the end of the slab's
    rows that run goes on into slab SLAB + 1 (it once overwrote it there); only in the last slab
    does the clamp at the array's end cut it.  GUARD skips the CTAs whose rows leave the slab."""
    buf = ad.smem((2, 16), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.program_id(0)], buf, barrier=bar, oob="promise_in_bounds")
    bar.wait()
    row = ad.program_id(0) * STEP + ROW
    guard = row <= y.shape[1] - 2 if GUARD else None
    ad.async_copy(buf, y.at[SLAB, ad.ds(row, 2), :], oob="undefined", predicate=guard)  # the store
    ad.await_async_copy(0)


@ad.kernel(grid=(2,))
def stores_below_a_guard(x, y):
    """CTA i stores x (16, 16) at rows 16 * i - 16 of y, where i >= 1: CTA 0's window starts at -16,
    which TMA cannot store to, but its predicate skips it (it was once reported all the same)."""
    buf = ad.smem((16, 16), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x, buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(ad.program_id(0) * 16 - 16, 16), :],  # the store
                  predicate=ad.program_id(0) >= 1)
    ad.await_async_copy(0)
