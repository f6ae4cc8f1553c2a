"""Stream-K: the tile scheduler for shapes a static schedule quantises badly.  When the tiles do
not make whole waves of CTAs, the last wave (plus one full wave) is not cut into tiles but into
`units` equal runs of K iterations over those tiles, one a CTA, so every CTA gets the same work;
the tiles before run data-parallel, one a CTA a wave.  A run may start or end inside a tile:
the CTAs sharing a tile add their sums through a float32 workspace, in the order of their runs.

    from asyncdsl.blocks.stream_k import StreamKPlan

    plan = StreamKPlan.make(tiles=150, k_iters=64, ctas=132)     # host side, plain ints
    (plan.dp_tiles, plan.sk_tiles, plan.units)                   # (0, 150, 132)
    plan.run(0)                                                  # (0, 73): unit 0's K iterations
    plan.unit_of(73)                                             # 1: the unit iteration 73 is in

In a kernel `StreamKTiles` walks the same plan with traced arithmetic: `segments()` the
(tile, K range) pieces of this CTA's run, then `data_parallel()` its whole tiles.  The unit
whose run reaches a tile's last iteration finishes it: it waits until the others added their
iteration counts on the tile's flag (`flags`, int32 zeros, one per tile part), adds their sums
(`workspace`, one float32 tile part a unit) to its own and stores; the others store their sum
into their slot and count themselves in.  Every unit runs in the first wave (one a CTA, all
resident), so each waits only for units already running.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from asyncdsl.frontend import language as ad

MIN_ITERS = 8  # the fewest K iterations of a tile a unit may take: fewer cost more in fix-up than they save


@dataclass(frozen=True)
class StreamKPlan:
    """How `tiles` tiles of `k_iters` K iterations each split over `ctas` CTAs: the first
    `dp_tiles` data-parallel, the other `sk_tiles` as `units` runs of `per` iterations (the first
    `extra` units one more)."""

    tiles: int
    k_iters: int
    ctas: int
    dp_tiles: int
    sk_tiles: int
    units: int
    per: int
    extra: int

    @classmethod
    def make(cls, tiles: int, k_iters: int, ctas: int) -> StreamKPlan:
        """Whole waves, or tiles too short to share: all data-parallel; else the tail wave and
        one full wave before it as stream-K units, as many as leave each at least MIN_ITERS."""
        full = tiles // ctas
        if tiles % ctas == 0 or k_iters < 2 * MIN_ITERS:
            return cls(tiles, k_iters, ctas, tiles, 0, 0, 0, 0)
        dp_tiles = max(full - 1, 0) * ctas
        sk_tiles = tiles - dp_tiles
        units = min(ctas, sk_tiles * k_iters // MIN_ITERS)
        per, extra = divmod(sk_tiles * k_iters, units)
        return cls(tiles, k_iters, ctas, dp_tiles, sk_tiles, units, per, extra)

    def run(self, unit: int) -> tuple[int, int]:
        """Unit `unit`'s K iterations [begin, end), counted over the stream-K tiles in order."""
        begin = unit * self.per + min(unit, self.extra)
        return begin, begin + self.per + (unit < self.extra)

    def unit_of(self, iteration):
        """The unit whose run holds `iteration` (an int, or a traced index in a kernel)."""
        long_runs = self.extra * (self.per + 1)
        first = iteration // (self.per + 1)
        rest = iteration - long_runs
        if isinstance(iteration, int):
            return min(first, self.extra) + max(rest, 0) // self.per
        return first.min(self.extra) + rest.max(0) // self.per

    def workspace_shape(self, bm: int, bn: int) -> tuple[int, int, int]:
        """The float32 workspace: one (bm, bn) tile a unit (at least one, for no units)."""
        return max(self.units, 1), bm, bn


class Segment(NamedTuple):
    """A piece of a unit's run inside one tile: the tile, its K iterations [k_begin, k_end) and
    the ring step of its first iteration."""

    tile: object
    k_begin: object
    k_end: object
    first_step: object


class StreamKTiles:
    """This CTA's part of a `StreamKPlan` in a kernel: its stream-K run (empty for CTAs past the
    units) cut at tile boundaries, then its data-parallel tiles.  Ring steps count on from the
    run's length, so every role of the CTA numbers its slots alike."""

    def __init__(self, plan: StreamKPlan):
        self.plan = plan
        cta, total = ad.program_id(0), plan.sk_tiles * plan.k_iters
        self.cta = cta
        self.begin = (cta * plan.per + cta.min(plan.extra)).min(total)
        self.end = ((cta + 1) * plan.per + (cta + 1).min(plan.extra)).min(total)
        self.run_length = self.end - self.begin

    def segments(self):
        """The pieces of this CTA's run, tile by tile (a traced loop; none past the units)."""
        k = self.plan.k_iters
        if not self.plan.units:  # all data-parallel
            return
        with ad.when(self.begin < self.end):
            for sk_tile in ad.range(self.begin // k, (self.end - 1) // k + 1):
                k_begin = self.begin.max(sk_tile * k) - sk_tile * k
                k_end = self.end.min(sk_tile * k + k) - sk_tile * k
                first_step = sk_tile * k + k_begin - self.begin
                yield Segment(self.plan.dp_tiles + sk_tile, k_begin, k_end, first_step)

    def first_contributor(self, segment):
        """The first unit whose run holds part of `segment`'s tile."""
        return self.plan.unit_of((segment.tile - self.plan.dp_tiles) * self.plan.k_iters)

    def data_parallel(self):
        """This CTA's whole tiles, one a wave: (tile, the ring step of its first iteration)."""
        ctas = self.plan.ctas
        for j in ad.range((self.plan.dp_tiles - self.cta + ctas - 1) // ctas):
            yield self.cta + j * self.plan.ctas, self.run_length + j * self.plan.k_iters
