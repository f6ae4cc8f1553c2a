"""Reductions along rows that a row kernel spreads out: over the pieces of rows too long for one
tile (`accumulate`), and over the warpgroups that share a row (`combine`, `across_warpgroups`).

    import numpy as np

    import asyncdsl as ad
    from asyncdsl.blocks.row_reductions import accumulate
    from asyncdsl.blocks.rows import padded_rows

    @ad.kernel(grid=lambda x, peaks, WIDTH: (x.shape[0],))
    def row_peaks(x, peaks, WIDTH: ad.constexpr):
        rows = padded_rows(x, 1, WIDTH, other=-np.inf)
        running = ad.registers(rows.shape, ad.float32)
        peak = accumulate(running, -np.inf, rows.count, lambda c: ad.maximum(running[...], rows.piece(c)))
        ad.store(peaks.at[rows.rows], peak.max(axis=1))

A tile's reduction along its rows crosses lanes and warps (shuffles, then shared memory); done
once a piece it would cost that exchange a piece.  `accumulate` keeps the running result
element by element in registers instead, so the rows cross lanes once, after the sweep.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def accumulate(acc, start, count: int, step):
    """Sweep `count` pieces into the registers `acc` element by element: `acc` starts as `start`
    everywhere, and after piece c holds `step(c)` (which reads `acc[...]` where its operation
    takes the running value, so the kernel decides the order of the reads); returns the value
    after the last piece."""
    acc[...] = ad.full(acc.shape, start, acc.dtype)
    for c in ad.range(count):
        acc[...] = step(c)
    return acc[...]


def combine(partials, op):
    """The partial results of warpgroups sharing rows, `partials.at[w]` warpgroup w's (shared
    memory, written and then made visible by a CTA barrier), folded by `op` in the order of the
    warpgroups: every warpgroup that calls this gets the same bits, also where `op` rounds."""
    total = partials.at[0][...]
    for part in range(1, partials.shape[0]):
        total = op(total, partials.at[part][...])
    return total


def across_warpgroups(partials, me, value, op):
    """`value`, warpgroup `me`'s partial result (`ad.warpgroup_idx()`), folded with the other
    warpgroups' by `op` through their slots in `partials` ((warpgroups, ...) shared memory) and
    one CTA barrier: what `combine` returns, in every warpgroup."""
    partials.at[me][...] = value
    ad.cta_barrier()
    return combine(partials, op)
