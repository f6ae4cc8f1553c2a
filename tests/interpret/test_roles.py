"""Warpgroup roles, cluster-wide arrivals and persistent grids in the interpreter: a role's body
runs in its warpgroups only, a collective arrival lands on the barrier of every CTA of the group
(a pipeline that needs it deadlocks without it), and a persistent grid launches its documented
number of clusters, which `num_programs(0)` reports."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from roles_kernels import (
    expected_multicast_ring,
    expected_turn_order,
    multicast_ring,
    persistent_copy,
    producer_consumer,
    turn_order,
)
from support import examples, random_bits, same_bytes

import asyncdsl as ad
from asyncdsl.jit.persistent import INTERPRETED_CLUSTERS


def test_producer_and_consumer_roles_move_every_tile():
    x = random_bits((3 * 4 * 64, 64), ad.float32, seed=1)
    y = np.zeros_like(x)
    producer_consumer.interpret(x, y)
    assert same_bytes(x, y)


def test_a_role_runs_only_in_its_warpgroups():
    @ad.kernel(block=384)
    def kernel(x, y):
        buf = ad.smem((64, 64), x.dtype)
        bar = ad.barrier()
        with ad.warpgroup_role(1):
            wg = ad.warpgroup_idx()
            ad.async_copy(x.at[ad.ds(0, 64), :], buf, barrier=bar)
            bar.wait()
            # Written by warpgroup 1 only, at its own rows: any other warpgroup would show.
            ad.async_copy(buf, y.at[ad.ds(wg * 64, 64), :])
            ad.await_async_copy(0)

    x = random_bits((64, 64), ad.float32, seed=2)
    y = np.zeros((3 * 64, 64), np.float32)
    kernel.interpret(x, y)
    assert same_bytes(y[64:128], x)
    assert not y[:64].any() and not y[128:].any()


def test_code_after_a_role_runs_in_every_warpgroup():
    @ad.kernel(block=256)
    def kernel(x, y):
        buf = ad.smem((64, 64), x.dtype)
        bar = ad.barrier()
        with ad.warpgroup_role(0):
            ad.async_copy(x.at[ad.ds(0, 64), :], buf, barrier=bar)
        bar.wait()  # both warpgroups wait for the load
        ad.async_copy(buf, y.at[ad.ds(ad.warpgroup_idx() * 64, 64), :])
        ad.await_async_copy(0)

    x = random_bits((64, 64), ad.float32, seed=3)
    y = np.zeros((128, 64), np.float32)
    kernel.interpret(x, y)
    assert same_bytes(y[:64], x) and same_bytes(y[64:], x)


def test_collective_arrivals_free_the_slot_in_both_ctas():
    x = random_bits((2 * 3 * 64, 64), ad.float32, seed=4)  # 2 clusters of 3 steps
    y = np.zeros((2 * x.shape[0], 64), np.float32)
    multicast_ring.interpret(x, y)
    assert same_bytes(y, expected_multicast_ring(x))


def test_local_arrivals_leave_the_peer_producer_waiting():
    # The same ring with the consumers releasing only their own CTA's barrier: `empty` expects
    # one arrival from each CTA's consumer, so the producers wait forever.
    @ad.kernel(grid=(2,), block=256, cluster=(2, 1, 1))
    def kernel(x, y):
        slot = ad.smem((64, 64), x.dtype)
        full = ad.barrier()
        empty = ad.barrier(arrival_count=2)
        with ad.warpgroup_role(1):
            for step in ad.range(2):
                empty.wait()  # the producer's wait
                ad.async_copy(x.at[ad.ds(step * 64, 64), :], slot, barrier=full, collective="x")
        with ad.warpgroup_role(0):
            empty.arrive()
            for step in ad.range(2):
                full.wait()
                ad.async_copy(slot, y.at[ad.ds((step * 2 + ad.cluster_cta_id(0)) * 64, 64), :])
                ad.await_async_copy(0, read_only=True)
                empty.arrive()

    x = random_bits((128, 64), ad.float32, seed=5)
    with pytest.raises(ad.DeadlockError, match="warpgroup 1"):
        kernel.interpret(x, np.zeros((256, 64), np.float32))


def test_a_collective_arrival_counts_once_in_each_cta():
    # Two collective arrivals by CTA 0 alone complete the phase of both CTAs' barriers.
    @ad.kernel(grid=(2,), cluster=(2, 1, 1))
    def kernel(x):
        bar = ad.barrier(arrival_count=2)
        with ad.when(ad.cluster_cta_id(0) == 0):
            bar.arrive(collective="x")
            bar.arrive(collective="x")
        bar.wait()

    kernel.interpret(np.zeros((64, 64), np.float32))

    # One collective arrival by each CTA: each barrier sees exactly 2 arrivals, 1 short of 3.
    @ad.kernel(grid=(2,), cluster=(2, 1, 1))
    def short(x):
        bar = ad.barrier(arrival_count=3)
        bar.arrive(collective="x")
        bar.wait()

    with pytest.raises(ad.DeadlockError) as caught:
        short.interpret(np.zeros((64, 64), np.float32))
    assert caught.value.message.count("1 of 3 arrivals pending") == 2


def run_persistent(kernel, rows=37):
    x = random_bits((rows, 32), ad.float32, seed=6)
    y = np.zeros_like(x)
    seen = np.full((16, 128), -1, np.int32)
    kernel.interpret(x, y, seen)
    return x, y, seen


def test_persistent_grid_launches_the_documented_clusters():
    x, y, seen = run_persistent(persistent_copy)
    programs = INTERPRETED_CLUSTERS * 2  # clusters of 2 CTAs
    assert same_bytes(x, y)  # striding by num_programs(0) covered every row
    assert (seen[:programs] == programs).all() and (seen[programs:] == -1).all()


def test_persistent_grid_clusters_can_be_chosen_for_the_interpreter():
    kernel = ad.kernel(grid=ad.PersistentGrid(interpret_clusters=3), cluster=(2, 1, 1))(persistent_copy.fn)
    x, y, seen = run_persistent(kernel)
    assert same_bytes(x, y)
    assert (seen[:6] == 6).all() and (seen[6:] == -1).all()


def test_persistent_grid_rejects_a_bad_cluster_count():
    with pytest.raises(ad.ArgumentError, match="interpret_clusters must be a positive int"):
        ad.PersistentGrid(interpret_clusters=0)
    assert repr(ad.persistent_grid) == "asyncdsl.persistent_grid"


def test_warpgroups_taking_turns_update_in_turn_order():
    x = (np.arange(8 * 64) % 7).astype(np.float32).reshape(8, 64)
    y = np.zeros_like(x)
    turn_order.interpret(x, y, TURNS=4)
    np.testing.assert_array_equal(y, expected_turn_order(x, 4))


def test_updates_without_turns_race():
    x = np.ones((8, 64), np.float32)
    with pytest.raises(ad.RaceError, match="warpgroup 1"):
        turn_order.interpret(x, np.zeros_like(x), TAKE_TURNS=False)


def test_a_party_taking_a_turn_too_many_deadlocks_naming_the_holder():
    @ad.kernel(block=256)
    def kernel(x):
        turns = ad.turns((0, 1))
        with ad.warpgroup_role((0, 1)):
            for _ in ad.range(2 + ad.warpgroup_idx()):  # warpgroup 1 takes a third turn
                with turns.turn():
                    ad.warpgroup_barrier()

    with pytest.raises(ad.DeadlockError,
                       match="warpgroup 0, whose turn it is, has exited without passing it"):
        kernel.interpret(np.zeros((8, 64), np.float32))


@ad.kernel(block=384)
def turn_counts(x, COUNTS: ad.constexpr):
    turns = ad.turns(tuple(range(len(COUNTS))))
    for warpgroup, count in enumerate(COUNTS):
        with ad.warpgroup_role(warpgroup):
            for _ in ad.range(count):
                with turns.turn():
                    ad.warpgroup_barrier()


def turns_complete(counts: tuple[int, ...]) -> bool:
    """The rule `asyncdsl.turns` documents: along the order no party takes more turns than the
    one before it, and the first at most one more than the last."""
    return all(b <= a for a, b in zip(counts, counts[1:])) and counts[0] <= counts[-1] + 1


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=3).map(tuple))
def test_turns_complete_exactly_when_the_counts_follow_the_rule(counts):
    x = np.zeros((8, 64), np.float32)
    if turns_complete(counts):
        turn_counts.interpret(x, COUNTS=counts)
    else:
        with pytest.raises(ad.DeadlockError, match="whose turn it is"):
            turn_counts.interpret(x, COUNTS=counts)


def test_a_load_nobody_waits_for_at_exit_is_refused_at_its_line():
    # The producer runs one step more than the consumer: its last load lands in a slot whose
    # phase no warpgroup waits for, and the CTA exits with the copy engine still writing it.
    @ad.kernel(grid=(1,), block=256)
    def kernel(x, y, steps):
        ring = ad.Pipeline(stages=2)
        slots = ad.smem((2, 64, 64), x.dtype)
        with ad.warpgroup_role(0):
            for step in ad.range(steps + 1):
                slot, landed = ring.produce(step)
                ad.async_copy(x.at[ad.ds(step * 64, 64), :], slots.at[slot], barrier=landed)  # extra
        with ad.warpgroup_role(1):
            for step in ad.range(steps):
                slot = ring.consume(step)
                ad.async_copy(slots.at[slot], y.at[ad.ds(step * 64, 64), :])
                ad.await_async_copy(0, read_only=True)
                ring.release(step, after_wgmma=False)

    x = random_bits((4 * 64, 64), ad.float32, seed=6)
    refusal = r"exits while the TMA load at .*no warpgroup of the CTA waited"
    with pytest.raises(ad.RaceError, match=refusal) as caught:
        kernel.interpret(x, np.zeros_like(x), 3)
    assert caught.value.location.line == kernel.fn.__code__.co_firstlineno + 7
