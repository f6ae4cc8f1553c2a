"""Tilings: nested tiles on the trailing dims of a tile, the first step of a register layout.

A `Tiling` cuts the trailing dims of a tile into nested tiles (JAX Mosaic GPU's formalism); a
`TiledLayout` (`hw/fragments.py`) then says which of the dims it makes go to warps, lanes, the
per-register vector, or each thread's registers.  Also here: the warpgroup's thread counts and the
index arithmetic both need.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from asyncdsl.errors import LayoutError

WARPS = 4
WARP_LANES = 32
THREADS = WARPS * WARP_LANES


def int_tuple(values: Any, what: str) -> tuple[int, ...]:
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise LayoutError(f"{what} must be a sequence of integers, got {values!r}") from None


def tile_shape(shape: object) -> tuple[int, ...]:
    result = int_tuple(shape, "a tile shape")
    if any(s < 1 for s in result):
        raise LayoutError(f"tile dims must be positive, got {result}")
    return result


def reduction_axes(axes: int | Sequence[int], rank: int) -> tuple[int, ...]:
    """`axes` (an int or ints, negative counting from the end) as sorted non-negative axes."""
    listed = (axes,) if isinstance(axes, int) else int_tuple(axes, "reduction axes")
    result = sorted({a + rank if a < 0 else a for a in listed})
    if len(result) != len(listed) or any(not 0 <= a < rank for a in result):
        raise LayoutError(f"axes {tuple(listed)} are not distinct axes of a rank-{rank} tile")
    return tuple(result)


def mixed_radix_digits(number: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """`number` written in the mixed radix `sizes`, most significant digit first."""
    place = math.prod(sizes)
    digits = []
    for size in sizes:
        place //= size
        digits.append(number // place % size)
    return digits


# Row-major flat indices by plain arithmetic: numpy 2.4's ravel_multi_index and unravel_index
# give wrong answers past 8192 elements for index arrays whose last dim has size 1.
def flat_index(coordinates: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """The row-major flat index of each coordinate (last axis) in a tile of `shape`."""
    strides = [math.prod(shape[a + 1 :]) for a in range(len(shape))]
    return coordinates @ np.array(strides, dtype=np.int64)


def coordinates_of(flat: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """The coordinates (a new last axis) of row-major flat indices in a tile of `shape`."""
    return np.stack(mixed_radix_digits(flat, shape), axis=-1)



@dataclass(frozen=True)
class Replicated:
    """A warp or lane dim that spends `times` warps or lanes on copies of the same registers."""

    times: int

    def __post_init__(self) -> None:
        if not isinstance(self.times, int) or self.times < 1:
            raise LayoutError(f"Replicated needs a positive integer, got {self.times!r}")

    def __repr__(self) -> str:
        return f"Replicated({self.times})"


class TiledDim(NamedTuple):
    """One dim a tiling makes inside its base tile: it walks `axis` (of the tiled trailing dims,
    0 first) in `size` steps of `stride` elements."""

    axis: int
    size: int
    stride: int


@dataclass(frozen=True)
class Tiling:
    """Nested tiles applied to the trailing dims of a tile, each within the tile before it.

    A tile `(t1, t2)` turns trailing dims `(s1, s2)` into `(s1 // t1, s2 // t2, t1, t2)`: which
    tile, then where in it.  The next tile applies to the trailing dims of that result, so it
    subdivides the tile just made and never has more dims than it.  The first tile is the base
    tile: a shape can be tiled when the base tile divides its trailing dims.
    """

    tiles: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        try:
            tiles = tuple(int_tuple(tile, "a tile") for tile in self.tiles)
        except TypeError:
            raise LayoutError(f"a tiling is a sequence of tiles, got {self.tiles!r}") from None
        object.__setattr__(self, "tiles", tiles)
        if not tiles or not all(tiles) or any(t < 1 for tile in tiles for t in tile):
            raise LayoutError(f"a tiling needs one or more tiles of positive sizes, got {tiles}")
        for outer, inner in itertools.pairwise(tiles):
            if len(inner) > len(outer):
                raise LayoutError(f"tile {inner} has more dims than the tile {outer} it subdivides")
        self.dims  # noqa: B018 -- checks that every tile divides the one before it

    def __repr__(self) -> str:
        return f"Tiling({self.tiles!r})"

    @property
    def rank(self) -> int:
        """How many trailing dims of a tile the tiling cuts."""
        return len(self.tiles[0])

    @functools.cached_property
    def dims(self) -> tuple[TiledDim, ...]:
        """The dims the tiles make inside one base tile, major to minor."""
        dims = [TiledDim(axis, size, 1) for axis, size in enumerate(self.tiles[0])]
        for tile in self.tiles[1:]:
            cut = dims[len(dims) - len(tile) :]
            if any(d.size % t for d, t in zip(cut, tile)):
                raise LayoutError(
                    f"tile {tile} does not divide the {tuple(d.size for d in cut)} tile it subdivides"
                )
            dims[len(dims) - len(tile) :] = [
                *(TiledDim(d.axis, d.size // t, d.stride * t) for d, t in zip(cut, tile)),
                *(TiledDim(d.axis, t, d.stride) for d, t in zip(cut, tile)),
            ]
        return tuple(dims)

    def canonical(self) -> Tiling:
        """The same cuts without tiles, or leading tile dims, that split nothing."""
        kept = [self.tiles[0]]
        for tile in self.tiles[1:]:
            # A leading 1 leaves its dim whole and in place; a tile equal to the end of the
            # previous one only adds dims of size 1.
            first = next((i for i, t in enumerate(tile) if t != 1), len(tile) - 1)
            tile = tile[first:]
            if kept[-1][len(kept[-1]) - len(tile) :] != tile:
                kept.append(tile)
        return Tiling(tuple(kept))


Entry = int | Replicated


def entry_size(entry: Entry, dims: Sequence[TiledDim]) -> int:
    return entry.times if isinstance(entry, Replicated) else dims[entry].size
