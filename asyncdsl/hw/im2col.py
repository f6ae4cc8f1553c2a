"""The im2col mode of the TMA copy engine: the bit budget of its offsets and corners.

An im2col load of a rank-`r` image batch (N, spatial dims..., C) takes one 16-bit field that the
hardware shares among the `r - 2` spatial dims: each spatial dim's filter offset (unsigned) and
bounding-box corner (signed) get `16 // (r - 2)` bits (docs/hardware.md §10.1–§10.2).  The walk of
window starts itself is the interpreter's (`asyncdsl.interpret.im2col`).
"""

from __future__ import annotations


def offset_bits(rank: int) -> int:
    """Bits each spatial dim gets of the 16 the hardware shares among them: the width of an
    im2col offset (unsigned) and of a bounding-box corner (signed)."""
    return 16 // (rank - 2)


def corner_range(rank: int) -> tuple[int, int]:
    """The inclusive range of a bounding-box corner of a rank-`rank` image batch."""
    half = 1 << (offset_bits(rank) - 1)
    return -half, half - 1


def offset_range(rank: int) -> tuple[int, int]:
    """The inclusive range of an im2col offset (filter tap) of a rank-`rank` image batch."""
    return 0, (1 << offset_bits(rank)) - 1
