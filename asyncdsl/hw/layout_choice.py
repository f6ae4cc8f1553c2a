"""The register layouts the compiler picks when the user gave none (`infer-layouts`), and what
stores of a splat tile use: each a layout whose loads and stores are wide and conflict-free."""

from __future__ import annotations

import math

from asyncdsl.hw.fragments import StridedLayout, TiledLayout
from asyncdsl.hw.tiling import THREADS, WARP_LANES, WARPS, Tiling

VECTOR_BYTES = 16  # the widest ld/st.shared and ld/st.global


def row_layout(shape: tuple[int, ...], element_bytes: float) -> TiledLayout | None:
    """Warps over rows, a warp's lanes over one row in vectors of up to 16 bytes: reducing
    over the last axis is five lane shuffles and no shared memory, and a warp's load of a row
    is 32 adjacent vectors.  None if it cannot hold `shape`."""
    if len(shape) < 2:
        return None
    rows, columns = shape[-2:]
    vector = max(1, int(VECTOR_BYTES // element_bytes))
    while vector > 1 and columns % (WARP_LANES * vector):
        vector //= 2
    if rows % WARPS or columns % (WARP_LANES * vector):
        return None
    return TiledLayout.canonical(Tiling(((WARPS, WARP_LANES * vector), (1, vector))), (-4,), (-3,), -1)


def strided_layout(shape: tuple[int, ...], element_bytes: float) -> StridedLayout | None:
    """The strided layout with the widest vector (up to 16 bytes) that holds `shape`."""
    size = math.prod(shape)
    vector = max(1, int(VECTOR_BYTES // element_bytes))
    while vector >= 1:
        if size % (THREADS * vector) == 0:
            return StridedLayout(vector)
        vector //= 2
    return None
