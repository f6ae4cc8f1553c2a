"""The tile scheduler of a grouped GEMM: the tiles of groups of rows of one product, each group
times its own weights, walked by persistent CTAs with a stride (as `PersistentTiles` walks one).

    import asyncdsl as ad
    from asyncdsl.blocks.grouped_tiles import GroupedTiles

    @ad.kernel(grid=lambda c, ends, CTAS: (CTAS,))
    def numbered(c, ends, CTAS: ad.constexpr):    # c's rows in groups ending at ends[g] (int32)
        def bounds(g, before):                    # (first row, end) of group g, read on the device
            return before, ad.load_index(ends.at[g])  # (before: where group g - 1 ended)
        tiles = GroupedTiles(ends.shape[0], bounds, c.shape[1], 64, 64, CTAS, ragged=True)
        for work in tiles:                        # this CTA's tiles of every group
            value = ad.zeros((64, 64), ad.float32) + work.group
            rows = ad.iota((64, 64), ad.int32, 0) < work.end - work.row
            ad.store(c.at[ad.ds(work.row, 64), ad.ds(work.col, 64)], value, mask=rows)

The groups' bounds may be Python ints (sizes known when tracing) or traced indices read from
device memory (`asyncdsl.load_index`: no host sync, one kernel for every routing).  A tile's
group and place are computed from them in the kernel, by one pass over the groups, the same in
every role; the bounds are read there, where they are used, so that a role with few registers
(a producer) does not hold them all.
"""

from __future__ import annotations

from asyncdsl.blocks.persistent_tiles import Work
from asyncdsl.frontend import language as ad


class GroupedTiles:
    """The (BM, BN) tiles of `groups` groups of rows of an (rows, N) product, group g's rows
    `bounds(g, before)` = (first row, end), `before` the end of group g - 1 (0 before the first),
    tiles row by row, groups in order; CTAS CTAs take tiles cta,
    cta + CTAS, ... (`count` of them this CTA).  With `ragged`, groups may be empty or end inside
    a tile, whose rows from `work.end` on the kernel must not store (the next group's); without
    it each group is a positive multiple of BM rows, known when tracing."""

    def __init__(self, groups: int, bounds, N: int, BM: int, BN: int, CTAS: int, ragged: bool = False):
        if not ragged:
            end = 0
            for g in range(groups):
                first, end = bounds(g, end)
                if not isinstance(end - first, int) or (end - first) % BM or end <= first:
                    raise ad.TraceError(f"grouped tiles: each group's rows must be a positive multiple of "
                                        f"{BM} (tiles may not run into the next group), got {end - first}")
        self.groups, self.bounds, self.BM, self.BN = groups, bounds, BM, BN
        self.n_tiles = ad.cdiv(N, BN)
        row_tiles, end = 0, 0
        for g in range(groups):
            first, end = bounds(g, end)
            row_tiles = row_tiles + ad.cdiv(_at_least_zero(end - first), BM)
        self.cta, self.ctas = ad.program_id(0), CTAS
        self.count = (row_tiles * self.n_tiles - self.cta + CTAS - 1) // CTAS

    @staticmethod
    def grid(CTAS: int) -> tuple[int]:
        """The launch grid: one CTA a slot of the persistent walk."""
        return (CTAS,)

    def __iter__(self):
        """This CTA's tiles in order, as a traced loop."""
        for t in ad.range(self.count):
            yield self.work(t)

    def work(self, t) -> Work:
        """The CTA's t-th tile: its first row, column, group and the end of its group's rows."""
        tile = self.cta + t * self.ctas
        row_tile = tile // self.n_tiles  # among the row tiles of all groups, one after the other
        first_row, end = self.bounds(0, 0)
        group, first_tile = 0, 0
        previous = (0, first_row, end)  # group g - 1's first row tile, first row and end
        tiles = ad.cdiv(_at_least_zero(end - first_row), self.BM)
        for g in range(1, self.groups):
            first_g, end_g = self.bounds(g, previous[2])
            start = previous[0] + tiles  # group g's first row tile
            # 1 at or past group g's first row tile, else 0; an empty group starts where the next
            # does, so the sums below telescope to the last group that starts at or before the tile
            past = (row_tile - start + 1).max(0).min(1)
            group = past + group
            first_tile = past * (start - previous[0]) + first_tile
            first_row = past * (first_g - previous[1]) + first_row
            end = past * (end_g - previous[2]) + end
            previous, tiles = (start, first_g, end_g), ad.cdiv(_at_least_zero(end_g - first_g), self.BM)
        row = first_row + (row_tile - first_tile) * self.BM
        return Work(t, row, tile % self.n_tiles * self.BN, 0, group, end)


def _at_least_zero(rows):
    """max(rows, 0), of an int or a traced index."""
    return max(rows, 0) if isinstance(rows, int) else rows.max(0)
