"""Register layouts: which thread of a warpgroup holds which element of a tile, in which register.

A register tile is one value spread over the 128 threads of a warpgroup (4 warps of 32 lanes).
Its layout says, for thread `t`, register `r` and vector lane `v`, which element of the logical
tile sits there.  The wgmma accumulator (`WGMMA`) is the layout the tensor cores impose; on a
64×16 tile (`tN.rK`: thread N, register K; each register a vector of two adjacent columns):

               cols 0-1  2-3    4-5    6-7    8-9    10-11  12-13  14-15
    row  0     t0.r0     t1.r0  t2.r0  t3.r0  t0.r2  t1.r2  t2.r2  t3.r2
    row  1     t4.r0     t5.r0  t6.r0  t7.r0  t4.r2  ...
     ...
    row  7     t28.r0    ...                                       t31.r2
    row  8     t0.r1     t1.r1  t2.r1  t3.r1  t0.r3  ...
     ...
    row 15     t28.r1    ...                                       t31.r3
    rows 16-31: warp 1 (t32-t63) alike; rows 32-47 warp 2; rows 48-63 warp 3

In PTX's numbering of the f32 accumulators, register `r`, vector lane `v` is `d[2r + v]`
(docs/hardware.md §14.3); columns 16-31 continue with r4 … r7, and so on.

The formalism is JAX Mosaic GPU's `TiledLayout`: a `Tiling` cuts the trailing dims of the tile
into nested tiles; each dim this makes is then either split over the 4 warps (`warp_dims`), split
over the 32 lanes (`lane_dims`), the per-register vector (`vector_dim`), or enumerated in each
thread's registers (every other dim, and the dims in front of the tiling).  `Replicated(n)` in the
warp or lane dims spends `n` warps or lanes on copies of the same data.  Two more kinds:
`SplatLayout` (every element equal, one register) and `StridedLayout` (the tile flattened and dealt
`vec` elements at a time to the 128 threads in turn).

Register arrays have the shape `registers_shape(shape)`: the tiled dims (warp, lane and vector dims
kept as 1s, so positions line up with the tiled shape) and then the vector length.  "Register
order" is row-major order over all but that last dim.  Layouts are frozen dataclasses compared by
value (they become parts of cache keys); a `TiledLayout` must be in canonical form, which
`TiledLayout.canonical` builds, so equal meanings compare equal.
"""

from __future__ import annotations

import functools
import math
import operator
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asyncdsl.errors import LayoutError, is_int, user_location
from asyncdsl.hw.tiling import (
    THREADS,
    WARP_LANES,
    WARPS,
    Entry,
    Replicated,
    Tiling,
    coordinates_of,
    entry_size,
    flat_index,
    int_tuple,
    mixed_radix_digits,
    reduction_axes,
    tile_shape,
)


class _Queries(ABC):
    """What every layout answers alike, from its `check_holds`, `coordinates` and `replication`."""

    @abstractmethod
    def check_holds(self, shape: Sequence[int]) -> None: ...

    @abstractmethod
    def coordinates(self, shape: Sequence[int]) -> np.ndarray: ...

    @property
    @abstractmethod
    def replication(self) -> int: ...

    def can_hold(self, shape: Sequence[int]) -> bool:
        try:
            self.check_holds(shape)
        except LayoutError:
            return False
        return True

    def holders(self, shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Per element, every (thread, slot) holding it: two int arrays of shape
        `(*shape, replication)`, threads ascending; a slot is a flat index into the register array."""
        shape = tile_shape(shape)
        per_thread = self.coordinates(shape).reshape(THREADS, -1, len(shape))
        order = np.argsort(flat_index(per_thread, shape).reshape(-1), kind="stable")  # threads ascending
        slots, copies = per_thread.shape[1], self.replication
        return (order // slots).reshape(*shape, copies), (order % slots).reshape(*shape, copies)


def _checked_parts(tiling, warp_dims, lane_dims, vector_dim):
    """Validated, normalised constructor arguments of a TiledLayout (canonical or not)."""
    if not isinstance(tiling, Tiling):
        tiling = Tiling(tiling)
    dims = tiling.dims
    entries = []
    for name, given, total in (("warp_dims", warp_dims, WARPS), ("lane_dims", lane_dims, WARP_LANES)):
        listed = tuple(e if isinstance(e, Replicated) else operator.index(e)
                       for e in ((given,) if isinstance(given, (int, Replicated)) else given))
        if any(not isinstance(e, Replicated) and not -len(dims) <= e < 0 for e in listed) or (
            math.prod(entry_size(e, dims) for e in listed) != total
        ):
            raise LayoutError(
                f"{name} {listed} must be negative dims of the tiled shape {tuple(d.size for d in dims)}"
                f" (or Replicated) whose sizes multiply to {total}"
            )
        entries.append(listed)
    vector_dim = operator.index(vector_dim)
    if not -len(dims) <= vector_dim < 0:
        raise LayoutError(f"vector_dim {vector_dim} is not a negative dim of {len(dims)} tiled dims")
    partitioned = [e for e in (*entries[0], *entries[1]) if not isinstance(e, Replicated)]
    if len(set(partitioned + [vector_dim])) != len(partitioned) + 1:
        raise LayoutError(
            f"a dim may be split over warps, over lanes or be the vector, only one of them:"
            f" warp_dims {entries[0]}, lane_dims {entries[1]}, vector_dim {vector_dim}"
        )
    return tiling, entries[0], entries[1], vector_dim


def _canonical_parts(tiling, warp_dims, lane_dims, vector_dim):
    """The canonical spelling of a TiledLayout: the same thread -> element map, written one way."""
    tiling, warp_dims, lane_dims, vector_dim = _checked_parts(tiling, warp_dims, lane_dims, vector_dim)
    old = tiling.dims
    new_tiling = tiling.canonical()
    unit_vector = old[vector_dim].size == 1
    # A vector of one element sits on the last dim, which a trailing (1,) tile provides; a longer
    # vector has no use for that tile.
    if unit_vector and new_tiling.dims[-1].size != 1:
        new_tiling = Tiling((*new_tiling.tiles, (1,)))
    elif not unit_vector and len(new_tiling.tiles) > 1 and new_tiling.tiles[-1] == (1,):
        new_tiling = Tiling(new_tiling.tiles[:-1])
    new = new_tiling.dims
    # Canonicalisation only adds or drops dims of size 1, so the others keep their order.
    moved = dict(
        zip(
            (i - len(old) for i, d in enumerate(old) if d.size > 1),
            (i - len(new) for i, d in enumerate(new) if d.size > 1),
        )
    )

    def entries(listed: tuple[Entry, ...]) -> tuple[Entry, ...]:
        result: list[Entry] = []
        for entry in listed:
            if isinstance(entry, Replicated):
                if entry.times == 1:
                    continue
                if result and isinstance(last := result[-1], Replicated):  # adjacent copies are one factor
                    result.pop()
                    entry = Replicated(last.times * entry.times)
                result.append(entry)
            elif old[entry].size > 1:
                result.append(moved[entry])
        return tuple(result)

    return new_tiling, entries(warp_dims), entries(lane_dims), -1 if unit_vector else moved[vector_dim]


@dataclass(frozen=True)
class TiledLayout(_Queries):
    """A register layout from a tiling: some tiled dims over warps, some over lanes, one vector.

    `warp_dims` and `lane_dims` list negative positions in the tiled shape (or `Replicated`),
    major to minor: the warp index (0-3) is written in the mixed radix of the warp dims' sizes,
    the lane index (0-31) in that of the lane dims.  `vector_dim` is the dim each register holds
    whole.  Every other tiled dim, and every dim in front of the tiling, is enumerated in each
    thread's registers.
    """

    tiling: Tiling
    warp_dims: tuple[Entry, ...]
    lane_dims: tuple[Entry, ...]
    vector_dim: int = -1

    def __post_init__(self) -> None:
        parts = _checked_parts(self.tiling, self.warp_dims, self.lane_dims, self.vector_dim)
        for name, value in zip(("tiling", "warp_dims", "lane_dims", "vector_dim"), parts):
            object.__setattr__(self, name, value)
        canonical = _canonical_parts(*parts)
        if canonical != parts:
            raise LayoutError(
                f"{self!r} is not in canonical form; the same layout is written"
                f" {TiledLayout(*canonical)!r} (TiledLayout.canonical builds it from either)"
            )

    @classmethod
    def canonical(cls, tiling, warp_dims, lane_dims, vector_dim=-1) -> TiledLayout:
        """The layout these arguments describe, rewritten in canonical form."""
        return cls(*_canonical_parts(tiling, warp_dims, lane_dims, vector_dim))

    def __str__(self) -> str:
        return _NAME_OF.get(self) or repr(self)

    @property
    def vector_length(self) -> int:
        """Elements per register (per vector)."""
        return self.tiling.dims[self.vector_dim].size

    @property
    def warp_sizes(self) -> tuple[int, ...]:
        """The sizes of the warp dims: the warp index (0-3) in this mixed radix, major first."""
        return tuple(entry_size(e, self.tiling.dims) for e in self.warp_dims)

    @property
    def lane_sizes(self) -> tuple[int, ...]:
        """The sizes of the lane dims: the lane index (0-31) in this mixed radix, major first."""
        return tuple(entry_size(e, self.tiling.dims) for e in self.lane_dims)

    @property
    def replication(self) -> int:
        """How many threads hold each element."""
        return math.prod(e.times for e in (*self.warp_dims, *self.lane_dims) if isinstance(e, Replicated))

    def check_holds(self, shape: Sequence[int]) -> None:
        """Raise a LayoutError unless a tile of `shape` can be laid out this way."""
        shape = tile_shape(shape)
        base = self.tiling.tiles[0]
        if len(shape) < len(base) or any(s % b for s, b in zip(shape[len(shape) - len(base) :], base)):
            raise LayoutError(
                f"layout {self} cannot hold a tile of shape {shape}: its base tile {base} must"
                f" divide the tile's last {len(base)} dim(s)"
            )

    def registers_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """Each thread's register array for a tile of `shape`: tiled dims, then the vector."""
        self.check_holds(shape)
        shape = tuple(shape)
        base = self.tiling.tiles[0]
        lead = len(shape) - len(base)
        counts = tuple(s // b for s, b in zip(shape[lead:], base))
        dims = self.tiling.dims
        spread = {e % len(dims) for e in (*self.warp_dims, *self.lane_dims, self.vector_dim)
                  if not isinstance(e, Replicated)}
        inner = tuple(1 if i in spread else d.size for i, d in enumerate(dims))
        return (*shape[:lead], *counts, *inner, self.vector_length)

    def coordinates(self, shape: Sequence[int]) -> np.ndarray:
        """The element each thread holds in each register slot: an int array of shape
        `(128, *registers_shape(shape), rank)`; `[t, *r, v]` is thread t's register r, lane v.
        Read-only (it is cached)."""
        return _tiled_coordinates(self, tile_shape(shape))

    def replica_threads(self) -> np.ndarray:
        """`[t]`: the threads whose registers equal thread t's (t among them), ascending: (128,
        replication)."""
        thread = np.arange(THREADS)
        primary = thread.copy()  # the copy whose replicated digits are all 0
        for entries, sizes, index, unit in (
                (self.warp_dims, self.warp_sizes, thread // WARP_LANES, WARP_LANES),
                (self.lane_dims, self.lane_sizes, thread % WARP_LANES, 1)):
            places = [unit * math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
            for entry, digit, place in zip(entries, mixed_radix_digits(index, sizes), places):
                if isinstance(entry, Replicated):
                    primary -= digit * place
        groups, group_of = np.unique(primary, return_inverse=True)
        members = np.lexsort((thread, primary)).reshape(len(groups), -1)
        return members[group_of]

    def reduce(self, shape: Sequence[int], axes: int | Sequence[int]) -> Layout:
        """The layout of the tile left by reducing a `shape` tile over `axes`: each thread keeps
        the results for the elements it held, so the lanes and warps that shared a reduced dim
        end up holding copies.  Reducing every axis leaves a splat."""
        self.check_holds(shape)
        axes = reduction_axes(axes, len(shape))
        lead = len(shape) - self.tiling.rank
        if len(axes) == len(shape):
            return SplatLayout()
        tiled_axes = [a - lead for a in axes if a >= lead]
        if len(tiled_axes) == self.tiling.rank:
            # Only dims in front of the tiling are left, enumerated in every thread's registers
            # in register order; the lanes and warps all reduced together, so all hold copies.
            return replicated_layout(tuple(s for a, s in enumerate(shape) if a not in axes))
        layout = self
        for axis in reversed(tiled_axes):
            layout = layout._without_axis(axis)
        return layout

    def _without_axis(self, axis: int) -> TiledLayout:
        """This layout for tiles that lack tiled axis `axis`: its dims become copies."""
        rank, tiles = self.tiling.rank, []
        for tile in self.tiling.tiles:
            position = axis - (rank - len(tile))  # a tile covers the last len(tile) axes
            if position >= 0:
                tile = tile[:position] + tile[position + 1 :]
                if not tile:
                    break  # every later tile only subdivides the removed axis
            tiles.append(tile)
        dims = self.tiling.dims
        # If the vector loses its dim it becomes one element, on a dim of size 1 made for it.
        lost_vector = dims[self.vector_dim].axis == axis
        if lost_vector:
            tiles.append((1,))
        kept = [i - len(dims) for i, d in enumerate(dims) if d.axis != axis]
        moved = {old: new - len(kept) - lost_vector for new, old in enumerate(kept)}

        def entries(listed: tuple[Entry, ...]) -> tuple[Entry, ...]:
            return tuple(e if isinstance(e, Replicated) else moved.get(e, Replicated(dims[e].size))
                         for e in listed)

        vector_dim = -1 if lost_vector else moved[self.vector_dim]
        return TiledLayout.canonical(tiles, entries(self.warp_dims), entries(self.lane_dims), vector_dim)

    def _with_unit_axes(self, shape: tuple[int, ...], dims: tuple[int, ...]) -> TiledLayout:
        """This layout for the `shape` tile that puts this one's axis i at `dims[i]`, the other
        axes of size 1: those among the tiled axes (or after them) join every tile with size 1,
        and the warps, lanes and vector keep the dims they had."""
        rank, source_rank = self.tiling.rank, len(dims)
        start = dims[source_rank - rank]  # where the tiled axes begin in `shape`
        tiles = []
        for tile in self.tiling.tiles:
            sizes = dict(zip(dims[source_rank - len(tile):], tile))
            first = dims[source_rank - len(tile)]
            tiles.append(tuple(sizes.get(axis, 1) for axis in range(first, len(shape))))
        tiling = Tiling(tuple(tiles))
        # Each old dim, found in the new tiling by its (axis, size, stride), in order.
        new_axis = {dims[source_rank - rank + a] - start: a for a in range(rank)}
        wanted = [(axis, size, stride) for axis, size, stride in self.tiling.dims]
        found = [(new_axis.get(axis), size, stride) for axis, size, stride in tiling.dims]
        places, taken = [], set()
        for key in wanted:
            place = next((i for i, k in enumerate(found) if k == key and i not in taken), None)
            if place is None:
                raise LayoutError(f"layout {self} has no dim {key} once size-1 axes join its tiles")
            taken.add(place)
            places.append(place)
        old, new = len(self.tiling.dims), len(tiling.dims)

        def moved(entry: Entry) -> Entry:
            return entry if isinstance(entry, Replicated) else places[entry + old] - new

        warps, lanes = tuple(map(moved, self.warp_dims)), tuple(map(moved, self.lane_dims))
        return TiledLayout.canonical(tiling, warps, lanes, moved(self.vector_dim))

    def broadcast_in_dim(self, shape: Sequence[int], dims: Sequence[int],
                         like: Layout | None = None) -> Layout:
        """The layout of this tile broadcast to `shape` (its axis i becoming axis `dims[i]`) with
        no data movement: one whose reduction over the new axes is this layout.  Tried: `like`
        if given, else the named layouts, then this layout itself (for new leading dims)."""
        shape, dims = tile_shape(shape), int_tuple(dims, "broadcast dims")
        new_axes = [a for a in range(len(shape)) if a not in dims]
        if list(dims) != sorted(set(dims)) or len(new_axes) + len(dims) != len(shape):
            raise LayoutError(f"broadcast dims {dims} must be increasing axes of the {shape} result")
        self.check_holds(tuple(shape[d] for d in dims))
        # The named layouts come first: a layout can also take new leading dims itself, but for
        # a row or column that would give every thread a register per row (or column).
        candidates = [like] if like is not None else [*NAMED_LAYOUTS.values(), self]
        if like is None and all(shape[a] == 1 for a in new_axes):
            # New size-1 axes inside the tiled dims (a column's trailing 1): this tiling with
            # those axes put in, cut by 1, so every element stays in its thread and register.
            try:
                candidates.append(self._with_unit_axes(shape, dims))
            except LayoutError:
                pass
        for candidate in candidates:
            try:
                if candidate.reduce(shape, new_axes) == self:
                    return candidate
            except LayoutError:
                continue  # it cannot hold the result, or leaves untiled dims when reduced
        wanted = f"layout {like}" if like is not None else "a layout"
        raise LayoutError(
            f"{wanted} for the {shape} broadcast of a tile in layout {self} would move data:"
            f" reducing it over axes {tuple(new_axes)} must give {self}"
        )


def replicated_layout(shape: Sequence[int]) -> TiledLayout:
    """Every thread holds every element, one a register, in row-major order: a tile too small to
    share out (one GMEM element, a few scalars), or what a reduction over every tiled dim leaves."""
    tiling = Tiling((tuple(1 for _ in tile_shape(shape)),))
    return TiledLayout.canonical(tiling, (Replicated(WARPS),), (Replicated(WARP_LANES),), -1)


@functools.lru_cache(maxsize=256)
def _tiled_coordinates(layout: TiledLayout, shape: tuple[int, ...]) -> np.ndarray:
    registers = layout.registers_shape(shape)
    dims, base = layout.tiling.dims, layout.tiling.tiles[0]
    rank = len(registers) + 1  # (thread, *register dims, vector lane)

    def along(values: np.ndarray, axis: int) -> np.ndarray:
        return values.reshape([-1 if a == axis else 1 for a in range(rank)])

    index = [along(np.arange(size), 1 + p) for p, size in enumerate(registers[:-1])]
    first = len(registers) - 1 - len(dims)  # where the tiling's dims start among the register dims
    thread = along(np.arange(THREADS), 0)
    for entries, sizes, number in ((layout.warp_dims, layout.warp_sizes, thread // WARP_LANES),
                                   (layout.lane_dims, layout.lane_sizes, thread % WARP_LANES)):
        for entry, digit in zip(entries, mixed_radix_digits(number, sizes)):
            if not isinstance(entry, Replicated):
                index[first + len(dims) + entry] = index[first + len(dims) + entry] + digit
    vector = first + len(dims) + layout.vector_dim
    index[vector] = index[vector] + along(np.arange(layout.vector_length), rank - 1)
    lead = len(shape) - len(base)
    coordinates = index[:lead]
    for axis, size in enumerate(base):
        coordinate = index[lead + axis] * size
        for p, d in enumerate(dims):
            if d.axis == axis:
                coordinate = coordinate + index[first + p] * d.stride
        coordinates.append(coordinate)
    full = (THREADS, *registers)
    result = np.stack([np.broadcast_to(c, full) for c in coordinates], axis=-1)
    result.flags.writeable = False
    return result


@dataclass(frozen=True)
class SplatLayout(_Queries):
    """Every element of the tile is the same value; each thread keeps it in one register.

    Any shape fits, and a splat broadcasts to any layout for free.  It has no per-element map:
    each thread's one register stands for every element."""

    vector_length = 1
    replication = THREADS

    def __str__(self) -> str:
        return "splat"

    def check_holds(self, shape: Sequence[int]) -> None:
        tile_shape(shape)

    def registers_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        self.check_holds(shape)
        return (1,)

    def coordinates(self, shape: Sequence[int]) -> np.ndarray:
        raise LayoutError("a splat tile holds one value for all its elements; it has no per-element map")

    def holders(self, shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        shape = tile_shape(shape)
        threads = np.broadcast_to(np.arange(THREADS), (*shape, THREADS))
        return threads, np.zeros_like(threads)

    def replica_threads(self) -> np.ndarray:
        return np.broadcast_to(np.arange(THREADS), (THREADS, THREADS))

    def reduce(self, shape: Sequence[int], axes: int | Sequence[int]) -> Layout:
        reduction_axes(axes, len(tile_shape(shape)))
        return self

    def broadcast_in_dim(self, shape: Sequence[int], dims: Sequence[int],
                         like: Layout | None = None) -> Layout:
        result = self if like is None else like
        result.check_holds(shape)
        return result


@dataclass(frozen=True)
class StridedLayout(_Queries):
    """The tile flattened (row-major) and dealt out `vec` elements at a time, thread 0 to 127 in
    turn: thread t's register r holds flat elements `(128 r + t) vec … (128 r + t) vec + vec - 1`.
    The layout of plain elementwise kernels: each register is one vector load or store."""

    vec: int

    def __post_init__(self) -> None:
        if not is_int(self.vec) or self.vec < 1:
            raise LayoutError(f"a strided layout needs a positive int vector length, got {self.vec!r}",
                              user_location())

    def __str__(self) -> str:
        return f"strided({self.vec})"

    @property
    def vector_length(self) -> int:
        return self.vec

    replication = 1

    def check_holds(self, shape: Sequence[int]) -> None:
        size = math.prod(tile_shape(shape))
        if size % (THREADS * self.vec):
            raise LayoutError(
                f"layout {self} cannot hold a tile of shape {tuple(shape)}: its {size} elements are"
                f" not a multiple of {THREADS * self.vec} (128 threads × {self.vec})"
            )

    def registers_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        self.check_holds(shape)
        return (math.prod(shape) // (THREADS * self.vec), self.vec)

    def coordinates(self, shape: Sequence[int]) -> np.ndarray:
        registers, vec = self.registers_shape(shape)
        flat = (np.arange(registers)[None, :, None] * THREADS + np.arange(THREADS)[:, None, None]) * vec
        return coordinates_of(flat + np.arange(vec)[None, None, :], tuple(shape))

    def replica_threads(self) -> np.ndarray:
        return np.arange(THREADS)[:, None]

    def as_tiled(self) -> TiledLayout:
        """The same map as a TiledLayout of the flattened tile (what its reductions follow)."""
        vec = self.vec
        return TiledLayout.canonical(Tiling(((THREADS * vec,), (WARP_LANES * vec,), (vec,))),
                                     (-3,), (-2,), -1)

    def reduce(self, shape: Sequence[int], axes: int | Sequence[int]) -> Layout:
        self.check_holds(shape)
        reduced = reduction_axes(axes, len(shape))
        # Dropping unit axes leaves the flattened tile as it was, so the layout too.
        if all(shape[axis] == 1 for axis in reduced):
            return self
        # Every axis longer than 1 at once (what stays are unit axes: the flattened tile is the same).
        if any(extent > 1 for axis, extent in enumerate(shape) if axis not in reduced):
            raise LayoutError(
                f"a tile in layout {self} reduces over all its axes longer than 1 at once (to a splat), not"
                f" over {axes}; relayout it first"
            )
        return SplatLayout()

    def broadcast_in_dim(self, shape: Sequence[int], dims: Sequence[int],
                         like: Layout | None = None) -> Layout:
        # New leading dims repeat the flattened tile, so every thread repeats its own registers;
        # new dims of size 1 anywhere leave the flattened tile as it was.
        shape, dims = tile_shape(shape), int_tuple(dims, "broadcast dims")
        leading = dims == tuple(range(len(shape) - len(dims), len(shape)))
        units = list(dims) == sorted(set(dims)) and all(
            shape[a] == 1 for a in range(len(shape)) if a not in dims)
        if not (leading or units) or like not in (None, self):
            raise LayoutError(
                f"a tile in layout {self} broadcasts without data movement only to new leading"
                f" dims or new dims of size 1, and in the same layout, not to {shape} along {dims} in {like}"
            )
        self.check_holds(tuple(shape[d] for d in dims))
        return self


Layout = TiledLayout | SplatLayout | StridedLayout


def strided(vec: int) -> StridedLayout:
    """The strided layout with `vec` elements per register."""
    return StridedLayout(vec)


# The named layouts, JAX Mosaic GPU's (docs/hardware.md §14.3).  The wgmma accumulator: 64-row strips, one per
# warp of 16 rows; each warp's 8x8 blocks spread over its lanes 4 to a row, two columns a lane.
WGMMA = TiledLayout(Tiling(((64, 8), (16, 8), (8, 8), (2,))), warp_dims=(-7,), lane_dims=(-3, -2),
                    vector_dim=-1)
# WGMMA reduced over columns: one value per row, copied in the 4 lanes that shared the row.
WGMMA_ROW = TiledLayout(Tiling(((64,), (16,), (8,), (1,))), warp_dims=(-4,), lane_dims=(-2, Replicated(4)))
# WGMMA reduced over rows: column pairs per lane, copied in every warp and in the 8 lanes of a column.
WGMMA_COL = TiledLayout(Tiling(((8,), (2,))), warp_dims=(Replicated(4),), lane_dims=(Replicated(8), -2))
# WGMMA with each 2x2 block transposed: a register holds two rows of one column.  Lanes l and
# l ^ 4 share the same 2x2 blocks in both layouts (a shuffle could convert; `to_layout` goes
# through shared memory, as every relayout does).
WGMMA_TRANSPOSED = TiledLayout(
    Tiling(((64, 8), (16, 8), (8, 8), (2, 2), (2, 1))), warp_dims=(-10,),
    lane_dims=(-6, -3, -5), vector_dim=-2
)
NAMED_LAYOUTS: dict[str, TiledLayout] = {
    "wgmma": WGMMA,
    "wgmma_row": WGMMA_ROW,
    "wgmma_col": WGMMA_COL,
    "wgmma_transposed": WGMMA_TRANSPOSED,
}
_NAME_OF = {layout: name for name, layout in NAMED_LAYOUTS.items()}


def register_window(layout: Layout, shape: Sequence[int], offsets: Sequence[int],
                    window: Sequence[int]) -> tuple:
    """The index (slices) of a `shape` tile's register array that holds the tile's `window`
    (shape) at `offsets`, itself a tile in `layout`: the window must be made of whole base tiles
    of a tiled layout, whose register arrays enumerate base tiles in their leading dims."""
    if not isinstance(layout, TiledLayout):
        raise LayoutError(f"a window of registers needs a tiled layout, not {layout}")
    shape, offsets, window = tuple(shape), tuple(offsets), tuple(window)
    base = layout.tiling.tiles[0]
    lead = len(shape) - len(base)
    for dim, tile in zip(range(lead, len(shape)), base):
        if offsets[dim] % tile or window[dim] % tile:
            raise LayoutError(
                f"the window at {offsets} of shape {window} cuts the {base} tiles of layout {layout} "
                f"along dim {dim}: offsets and sizes there must be multiples of {tile}"
            )
    inner = len(layout.registers_shape(shape)) - len(shape)
    return (
        *(slice(o, o + w) for o, w in zip(offsets[:lead], window[:lead])),
        *(slice(o // t, (o + w) // t) for o, w, t in zip(offsets[lead:], window[lead:], base)),
        *(slice(None),) * inner,
    )
