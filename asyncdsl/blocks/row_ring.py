"""A persistent walk over the rows of a matrix through a ring of shared-memory slots.

    import asyncdsl as ad
    from asyncdsl.blocks.row_ring import RowRing

    @ad.kernel(grid=ad.persistent_grid, block=256)   # two warpgroups
    def doubled(x, y):
        ring = RowRing(x, stages=2, parts=2)        # at the top level
        for t in ad.range(ring.count):              # this CTA's rows: program_id, + num_programs, ...
            v = ring.share(t).astype(ad.float32)    # waits for row t; this warpgroup's half of it
            ring.release(t)                         # all have read row t: its slot takes row t + 2
            ad.store(y.at[ring.row(t), ring.columns()], (v * 2).astype(y.dtype))

Each CTA keeps `stages` rows in flight: one bulk copy a row (no tensor map), issued as soon as
the slot it lands in is free.  A row-at-a-time kernel without a ring has its next row's loads
start only when a CTA ends and another begins; here they overlap this row's reductions and
stores.  The warpgroups split each row into `parts` equal shares, warpgroup w holding columns
[w·n/parts, (w+1)·n/parts) in registers.  `release(t)` is a CTA barrier: every thread's read of
the slot is over before the copy that overwrites it is issued, and what the warpgroups wrote to
shared memory before it (a share's maximum, say) is there for all after it.  A row needs a whole
number of 16-byte pieces (bulk copies move those) and shares of a whole number of 128-element
vectors (the register layouts' unit): rows of a multiple of 128·parts elements.
"""

from __future__ import annotations

from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad


class RowRing:
    """This CTA's rows of the (rows, n) array `x`, `stages` of them in flight, each read as
    `parts` shares by as many warpgroups.  Make it at the kernel's top level."""

    def __init__(self, x, stages: int, parts: int):
        rows, n = x.shape
        if n % (128 * parts):
            raise ad.TraceError(f"RowRing: rows of {n} elements do not split into {parts} shares of a whole "
                                "number of 128-element vectors", user_location())
        self.x, self.stages, self.share_size = x, stages, n // parts
        ctas, self._first = ad.num_programs(0), ad.program_id(0)
        self._ctas = ctas
        self.count = (rows - self._first + ctas - 1) // ctas  # rows first, first + ctas, ...
        # slots.at[s, 0, w]: share w of the row in slot s (the row as it lies, seen as shares)
        self._slots = ad.smem((stages, 1, parts, 1, self.share_size), x.dtype)
        self._landed = ad.barrier(num=stages)
        self.me = ad.warpgroup_idx()
        with ad.when(self.me == 0):
            for t in range(stages):
                with ad.when(self.count > t):
                    self._fetch(t)

    def row(self, t):
        """The CTA's t-th row, as a one-row slice."""
        return ad.ds(self._first + t * self._ctas, 1)

    def columns(self):
        """This warpgroup's columns."""
        return ad.ds(self.me * self.share_size, self.share_size)

    def share(self, t):
        """This warpgroup's share of the CTA's t-th row, as a (1, n / parts) tile, once it landed."""
        slot = t % self.stages
        self._landed[slot].wait()
        return self._slots.at[slot, 0, self.me][...]

    def release(self, t) -> None:
        """Every warpgroup is done reading row t (a CTA barrier): its slot takes row t + stages."""
        ad.cta_barrier()
        with ad.when((self.me == 0) & (t + self.stages < self.count)):
            self._fetch(t + self.stages)

    def _fetch(self, t) -> None:
        slot = t % self.stages
        ad.async_copy(self.x.at[self.row(t), :], self._slots.at[slot], barrier=self._landed[slot],
                      transforms=ad.TileTransform((1, self.share_size)), oob="undefined")
