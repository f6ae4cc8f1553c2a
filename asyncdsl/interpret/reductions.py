"""TMA reductions on a GMEM argument's bytes: read the box, combine, write back.

The copy engine does a read-modify-write of each in-bounds element of the box; elements past the
high end are skipped like those of a store, and negative coordinates fault like a store's.  The
arithmetic is `asyncdsl.tma_reductions.combine`, typed by the descriptor's tensor-map type (which
is where the hardware takes signedness and width from).
"""

from __future__ import annotations

import numpy as np

from asyncdsl import tma_reductions
from asyncdsl.interpret import copies
from asyncdsl.kernel_binary import TiledTensorMapSpec


def reduce_gmem_box(
    raw: np.ndarray, spec: TiledTensorMapSpec, coords, box: np.ndarray, op: str, argument: str
) -> None:
    """Combine `box` (bytes, as `copies.read_smem_box` returns) into the box at `coords` of the
    descriptor's view of `raw` with reduction `op`."""
    current = copies.read_gmem_box(raw, spec, coords, argument)  # zeros where out of bounds
    combined = tma_reductions.combine(op, spec.dtype_code, current, box)
    result = np.ascontiguousarray(combined).view(np.uint8).reshape(box.shape)
    copies.write_gmem_box(raw, spec, coords, result, argument)  # clipped; faults below zero
