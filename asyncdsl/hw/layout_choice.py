"""The register layouts the compiler picks when the user gave none (`infer-layouts`), and what
stores of a splat tile use: each a layout whose loads and stores are wide and conflict-free."""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.hw.fragments import Layout, StridedLayout, TiledLayout, replicated_layout
from asyncdsl.hw.tiling import THREADS, WARP_LANES, WARPS, Tiling

VECTOR_BYTES = 16  # the widest ld/st.shared and ld/st.global


def row_layout(shape: tuple[int, ...], element_bytes: float) -> TiledLayout | None:
    """Warps over rows (as many of the 4 as the rows allow; the rest split the columns), a
    warp's lanes over a row in vectors of up to 16 bytes: reducing over the last axis is lane
    shuffles (and, with fewer than 4 rows, one exchange between warps), and a warp's load of a
    row is 32 adjacent vectors.  None if it cannot hold `shape`."""
    if len(shape) < 2:
        return None
    rows, columns = shape[-2:]
    column_warps = row_sharing_warps(rows)
    vector = max(1, int(VECTOR_BYTES // element_bytes))
    while vector > 1 and columns % (column_warps * WARP_LANES * vector):
        vector //= 2
    if columns % (column_warps * WARP_LANES * vector):
        return None
    lane_span = WARP_LANES * vector
    tiling = Tiling(((WARPS // column_warps, column_warps * lane_span), (1, lane_span), (1, vector)))
    return TiledLayout.canonical(tiling, (-6, -5), (-3,), -1)


def narrow_row_layout(shape: tuple[int, ...], element_bytes: float) -> TiledLayout | None:
    """For rows too short for `row_layout` (fewer than 32 vectors): each warp takes 32 / k rows
    at a time, k lanes a row, each lane a vector of the row (the widest, up to 16 bytes, that
    leaves the 4 warps whole blocks of rows).  Reducing over the last axis is log2(k) lane
    shuffles.  None if no such vector holds `shape`."""
    if len(shape) < 2:
        return None
    rows, columns = shape[-2:]
    vector = max(1, int(VECTOR_BYTES // element_bytes))
    while vector >= 1:
        lanes = columns // vector  # a row's lanes
        if columns % vector == 0 and lanes <= WARP_LANES and WARP_LANES % lanes == 0:
            lane_rows = WARP_LANES // lanes
            if rows % (WARPS * lane_rows) == 0:
                tiling = Tiling(((WARPS * lane_rows, columns), (lane_rows, columns), (1, vector)))
                return TiledLayout.canonical(tiling, (-6,), (-4, -3), -1)
        vector //= 2
    return None


def row_sharing_warps(rows: int) -> int:
    """How many warps share each row in `row_layout` of `rows` rows: the 4 warps go over the rows
    as far as they divide them.  Its rows must be a multiple of 32 times this long."""
    return WARPS // next(w for w in (WARPS, 2, 1) if rows % w == 0)


def strided_layout(shape: tuple[int, ...], element_bytes: float) -> StridedLayout | None:
    """The strided layout with the widest vector (up to 16 bytes) that holds `shape`."""
    size = math.prod(shape)
    vector = max(1, int(VECTOR_BYTES // element_bytes))
    while vector >= 1:
        if size % (THREADS * vector) == 0:
            return StridedLayout(vector)
        vector //= 2
    return None


# The most elements a tile may have for every thread to hold all of it (`replicated_layout`), one
# register each: the layout of tiles too small to share out among 128 threads.
REPLICATED_ELEMENTS = 64


def small_tile_layout(shape: tuple[int, ...]) -> TiledLayout | None:
    """Every thread holding every element, for a tile of at most REPLICATED_ELEMENTS; else None."""
    return replicated_layout(shape) if math.prod(shape) <= REPLICATED_ELEMENTS else None


def thread_linear(layout: Layout, shape: tuple[int, ...]) -> bool:
    """Whether each element's coordinates in `layout` are a per-register constant plus one
    per-thread term, a sum over the thread index's set bits: what one PTX sequence addresses for
    all 128 threads in a GMEM window.  A strided layout over rows whose length neither is a
    multiple of 128 vectors nor a power of two dividing it is not: a thread's elements then
    start rows at different registers than its neighbours' (4 rows of 160, one element a lane)."""
    coordinates = layout.coordinates(shape).reshape(THREADS, -1, len(shape))
    steps = coordinates[[1 << bit for bit in range(7)], 0] - coordinates[0, 0]  # (bit, dim)
    bits = (np.arange(THREADS)[:, None] >> np.arange(7)[None, :]) & 1  # (thread, bit)
    return bool(np.array_equal(coordinates, coordinates[0][None] + (bits @ steps)[:, None, :]))
