"""The tile scheduler of persistent GEMMs: CTAS CTAs (or clusters) walk the units of work with a
stride, each unit a tile of c (in `tile_order`'s snake) or, with split K, one share of a tile's
K.  Every role of a CTA walks the same units by the same arithmetic, so the producer and the
consumers agree on which slices go through the ring without passing anything.

    import asyncdsl as ad
    from asyncdsl.blocks.persistent_tiles import PersistentTiles

    @ad.kernel(grid=lambda c, CTAS: (CTAS,))
    def numbered(c, CTAS: ad.constexpr):       # writes each 64 x 64 tile's CTA into it
        tiles = PersistentTiles(*c.shape, 64, 64, CTAS, snake=2)
        for work in tiles:                      # this CTA's units: program_id, + CTAS, ...
            value = ad.zeros((64, 64), ad.float32) + ad.program_id(0)
            ad.store(c.at[ad.ds(work.row, 64), ad.ds(work.col, 64)], value)

Host side: `PersistentTiles.grid(CTAS)` is the launch grid and `units(...)` the number of units
there are to take; split K adding in order needs `split_k_flags` of workspace
(`asyncdsl.blocks.split_k_sum`).
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncdsl.blocks.tile_order import tile_position
from asyncdsl.frontend import language as ad


@dataclass(frozen=True)
class Work:
    """One unit of work: the CTA's `index`-th, the first row and column of its tile, the share of
    K it takes (`split`, 0 without split K), which copy of the tile grid it is in (`group`) and,
    where groups of rows may end inside a tile, the row past its group's (`end`)."""

    index: object
    row: object
    col: object
    split: object = 0
    group: object = 0
    end: object = None


class PersistentTiles:
    """The units of the (M, N) product in (BM, BN) tiles that this CTA takes (`count` of them),
    CTAS CTAs walking them with a stride.  `split_k` units a tile; `groups` copies of the tile
    grid one after the other (unit u is in copy u // (tiles · split_k), or (first_group + that) %
    groups); in clusters of two along x the CTAs
    of a pair take tiles one above the other (sharing the slices of b) or, with `share` "a", side
    by side."""

    def __init__(self, M: int, N: int, BM: int, BN: int, CTAS: int, snake: int = 16, split_k: int = 1,
                 share: str = "b", groups: int = 1, first_group=None):
        self.BM, self.BN, self.snake, self.split_k, self.groups = BM, BN, snake, split_k, groups
        self.first_group = first_group
        self.pair = pair = ad.cluster_shape()[0]
        self.share_a = pair > 1 and share == "a"
        self.m_tiles, self.n_tiles = ((ad.cdiv(M, BM), ad.cdiv(N, BN * pair)) if self.share_a
                                      else (ad.cdiv(M, BM * pair), ad.cdiv(N, BN)))
        units = self.units(groups * self.m_tiles * self.n_tiles, split_k)
        self.clusters: int
        self.cluster, self.clusters = ((ad.program_id(0), CTAS) if pair == 1
                                       else (ad.cluster_id(0), CTAS // pair))
        self.count = (units - self.cluster + self.clusters - 1) // self.clusters

    @staticmethod
    def grid(CTAS: int) -> tuple[int]:
        """The launch grid: one CTA a slot of the persistent walk."""
        return (CTAS,)

    @staticmethod
    def units(tiles: int, split_k: int = 1) -> int:
        """How many units `tiles` tiles make with `split_k` of them a tile."""
        return tiles * split_k

    def __iter__(self):
        """This CTA's units in order, as a traced loop."""
        for t in ad.range(self.count):
            yield self.work(t)

    def taken_in_turn(self, me, consumers: int = 2):
        """The units that consumer `me` of `consumers` owns when they take the CTA's units in
        turn (ping-pong): units me, me + consumers, ...; the first takes the extra unit."""
        for i in ad.range((self.count - me + (consumers - 1)) // consumers):
            yield self.work(consumers * i + me)

    def work(self, t) -> Work:
        """The CTA's t-th unit."""
        unit = self.cluster + t * self.clusters
        group = 0
        if self.groups > 1:  # a copy of the grid holds split_k units a tile
            per_copy = self.m_tiles * self.n_tiles * self.split_k
            group, unit = unit // per_copy, unit % per_copy
        tile, split = (unit, 0) if self.split_k == 1 else (unit // self.split_k, unit % self.split_k)
        m, n = tile_position(tile, self.m_tiles, self.n_tiles, self.snake)
        if self.first_group is not None:  # the copies taken from `first_group` on, round
            group = (self.first_group + group) % self.groups
        if self.pair == 1:
            return Work(t, m * self.BM, n * self.BN, split, group)
        if self.share_a:
            return Work(t, m * self.BM, (n * self.pair + ad.cluster_cta_id(0)) * self.BN, split, group)
        return Work(t, (m * self.pair + ad.cluster_cta_id(0)) * self.BM, n * self.BN, split, group)
