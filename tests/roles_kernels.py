"""Kernels for the warpgroup-role, cluster-arrival and persistent-grid tests (CPU and GPU).

- `producer_consumer`: 384 threads, roles 40/232/232 (CUTLASS's budget): warpgroup 2 loads
  tiles through a ring of two slots, warpgroups 0 and 1 each store half of every tile.  The
  output is the input, so a role that ran in the wrong warpgroups shows in the bytes (or as a
  deadlock in the interpreter).
- `multicast_ring`: a 2-CTA cluster; each CTA's producer multicasts half of every tile into both
  CTAs' single slot, so the slot may be refilled only when the consumers of *both* CTAs have
  released it: they arrive with `collective="x"` on the `empty` barrier of every CTA.  CTA x of
  each cluster stores the tile at rows (2 * tile + x) * 64, so every tile appears twice.
- `persistent_copy`: `grid=asyncdsl.persistent_grid`; CTA p copies rows p, p + n, p + 2n, ...
  (n = `num_programs(0)`) and fills row p of `seen` with n.
- `paired_persistent_copy`: `persistent_copy` with a producer warpgroup (40 registers) and a
  consumer (216), built for two CTAs a multiprocessor (`ctas_per_sm=2`), with 32 KiB of rows.
- `turn_order`: warpgroups 0 and 1 take turns updating one shared row, v = 3 v + (w + 1) in the
  turn of warpgroup w; the result depends on the order of the updates, and without the turns
  (`TAKE_TURNS=False`) they race.  Warpgroup 0 takes one more turn to store the row.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

import asyncdsl as ad

TILE = 64


@ad.kernel(grid=lambda x, y, STEPS: (x.shape[0] // (TILE * STEPS),), block=384)
def producer_consumer(x, y, STEPS: ad.constexpr = 4):
    half = TILE // 2
    ring = ad.smem((2, 2, half, TILE), x.dtype)  # [slot][half of the tile]
    full = ad.barrier(arrival_count=2, num=2)  # the two halves' copies
    empty = ad.barrier(arrival_count=2, num=2)  # the two consumers
    first = ad.program_id(0) * STEPS
    with ad.warpgroup_role(2, registers=40):  # the producer
        for step in ad.range(STEPS):
            slot = step % 2
            with ad.when(step >= 2):
                empty[slot].wait()
            for h in range(2):
                rows = ad.ds((first + step) * TILE + h * half, half)
                ad.async_copy(x.at[rows, :], ring.at[slot, h], barrier=full[slot])
    with ad.warpgroup_role((0, 1), registers=232):  # the consumers, half a tile each
        wg = ad.warpgroup_idx()
        for step in ad.range(STEPS):
            slot = step % 2
            full[slot].wait()
            ad.async_copy(ring.at[slot, wg], y.at[ad.ds((first + step) * TILE + wg * half, half), :])
            ad.await_async_copy(0, read_only=True)
            empty[slot].arrive()
        ad.await_async_copy(0)


@ad.kernel(grid=lambda x, y, STEPS: (2 * x.shape[0] // (TILE * STEPS),), block=256, cluster=(2, 1, 1))
def multicast_ring(x, y, STEPS: ad.constexpr = 3):
    slot = ad.smem((TILE, TILE), x.dtype)
    full = ad.barrier()
    empty = ad.barrier(arrival_count=2)  # one consumer in each of the 2 CTAs
    tile0 = ad.cluster_id(0) * STEPS
    rank = ad.cluster_cta_id(0)
    with ad.warpgroup_role(1, registers=40):  # the producer
        for step in ad.range(STEPS):
            empty.wait()
            ad.async_copy(x.at[ad.ds((tile0 + step) * TILE, TILE), :], slot, barrier=full, collective="x")
    with ad.warpgroup_role(0, registers=232):  # the consumer
        empty.arrive(collective="x")  # the slot starts free in both CTAs
        for step in ad.range(STEPS):
            full.wait()
            ad.async_copy(slot, y.at[ad.ds(((tile0 + step) * 2 + rank) * TILE, TILE), :])
            ad.await_async_copy(0, read_only=True)
            empty.arrive(collective="x")


def expected_multicast_ring(x: np.ndarray) -> np.ndarray:
    return np.repeat(x.reshape(-1, 1, TILE, x.shape[1]), 2, axis=1).reshape(-1, x.shape[1])


@ad.kernel(grid=ad.persistent_grid, block=128, cluster=(2, 1, 1))
def persistent_copy(x, y, seen):
    program, programs = ad.program_id(0), ad.num_programs(0)
    row = ad.smem((1, x.shape[1]), x.dtype)
    bar = ad.barrier()
    for i in ad.range((x.shape[0] - program + programs - 1) // programs):
        r = program + i * programs
        ad.async_copy(x.at[ad.ds(r, 1), :], row, barrier=bar)
        bar.wait()
        ad.async_copy(row, y.at[ad.ds(r, 1), :])
        ad.await_async_copy(0)
    ad.store(seen.at[ad.ds(program, 1), :], ad.full((1, seen.shape[1]), programs, seen.dtype))


@ad.kernel(grid=ad.persistent_grid, block=256, ctas_per_sm=2)
def paired_persistent_copy(x, y, seen):
    program, programs = ad.program_id(0), ad.num_programs(0)
    rows = ad.smem((TILE, x.shape[1]), x.dtype)
    landed, stored = ad.barrier(), ad.barrier()
    tiles = (x.shape[0] // TILE - program + programs - 1) // programs
    with ad.warpgroup_role(1, registers=40):
        for i in ad.range(tiles):
            with ad.when(i > 0):
                stored.wait()
            ad.async_copy(x.at[ad.ds((program + i * programs) * TILE, TILE), :], rows, barrier=landed)
    with ad.warpgroup_role(0, registers=216):
        for i in ad.range(tiles):
            landed.wait()
            ad.store(y.at[ad.ds((program + i * programs) * TILE, TILE), :], rows[...])
            stored.arrive()
        ad.store(seen.at[ad.ds(program, 1), :], ad.full((1, seen.shape[1]), programs, seen.dtype))


@ad.kernel(grid=(1,), block=256)
def turn_order(x, y, TURNS: ad.constexpr = 3, TAKE_TURNS: ad.constexpr = True):
    turns = ad.turns((0, 1))
    row = ad.smem(x.shape, x.dtype)
    landed = ad.barrier()
    with ad.warpgroup_role((0, 1)):
        me = ad.warpgroup_idx()
        with ad.when(me == 0):
            ad.async_copy(x.at[:, :], row, barrier=landed)
            landed.wait()
        for _ in ad.range(TURNS):
            with turns.turn() if TAKE_TURNS else nullcontext():
                row[...] = row[...] * 3.0 + ad.full(x.shape, me + 1, x.dtype)
        with ad.when(me == 0), turns.turn():
            ad.fence_async_smem()
            ad.async_copy(row, y.at[:, :])
            ad.await_async_copy(0)


def expected_turn_order(x: np.ndarray, turns: int = 3) -> np.ndarray:
    v = x.astype(np.float64)
    for _ in range(turns):
        v = (v * 3 + 1) * 3 + 2
    return v.astype(x.dtype)
