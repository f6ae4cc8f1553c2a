"""The producer side of a TMA load ring: one warpgroup streams the slices of every unit of work
into the slots of an `asyncdsl.Pipeline`, several operands a step, each step's copies landing on
the slot's barrier (which counts their bytes), multicast to the CTAs of a cluster where the
pipeline is collective.  The consumers wait, compute and release (`asyncdsl.blocks.mma_loop`).

    import asyncdsl as ad
    from asyncdsl.blocks.load_ring import produce
    from asyncdsl.blocks.persistent_tiles import PersistentTiles

    @ad.kernel(grid=lambda x, y, CTAS: (CTAS,), block=256)
    def doubled(x, y, CTAS: ad.constexpr):       # y = 2 x, each 64 x 64 tile in 32-column steps
        tiles = PersistentTiles(*x.shape, 64, 64, CTAS, snake=0)
        slots = ad.smem((2, 64, 32), x.dtype)
        ring = ad.Pipeline(2, loads=1, consumers=1)
        with ad.warpgroup_role(1):
            produce(ring, tiles, 2, lambda work, kk, slot, landed: ad.async_copy(
                x.at[ad.ds(work.row, 64), ad.ds(work.col + kk * 32, 32)], slots.at[slot], barrier=landed))
        with ad.warpgroup_role(0):
            for work in tiles:
                for kk in range(2):
                    step = work.index * 2 + kk
                    slot = ring.consume(step)
                    v = slots.at[slot][...].astype(ad.float32)
                    ring.release(step, after_wgmma=False)   # read by threads, not a wgmma
                    out = y.at[ad.ds(work.row, 64), ad.ds(work.col + kk * 32, 32)]
                    ad.store(out, (v * 2).astype(y.dtype))

Unit t's K step kk goes through ring step t * k_steps + kk: both sides count steps alike.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def produce(ring, units, k_steps, load, region: str = "load") -> None:
    """The producer's loop: for every unit of `units` (a tile scheduler) and each of its
    `k_steps` K steps, wait for the next free slot of `ring` and call `load(work, kk, slot,
    landed)`, which issues the step's copies into `slot` on barrier `landed` (profiled as
    `region`)."""
    for work in units:
        for kk in ad.range(k_steps):
            slot, landed = ring.produce(work.index * k_steps + kk)
            with ad.region(region):
                load(work, kk, slot, landed)

