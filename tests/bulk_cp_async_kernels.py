"""Contiguous bulk copies and cp.async copies: kernels, inputs and independent numpy references,
shared by the CPU tests (IR, PTX, interpreter) and the GPU tests (tests/gpu).

Every kernel dumps what landed in shared memory to an output array with a plain bulk store, so
the tests see the SMEM bytes themselves (swizzle, untouched tails and all).  The references are
written from first principles: numpy slicing, `apply_chain_array` for tiles, and the swizzle
formula of the hardware (docs/hardware.md §4.1); they share no code with the planners.
Kernels take `TRACED` to compute their starts on the GPU (`program_id(0)` is 0 there) instead
of knowing them while tracing, so both the static and the run-time address paths are exercised.
"""

from __future__ import annotations

import numpy as np

import asyncdsl as ad
from asyncdsl.hw.transforms import apply_chain_array

# -- bulk copies -------------------------------------------------------------------------------


@ad.kernel(grid=lambda x, y, ROWS, OOB: (x.shape[0] // ROWS,))
def bulk_rows(x, y, ROWS: ad.constexpr, OOB: ad.constexpr):
    """CTA i moves rows [i * ROWS, (i + 1) * ROWS) of x to y through SMEM, one bulk load and one
    bulk store (the rows may be longer than a TMA box allows)."""
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)
    buf = ad.smem((ROWS, *x.shape[1:]), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[rows], buf, barrier=bar, oob=OOB)
    bar.wait()
    ad.async_copy(buf, y.at[rows], oob=OOB)
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def bulk_clamped_load(x, fill, y, START: ad.constexpr, TRACED: ad.constexpr, ARRIVE: ad.constexpr):
    """Fill a buffer of len(y) elements from `fill`, bulk-load x[START : START + len(y)] over it
    with oob="undefined" (clamped at the end of x), and dump the buffer to y.  Without ARRIVE the
    kernel announces the whole buffer itself and the copy completes the bytes it leaves out."""
    buf = ad.smem(y.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(fill, buf, barrier=bar, oob="promise_in_bounds")
    bar.wait()
    start = ad.program_id(0) + START if TRACED else START
    window = x.at[ad.ds(start, y.shape[0])]
    if ARRIVE:
        ad.async_copy(window, buf, barrier=bar, oob="undefined")
    else:
        bar.arrive_expect_tx(buf.nbytes)
        ad.async_copy(window, buf, barrier=bar, oob="undefined", arrive=False)
    bar.wait()
    ad.async_copy(buf, y, oob="promise_in_bounds")
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def bulk_clamped_store(x, y, START: ad.constexpr, TRACED: ad.constexpr):
    """Bulk-load all of x, then bulk-store it at y[START:] with oob="undefined": what would run
    past the end of y is not written."""
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x, buf, barrier=bar, oob="promise_in_bounds")
    bar.wait()
    start = ad.program_id(0) + START if TRACED else START
    ad.async_copy(buf, y.at[ad.ds(start, x.shape[0])], oob="undefined")
    ad.await_async_copy(0)


@ad.kernel(grid=lambda x, y, ROWS, TILE: (x.shape[0] // ROWS,))
def bulk_tiled_rows(x, y, ROWS: ad.constexpr, TILE: ad.constexpr):
    """CTA i bulk-loads rows [i * ROWS, (i + 1) * ROWS) of x (whole rows, so the tiled layout is
    one contiguous run) tiled by (TILE, all columns), and dumps the buffer to y[i]."""
    buf = ad.smem(y.shape[1:], x.dtype)
    bar = ad.barrier()
    ad.async_copy(
        x.at[ad.ds(ad.program_id(0) * ROWS, ROWS), :], buf, barrier=bar, oob="undefined",
        transforms=ad.TileTransform((TILE, x.shape[1])),
    )
    bar.wait()
    ad.async_copy(buf, y.at[ad.program_id(0)], oob="promise_in_bounds")
    ad.await_async_copy(0)


def expected_clamped_load(x: np.ndarray, fill: np.ndarray, start: int) -> np.ndarray:
    out = fill.copy()
    if 0 <= start < x.size:
        count = min(fill.size, x.size - start)
        out[:count] = x[start : start + count]
    return out


def expected_clamped_store(x: np.ndarray, y: np.ndarray, start: int) -> np.ndarray:
    out = y.copy()
    if 0 <= start < y.size:
        count = min(x.size, y.size - start)
        out[start : start + count] = x[:count]
    return out


# -- cp.async ----------------------------------------------------------------------------------


@ad.kernel(grid=lambda x, y, COL, TRACED, BARRIER: (y.shape[0],))
def cp_async_window(x, y, COL: ad.constexpr, TRACED: ad.constexpr, BARRIER: ad.constexpr):
    """CTA i copies x[i * R : (i + 1) * R, COL : COL + C] ((R, C) = y.shape[1:]) with cp.async,
    completing on a barrier or in a commit group, and dumps the buffer to y[i]."""
    rows, cols = y.shape[1:]
    buf = ad.smem((rows, cols), x.dtype)
    i = ad.program_id(0)
    col = ad.program_id(1) + COL if TRACED else COL  # program_id(1) is 0: the grid is 1-d
    window = x.at[ad.ds(i * rows, rows), ad.ds(col, cols)]
    if BARRIER:
        bar = ad.barrier()
        ad.async_copy(window, buf, barrier=bar, implementation="cp_async")
        bar.wait()
    else:
        ad.async_copy(window, buf, implementation="cp_async")
        ad.await_cp_async_copy(0)
    ad.fence_async_smem()  # cp.async wrote through the generic proxy; the bulk store reads async
    ad.async_copy(buf, y.at[i], oob="promise_in_bounds")
    ad.await_async_copy(0)


@ad.kernel(grid=lambda x, y, SWIZZLE, TILED, BARRIER, ENGINE: (y.shape[0],))
def swizzled_rows(
    x, y, SWIZZLE: ad.constexpr, TILED: ad.constexpr, BARRIER: ad.constexpr, ENGINE: ad.constexpr
):
    """CTA i copies rows [i * R, (i + 1) * R) of x, swizzled by SWIZZLE bytes (tiled by
    (8, SWIZZLE bytes) when TILED, else rows of exactly SWIZZLE bytes), with ENGINE ("cp_async"
    or "tma"), and dumps the raw SMEM bytes to y[i]."""
    buf = ad.smem(y.shape[1:], x.dtype)
    rows = y.shape[1] * y.shape[3] if TILED else y.shape[1]
    window = x.at[ad.ds(ad.program_id(0) * rows, rows), :]
    tiles = (ad.TileTransform((8, SWIZZLE // x.dtype.itemsize)),) if TILED else ()
    if ENGINE == "tma" or BARRIER:
        bar = ad.barrier()
        ad.async_copy(window, buf, barrier=bar, implementation=ENGINE, swizzle=SWIZZLE, transforms=tiles)
        bar.wait()
    else:
        ad.async_copy(window, buf, implementation=ENGINE, swizzle=SWIZZLE, transforms=tiles)
        ad.await_cp_async_copy(0)
    ad.fence_async_smem()
    ad.async_copy(buf, y.at[ad.program_id(0)], oob="promise_in_bounds")
    ad.await_async_copy(0)


def swizzled_bytes(array: np.ndarray, swizzle: int) -> np.ndarray:
    """The bytes of `array` as a swizzled copy leaves them in SMEM from a buffer at the start
    of a swizzle period: byte address A holds what the dense layout has at A ^ (((A >> 7) & m) << 4)
    (the XOR is its own inverse)."""
    flat = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
    address = np.arange(flat.size)
    return flat[address ^ (((address >> 7) & (swizzle // 16 - 1)) << 4)]


def expected_swizzled_rows(x: np.ndarray, y_shape, swizzle: int, tiled: bool) -> np.ndarray:
    """y (as bytes) after `swizzled_rows`: each CTA's rows, tiled or not, swizzled."""
    out = []
    rows = y_shape[1] * y_shape[3] if tiled else y_shape[1]
    for cta in range(y_shape[0]):
        window = x[cta * rows : (cta + 1) * rows]
        if tiled:
            window = apply_chain_array((ad.TileTransform((8, swizzle // x.dtype.itemsize)),), window)
        out.append(swizzled_bytes(window, swizzle))
    return np.concatenate(out)


# (x shape, y shape, COL, the chunk the plan must pick): f32 windows whose row stride and start
# allow 16-, 8- and 4-byte chunks.
CP_ASYNC_WINDOWS = (
    ((128, 64), (4, 32, 64), 0, 16),  # whole rows: one contiguous run per CTA
    ((64, 50), (4, 16, 8), 2, 8),  # rows of 200 bytes, starting 8 bytes in
    ((64, 33), (4, 16, 4), 1, 4),  # rows of 132 bytes, starting 4 bytes in
    ((64, 60), (4, 16, 12), 4, 16),  # three chunks a row: no power of two to shift by
)
# (swizzle bytes, tiled, x shape, y shape) for bf16: 2 CTAs of 16 rows (tiled: 2 tiles of 8 rows
# by two swizzle-wide column tiles).
SWIZZLED_CASES = tuple(
    (swizzle, tiled, (32, swizzle if tiled else swizzle // 2), y_shape)
    for swizzle in (32, 64, 128)
    for tiled, y_shape in (
        (True, (2, 2, 2, 8, swizzle // 2)),
        (False, (2, 16, swizzle // 2)),
    )
)
