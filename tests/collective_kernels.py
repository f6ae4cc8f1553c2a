"""Kernels for the collective-load tests (CPU and GPU): every CTA of a cluster gets its group's
tile through a collective (multicast) load and stores it at its own place, so the output says
which tile each CTA received, bit for bit.

CTA p (linear program index, x fastest) of group g stores the tile x[g] (rows g*BM ... of the
input) into rows p*BM ... of the output; `expected_broadcast` computes that with numpy.
"""

from __future__ import annotations

import math

import numpy as np

import asyncdsl as ad


def group_of(cta: tuple[int, int], cluster: tuple[int, int, int], collective: tuple[str, ...], grid) -> int:
    """The tile a CTA's group loads: one per (cluster, coordinates along the other dims)."""
    position = (cta[0] % cluster[0], cta[1] % cluster[1])
    member, stride = 0, 1
    for axis in (0, 1):
        if "xy"[axis] not in collective:
            member += position[axis] * stride
            stride *= cluster[axis]
    cluster_linear = cta[0] // cluster[0] + cta[1] // cluster[1] * (grid[0] // cluster[0])
    return cluster_linear * stride + member


def num_groups(cluster, collective, grid) -> int:
    groups_per_cluster = math.prod(cluster[a] for a in (0, 1) if "xy"[a] not in collective)
    return grid[0] // cluster[0] * (grid[1] // cluster[1]) * groups_per_cluster


def broadcast_kernel(
    cluster: tuple[int, int, int],
    collective,
    grid: tuple[int, int],
    rows: int,
    *,
    swizzle: int | None = None,
    transforms=(),
    smem_shape=None,
):
    """A kernel `k(x, y)`: each group loads its `rows`-row tile of x collectively, every CTA
    stores what it got to its own `rows` rows of y (same transforms and swizzle both ways)."""
    dims = (collective,) if isinstance(collective, str) else tuple(collective)

    @ad.kernel(grid=grid, cluster=cluster)
    def broadcast(x, y):
        position = (ad.cluster_cta_id(0), ad.cluster_cta_id(1))
        member, stride = 0, 1
        for axis in (0, 1):
            if "xy"[axis] not in dims:
                member = position[axis] * stride + member
                stride *= cluster[axis]
        cluster_linear = ad.cluster_id(0) + ad.cluster_id(1) * (grid[0] // cluster[0])
        group = cluster_linear * stride + member
        program = ad.program_id(0) + ad.program_id(1) * grid[0]
        tile = ad.smem(smem_shape or (rows, x.shape[1]), x.dtype)
        loaded = ad.barrier()
        ad.async_copy(
            x.at[ad.ds(group * rows, rows), :],
            tile,
            barrier=loaded,
            collective=collective,
            swizzle=swizzle,
            transforms=transforms,
        )
        loaded.wait()
        ad.async_copy(tile, y.at[ad.ds(program * rows, rows), :], swizzle=swizzle, transforms=transforms)
        ad.await_async_copy(0)

    return broadcast


def expected_broadcast(x: np.ndarray, cluster, collective, grid, rows: int) -> np.ndarray:
    dims = (collective,) if isinstance(collective, str) else tuple(collective)
    blocks = []
    for py in range(grid[1]):
        for px in range(grid[0]):
            g = group_of((px, py), cluster, dims, grid)
            blocks.append(x[g * rows : (g + 1) * rows])
    return np.concatenate(blocks)


def rounds_kernel(rounds: int, rows: int, *, cluster_barrier: bool = True):
    """A 2-CTA-cluster kernel `k(x, y)` that multicasts a new tile into the same buffer every
    round: the cluster meets after each round, so no CTA overwrites a peer's buffer (or counts
    bytes on its barrier) before the peer is done with the previous round."""

    @ad.kernel(grid=lambda x, y: (y.shape[0] // (rounds * rows),), cluster=(2, 1, 1))
    def multicast_rounds(x, y):
        ctas = ad.num_programs(0)
        tile = ad.smem((rows, x.shape[1]), x.dtype)
        loaded = ad.barrier()
        for r in ad.range(rounds):
            source = r * (ctas // 2) + ad.cluster_id(0)
            ad.async_copy(x.at[ad.ds(source * rows, rows), :], tile, barrier=loaded, collective="x")
            loaded.wait()
            ad.async_copy(tile, y.at[ad.ds((r * ctas + ad.program_id(0)) * rows, rows), :])
            ad.await_async_copy(0, read_only=True)
            if cluster_barrier:
                ad.cluster_barrier()

    return multicast_rounds


def expected_rounds(x: np.ndarray, rounds: int, ctas: int, rows: int) -> np.ndarray:
    tiles = x.reshape(rounds, ctas // 2, rows, -1)
    return np.repeat(tiles, 2, axis=1).reshape(rounds * ctas * rows, -1)
