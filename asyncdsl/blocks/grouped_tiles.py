"""The tile scheduler of a grouped GEMM: the tiles of a list of problems of different sizes, one
after the other, walked by persistent CTAs with a stride (as `PersistentTiles` walks one).

    import asyncdsl as ad
    from asyncdsl.blocks.grouped_tiles import GroupedTiles

    @ad.kernel(grid=lambda c, CTAS, SIZES: (CTAS,))
    def numbered(c, CTAS: ad.constexpr, SIZES: ad.constexpr):   # groups of rows of c, SIZES (M, N)
        tiles = GroupedTiles(SIZES, 64, 64, CTAS)
        for work in tiles:                       # this CTA's tiles of every group
            value = ad.zeros((64, 64), ad.float32) + work.group
            ad.store(c.at[ad.ds(work.row, 64), ad.ds(work.col, 64)], value)

The sizes are constexprs: the group of a tile and its place in the group are computed in the
kernel from them (comparisons with each group's first tile, as integer arithmetic), the same in
every role.  `work.row` counts from the first group's first row (the groups' rows stacked, as
the rows of a and c of a grouped GEMM lie); `work.group` picks the group's b.
"""

from __future__ import annotations

from asyncdsl.blocks.persistent_tiles import Work
from asyncdsl.frontend import language as ad


class GroupedTiles:
    """The (BM, BN) tiles of the problems `sizes` ((M, N) each, M a multiple of BM so that no tile
    runs into the next group's rows), row by row within each group, groups in order; CTAS CTAs
    take tiles cta, cta + CTAS, ... (`count` of them this CTA)."""

    def __init__(self, sizes, BM: int, BN: int, CTAS: int):
        sizes = tuple(tuple(size) for size in sizes)
        for m, n in sizes:
            if m % BM or m <= 0 or n <= 0:
                raise ad.TraceError(f"grouped tiles: each group's rows must be a positive multiple of {BM} "
                                    f"(tiles may not run into the next group), got {(m, n)}")
        self.BM, self.BN = BM, BN
        self.n_tiles = [ad.cdiv(n, BN) for _, n in sizes]
        tiles = [m // BM * columns for (m, _), columns in zip(sizes, self.n_tiles)]
        self.first_tile = [sum(tiles[:g]) for g in range(len(sizes))]
        self.first_row = [sum(m for m, _ in sizes[:g]) for g in range(len(sizes))]
        self.cta, self.ctas = ad.program_id(0), CTAS
        self.count = (sum(tiles) - self.cta + CTAS - 1) // CTAS

    @staticmethod
    def grid(CTAS: int) -> tuple[int]:
        """The launch grid: one CTA a slot of the persistent walk."""
        return (CTAS,)

    def __iter__(self):
        """This CTA's tiles in order, as a traced loop."""
        for t in ad.range(self.count):
            yield self.work(t)

    def work(self, t) -> Work:
        """The CTA's t-th tile: its first row (among all groups' rows), column and group."""
        tile = self.cta + t * self.ctas
        group, first_tile, first_row, n_tiles = 0, 0, 0, self.n_tiles[0]
        for g in range(1, len(self.n_tiles)):  # past group g's first tile: 1, else 0
            past = (tile - self.first_tile[g] + 1).max(0).min(1)
            group = past + group
            first_tile = past * (self.first_tile[g] - self.first_tile[g - 1]) + first_tile
            first_row = past * (self.first_row[g] - self.first_row[g - 1]) + first_row
            n_tiles = past * (self.n_tiles[g] - self.n_tiles[g - 1]) + n_tiles
        local = tile - first_tile
        return Work(t, first_row + local // n_tiles * self.BM, local % n_tiles * self.BN, 0, group)
