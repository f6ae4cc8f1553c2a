"""`predicate=` (only warpgroups where it holds issue the copy) and `arrive=False` (a load does not
arrive on its barrier, a store does not close its bulk group), end to end: IR, PTX assembled by
ptxas, and the interpreter, whose race and deadlock checks hold kernels to the GPU's rules."""

from __future__ import annotations

import re

import numpy as np
import pytest
from predicate_kernels import (
    C,
    R,
    halves_on_one_barrier,
    odd_ctas_copy,
    random_rows,
    skipped_store_then_reuse,
)
from support import line_of

import asyncdsl as ad

F32 = ad.float32




# -- predicates -------------------------------------------------------------------------------




def test_only_ctas_where_the_predicate_holds_copy():
    x = random_rows(4 * R)
    y = np.full_like(x, -1.0)
    odd_ctas_copy.interpret(x, y)
    for cta in range(4):
        rows = slice(cta * R, (cta + 1) * R)
        assert (y[rows] == (x[rows] if cta % 2 else -1.0)).all(), cta


def test_predicates_reach_the_hardware_ops():
    resolved = odd_ctas_copy.ir(ad.ArraySpec((4 * R, C), F32), ad.ArraySpec((4 * R, C), F32),
                                after="resolve-transforms")
    for name in ("tma_load", "tma_store"):
        line = next(line for line in resolved.splitlines() if f'"asyncdsl.{name}"' in line)
        assert ", i1)" in line, line  # the predicate is an operand


def test_predicated_copies_are_guarded_by_leader_and_predicate_but_commit_by_the_leader(ptxas):
    ptx = odd_ctas_copy.ptx(ad.ArraySpec((4 * R, C), F32), ad.ArraySpec((4 * R, C), F32))
    leader = re.search(r"setp\.eq\.u32 (%p\d+), %r\d+, 0;", ptx).group(1)
    guards = {
        kind: re.search(rf"@(%p\d+) {re.escape(text)}", ptx).group(1)
        for kind, text in (
            ("expect", "mbarrier.arrive.expect_tx"),
            ("load", "cp.async.bulk.tensor.2d.shared::cluster"),
            ("store", "cp.async.bulk.tensor.2d.global.shared::cta"),
            ("commit", "cp.async.bulk.commit_group"),
        )
    }
    assert guards["expect"] == guards["load"] != leader
    assert re.search(rf"and\.pred {guards['load']}, {leader}, %p\d+;", ptx)
    assert guards["store"] != leader and guards["commit"] == leader
    ptxas(ptx)




def test_a_skipped_store_still_commits_its_group():
    x = random_rows(2 * R)
    y = np.zeros((3 * R, C), np.float32)
    skipped_store_then_reuse.interpret(x, y, PREDICATE=1)  # CTA 0 skips the second store
    assert (y[:R] == x[:R]).all() and (y[R : 2 * R] == 0).all() and (y[2 * R :] == x[R:]).all()


def test_an_issued_store_in_the_newest_group_still_reads_its_smem():
    x = random_rows(2 * R)
    with pytest.raises(ad.RaceError, match="may still be reading") as caught:
        skipped_store_then_reuse.interpret(x, np.zeros((3 * R, C), np.float32), PREDICATE=0)
    assert caught.value.location.line == line_of(skipped_store_then_reuse.fn, "# overwrites the tile")


def test_copy_predicates_must_be_conditions():
    @ad.kernel
    def kernel(x):
        tile = ad.smem((R, C), x.dtype)
        ad.async_copy(tile, x.at[ad.ds(0, R), :], predicate=ad.program_id(0))  # an index

    with pytest.raises(ad.TraceError, match="predicate must be a traced condition") as caught:
        kernel.compile(ad.ArraySpec((R, C), F32))
    assert caught.value.location.line == line_of(kernel.fn, "# an index")


# -- arrive=False -----------------------------------------------------------------------------




def test_loads_without_arrival_complete_on_the_users_announcement():
    x = random_rows(8 * R)
    y = np.zeros_like(x)
    halves_on_one_barrier.interpret(x, y)
    assert np.array_equal(x, y)


def test_arrive_false_leaves_out_expect_tx_and_commit(ptxas):
    spec = ad.ArraySpec((8 * R, C), F32)
    resolved = halves_on_one_barrier.ir(spec, spec, after="resolve-transforms")
    loads = [line for line in resolved.splitlines() if '"asyncdsl.tma_load"' in line]
    stores = [line for line in resolved.splitlines() if '"asyncdsl.tma_store"' in line]
    assert all("expect_tx_bytes = 0" in line for line in loads)
    assert ["commit = false" in line for line in stores] == [True, False]
    ptx = halves_on_one_barrier.ptx(spec, spec)
    body, epilogue = ptx.split("cp.async.bulk.wait_group 0;")  # await_async_copy(0)
    assert body.count("mbarrier.arrive.expect_tx") == 1 and f", {2 * R * C * 4};" in body
    assert body.count("cp.async.bulk.commit_group;") == 1
    # The kernel had an uncommitted store: the epilogue closes a group before its final wait.
    assert epilogue.index("cp.async.bulk.commit_group;") < epilogue.index("cp.async.bulk.wait_group.read 0;")
    ptxas(ptx)


@ad.kernel(grid=(1,))
def never_announced(x, y):
    tile = ad.smem((R, C), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=bar, arrive=False)
    bar.wait()  # nobody arrives


def test_a_load_without_arrival_or_announcement_deadlocks_at_its_wait():
    x = random_rows(R)
    with pytest.raises(ad.DeadlockError) as caught:
        never_announced.interpret(x, np.zeros_like(x))
    message = str(caught.value)
    assert "1 of 1 arrivals pending" in message and "4096 tx bytes completed before being expected" in message
    assert caught.value.location.line == line_of(never_announced.fn, "# nobody arrives")


@ad.kernel(grid=(1,))
def overwrites_an_uncommitted_store(x, y):
    tile = ad.smem((R, C), x.dtype)
    bars = ad.barrier(num=2)
    ad.async_copy(x.at[ad.ds(0, R), :], tile, barrier=bars[0])
    bars[0].wait()
    ad.async_copy(tile, y.at[ad.ds(0, R), :], arrive=False)
    ad.await_async_copy(0)  # waits for committed groups only
    ad.async_copy(x.at[ad.ds(R, R), :], tile, barrier=bars[1])  # the overwrite


def test_await_does_not_cover_a_store_no_commit_closed():
    x = random_rows(2 * R)
    with pytest.raises(ad.RaceError, match="may still be reading") as caught:
        overwrites_an_uncommitted_store.interpret(x, np.zeros_like(x))
    assert caught.value.location.line == line_of(overwrites_an_uncommitted_store.fn, "# the overwrite")
