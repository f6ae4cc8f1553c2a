"""Kernels for the distributed-shared-memory tests (CPU and GPU): the CTAs of a cluster write
register tiles into each other's shared memory (`buf.peer(rank)[...] = tile`) or read them from
there, ordered by an mbarrier arrived on across the cluster.

CTA p of a cluster of `size` (along x) owns rows [p·ROWS, +ROWS) of x and y: it sends its rows
to the next CTA of its cluster, which stores them at its own place, so y holds each CTA's rows
rotated by one within the cluster (`expected_rotation`).
"""

from __future__ import annotations

import numpy as np

import asyncdsl as ad
from asyncdsl import TileTransform

ROWS = 64

# (cluster size, columns, mailbox layout, pull, rounds, dtype): the cases the interpreter and the
# GPU tests both run.
CASES = [
    (2, 128, "row-major", False, 1, ad.float32),
    (2, 128, "swizzled", False, 4, ad.float32),
    (4, 64, "swizzled", True, 3, ad.float32),
    (2, 128, "swizzled", False, 2, ad.bfloat16),
    (4, 128, "swizzled", False, 3, ad.bfloat16),
    (2, 64, "row-major", True, 2, ad.bfloat16),
]


def rotation_kernel(size: int, columns: int, mailbox_layout: str = "row-major", pull: bool = False,
                    rounds: int = 1, skip: str | None = None):
    """`k(x, y)` on a grid of 2·size CTAs in clusters of `size`: each CTA's tile (ROWS, columns)
    of x, in the WGMMA layout, goes into the mailbox of the next CTA of its cluster (its own
    mailbox, read by that CTA, with `pull`); `rounds` times over the same mailbox (the tile
    plus the round), the receivers telling the senders when it may be written again.
    `mailbox_layout` "swizzled" gives the mailbox 128-byte swizzled columns as the tensor cores
    and TMA lay them out.  `skip` ("landed" or "drained") leaves that wait out: a race."""

    @ad.kernel(grid=(2 * size,), cluster=(size, 1, 1))
    def rotate(x, y):
        me = ad.cluster_cta_id(0)
        rows = ad.ds(ad.program_id(0) * ROWS, ROWS)
        tile = ad.load(x.at[rows, :], layout=ad.WGMMA)
        width = 128 * 8 // x.dtype.bits
        layout = ({"transforms": TileTransform((ROWS, width)), "swizzle": 128}
                  if mailbox_layout == "swizzled" else {})
        mailbox = ad.smem((ROWS, columns), x.dtype, **layout)
        # Every CTA's sender arrives on the barrier in every CTA of the cluster: `size` arrivals.
        landed = ad.barrier(arrival_count=size)
        drained = ad.barrier(arrival_count=size)
        nxt, prev = (me + 1) % size, (me + size - 1) % size
        for r in range(rounds):
            if r and skip != "drained":
                drained.wait()  # the receiver of the last round has read its mailbox
            sent = tile + r
            if pull:
                mailbox[...] = sent
            else:
                mailbox.peer(nxt)[...] = sent
            landed.arrive(collective="x")
            if skip != "landed":
                landed.wait()
            got = mailbox.peer(prev)[...] if pull else mailbox[...]
            drained.arrive(collective="x")
            ad.store(y.at[ad.ds((r * 2 * size + ad.program_id(0)) * ROWS, ROWS), :], got)

    return rotate


def rotation_input(size: int, columns: int, dtype: ad.DType, seed: int) -> np.ndarray:
    """An x for `rotation_kernel`: small integers, so `tile + round` is exact in every dtype and
    numpy's sums are the kernel's."""
    return np.random.default_rng(seed).integers(-64, 64, (2 * size * ROWS, columns)).astype(dtype.numpy)


def rotation_output_shape(size: int, columns: int, rounds: int) -> tuple[int, int]:
    """The shape of `rotation_kernel`'s y: every round's rows of every CTA."""
    return (rounds * 2 * size * ROWS, columns)


def expected_rotation(x: np.ndarray, size: int, rounds: int = 1) -> np.ndarray:
    """y of `rotation_kernel`: CTA p's rows are those of the CTA before it in its cluster, plus the round."""
    ctas = 2 * size
    out = []
    for r in range(rounds):
        for p in range(ctas):
            cluster, me = divmod(p, size)
            source = cluster * size + (me + size - 1) % size
            out.append(x[source * ROWS:(source + 1) * ROWS] + np.asarray(r, x.dtype))
    return np.concatenate(out)
