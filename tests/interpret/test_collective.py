"""Collective loads in the interpreter: every CTA of a group ends up with its group's whole tile,
bit for bit, whichever cluster shape, collective dims, transforms and swizzle; leader-tracked
loads follow the reference's semantics; and misuse is caught (races, missing parts)."""

from __future__ import annotations

import numpy as np
import pytest
from collective_kernels import (
    broadcast_kernel,
    expected_broadcast,
    expected_rounds,
    num_groups,
    rounds_kernel,
)
from support import random_bits, same_bytes

import asyncdsl as ad

SWIZZLED_TILES = {"swizzle": 128, "transforms": (ad.TileTransform((8, 64)),), "smem_shape": (8, 1, 8, 64)}

CASES = [
    pytest.param((2, 1, 1), "x", (4, 3), ad.float32, {}, id="2x1x1-x"),
    pytest.param((1, 2, 1), "y", (3, 4), ad.float32, {}, id="1x2x1-y"),
    pytest.param((2, 2, 1), ("x", "y"), (4, 2), ad.float16, {}, id="2x2x1-xy"),
    pytest.param((2, 2, 1), "x", (2, 4), ad.int8, {}, id="2x2x1-x"),
    pytest.param((2, 2, 1), "y", (2, 2), ad.float32, {}, id="2x2x1-y"),
    pytest.param((4, 1, 1), "x", (8, 1), ad.float32, {}, id="4x1x1-x"),
    pytest.param((4, 1, 1), "x", (4, 2), ad.bfloat16, SWIZZLED_TILES, id="4x1x1-x-tiled-swizzle128"),
    pytest.param((2, 2, 1), ("x", "y"), (2, 2), ad.bfloat16, SWIZZLED_TILES, id="2x2x1-xy-tiled-swizzle128"),
    pytest.param(
        (2, 1, 1),
        "x",
        (2, 1),
        ad.bfloat16,
        {"swizzle": 64, "transforms": (ad.TileTransform((16, 32)),), "smem_shape": (4, 2, 16, 32)},
        id="2x1x1-x-tiled-swizzle64",
    ),
]


@pytest.mark.parametrize("cluster, collective, grid, dtype, options", CASES)
def test_every_cta_gets_its_groups_whole_tile(cluster, collective, grid, dtype, options):
    rows = 64
    dims = (collective,) if isinstance(collective, str) else collective
    x = random_bits((num_groups(cluster, dims, grid) * rows, 64), dtype, seed=1)
    y = random_bits((grid[0] * grid[1] * rows, 64), dtype, seed=2)
    broadcast_kernel(cluster, collective, grid, rows, **options).interpret(x, y)
    assert same_bytes(y, expected_broadcast(x, cluster, collective, grid, rows))


@ad.kernel(grid=(8,), cluster=(4, 1, 1))
def carry_over(x, y):
    """A (2, 32, 64) box among 4 CTAs: dim 0 is split fully, its remainder carried to dim 1."""
    tile = ad.smem((2, 32, 64), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.ds(ad.cluster_id(0) * 2, 2), :, :], tile, barrier=loaded, collective="x")
    loaded.wait()
    ad.async_copy(tile, y.at[ad.ds(ad.program_id(0) * 2, 2), :, :])
    ad.await_async_copy(0)


def test_split_carries_over_to_the_next_dim():
    x = random_bits((4, 32, 64), ad.float32, seed=3)
    y = np.zeros((16, 32, 64), np.float32)
    stages = carry_over.stages(x, y)
    assert "box = [1, 16, 64]" in stages["partition-collectives"]
    carry_over.interpret(x, y)
    assert same_bytes(y, np.concatenate([x[(p // 4) * 2 : (p // 4) * 2 + 2] for p in range(8)]))


@ad.kernel(grid=(4,), cluster=(2, 1, 1))
def squeezed_rows(x, y):
    tile = ad.smem(x.shape[1:], x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.cluster_id(0)], tile, barrier=loaded, collective="x")  # dim 0 squeezed
    loaded.wait()
    ad.async_copy(tile, y.at[ad.program_id(0)])
    ad.await_async_copy(0)


def test_squeezed_dims_are_skipped():
    x = random_bits((2, 16, 32), ad.float32, seed=4)
    y = np.zeros((4, 16, 32), np.float32)
    squeezed_rows.interpret(x, y)
    assert same_bytes(y, x[[0, 0, 1, 1]])


def leader_tracked(partition, rows: int = 64):
    shape_rows = rows if partition == ad.CopyPartition.REPLICATED else rows // 2

    @ad.kernel(grid=(4,), cluster=(2, 1, 1), arch="sm_100a")
    def kernel(x, y):
        tile = ad.smem((shape_rows, x.shape[1]), x.dtype)
        loaded = ad.barrier()
        ad.async_copy(
            x.at[ad.ds(ad.cluster_id(0) * rows, rows), :],
            tile,
            barrier=loaded,
            collective="x",
            partition=partition,
        )
        with ad.when(ad.cluster_cta_id(0) == 0):  # only the leader's barrier tracks the pair
            loaded.wait()
        ad.cluster_barrier()
        ad.async_copy(tile, y.at[ad.ds(ad.program_id(0) * shape_rows, shape_rows), :])
        ad.await_async_copy(0)

    return kernel


def test_partitioned_loads_give_each_cta_its_own_half():
    x = random_bits((128, 32), ad.float32, seed=5)
    y = np.zeros_like(x)
    leader_tracked(ad.CopyPartition.PARTITIONED(0)).interpret(x, y)
    assert same_bytes(y, x)  # CTA 2p + r holds rows [64p + 32r, +32)


def test_replicated_loads_give_both_ctas_everything():
    x = random_bits((128, 32), ad.float32, seed=6)
    y = np.zeros((256, 32), np.float32)
    leader_tracked(ad.CopyPartition.REPLICATED).interpret(x, y)
    assert same_bytes(y, np.concatenate([x[:64], x[:64], x[64:], x[64:]]))


def test_the_follower_barrier_of_a_leader_tracked_load_never_completes():
    @ad.kernel(grid=(2,), cluster=(2, 1, 1), arch="sm_100a")
    def follower_waits(x, y):
        tile = ad.smem((32, 32), x.dtype)
        loaded = ad.barrier()
        ad.async_copy(
            x.at[ad.ds(0, 64), :],
            tile,
            barrier=loaded,
            collective="x",
            partition=ad.CopyPartition.PARTITIONED(0),
        )
        loaded.wait()  # the follower's own barrier: nobody arrives or completes bytes there

    x = np.zeros((64, 32), np.float32)
    with pytest.raises(ad.DeadlockError, match=r"CTA \(1, 0, 0\)"):
        follower_waits.interpret(x, x)


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def store_before_waiting(x, y):
    tile = ad.smem((64, 32), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, 64), :], tile, barrier=loaded, collective="x")
    with ad.when(ad.cluster_cta_id(0) == 1):
        ad.async_copy(tile, y.at[ad.ds(0, 64), :])  # the peer's half may not have landed yet
    loaded.wait()


def test_reading_a_peers_multicast_before_the_wait_is_a_race():
    x = random_bits((64, 32), ad.float32)
    with pytest.raises(ad.RaceError, match="TMA load") as caught:
        store_before_waiting.interpret(x, np.zeros_like(x))
    assert "CTA (1, 0, 0)" in str(caught.value)


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def only_the_first_loads(x, y):
    tile = ad.smem((64, 32), x.dtype)
    loaded = ad.barrier()
    first = ad.cluster_cta_id(0) == 0
    ad.async_copy(x.at[ad.ds(0, 64), :], tile, barrier=loaded, collective="x", predicate=first)
    loaded.wait()


def test_a_missing_part_leaves_every_barrier_short():
    x = random_bits((64, 32), ad.float32)
    with pytest.raises(ad.DeadlockError) as caught:
        only_the_first_loads.interpret(x, x.copy())
    message = str(caught.value)
    # CTA 0 expected the whole slice (8192 bytes) but only its own half arrived; CTA 1 got that
    # half too, without having expected anything.
    assert "CTA (0, 0, 0)" in message and "4096 tx bytes still expected" in message
    assert "4096 tx bytes completed before being expected" in message


def test_rounds_of_multicast_into_one_buffer_meet_in_between():
    rounds, ctas, rows = 3, 4, 32
    x = random_bits((rounds * ctas // 2 * rows, 32), ad.float32, seed=7)
    y = np.zeros((rounds * ctas * rows, 32), np.float32)
    rounds_kernel(rounds, rows).interpret(x, y)
    assert same_bytes(y, expected_rounds(x, rounds, ctas, rows))


def test_multicasting_again_before_the_peer_is_done_is_a_race():
    rounds, ctas, rows = 2, 2, 32
    x = random_bits((rounds * ctas // 2 * rows, 32), ad.float32, seed=8)
    y = np.zeros((rounds * ctas * rows, 32), np.float32)
    with pytest.raises(ad.RaceError, match="multicast TMA load into CTA"):
        rounds_kernel(rounds, rows, cluster_barrier=False).interpret(x, y)
