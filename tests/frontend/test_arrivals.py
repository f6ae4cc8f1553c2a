"""The barrier arrival rule checked while tracing (`asyncdsl/frontend/arrivals.py`): where the
arrivals on a barrier before a wait can be counted, a count other than its arrival_count is a
TraceError at the wait, naming the barrier, the arrivals and the count expected."""

from __future__ import annotations

import numpy as np
import pytest
from support import line_of

import asyncdsl as ad

R, C = 8, 64


@ad.kernel(grid=(1,), block=128)
def _two_copies(x, y, ARRIVALS: ad.constexpr):
    a = ad.smem((R, C), ad.float32)
    b = ad.smem((R, C), ad.float32)
    bar = ad.barrier(arrival_count=ARRIVALS)
    ad.async_copy(x.at[ad.ds(0, R), :], a, barrier=bar)
    ad.async_copy(x.at[ad.ds(R, R), :], b, barrier=bar)
    bar.wait()  # both copies
    ad.async_copy(a, y.at[ad.ds(0, R), :])
    ad.async_copy(b, y.at[ad.ds(R, R), :])
    ad.await_async_copy(0)


def _arrays():
    x = np.arange(2 * R * C, dtype=np.float32).reshape(2 * R, C)
    return x, np.zeros_like(x)


def test_two_copies_on_a_barrier_of_one_arrival_are_refused_at_the_wait():
    x, y = _arrays()
    with pytest.raises(ad.TraceError) as caught:
        _two_copies.interpret(x, y, ARRIVALS=1)
    fn, here = _two_copies.fn, __file__
    first, second = line_of(fn, "a, barrier=bar"), line_of(fn, "b, barrier=bar")
    assert caught.value.location.line == line_of(fn, "bar.wait()")
    allocated = line_of(fn, "ad.barrier(")
    assert (f"the barrier allocated at {here}:{allocated} has arrival_count=1, but 2 arrival(s) "
            f"come before the wait here (the copy at {here}:{first}; the copy at {here}:{second}), "
            "where 1 are expected") in caught.value.message
    assert "asyncdsl.barrier(arrival_count=2)" in caught.value.message


def test_two_copies_on_a_barrier_of_two_arrivals_run():
    x, y = _arrays()
    _two_copies.interpret(x, y, ARRIVALS=2)
    np.testing.assert_array_equal(y, x)


@ad.kernel(grid=(1,), block=128)
def _copies_in_a_loop(x, y, TRIPS: ad.constexpr, ARRIVALS: ad.constexpr):
    buf = ad.smem((TRIPS, R, C), ad.float32)
    bar = ad.barrier(arrival_count=ARRIVALS)
    for i in ad.range(TRIPS):
        ad.async_copy(x.at[ad.ds(i * R, R), :], buf.at[i], barrier=bar)
    bar.wait()
    for i in range(TRIPS):
        ad.async_copy(buf.at[i], y.at[ad.ds(i * R, R), :])
    ad.await_async_copy(0)


@pytest.mark.parametrize("arrivals", [1, 3])
def test_a_loop_of_known_trip_count_counts_its_copies(arrivals):
    x, y = _arrays()
    refused = r"arrival_count=%d, but 2 arrival\(s\) come before the wait" % arrivals
    with pytest.raises(ad.TraceError, match=refused):
        _copies_in_a_loop.interpret(x, y, TRIPS=2, ARRIVALS=arrivals)
    _copies_in_a_loop.interpret(x, y, TRIPS=2, ARRIVALS=2)
    np.testing.assert_array_equal(y, x)


@ad.kernel(grid=(1,), block=128)
def _one_phase_an_iteration(x, y, BYTES: ad.constexpr):
    """Load row block i + 1 while storing block i: one copy, then one wait, an iteration; the
    last copy's arrival before the wait of its own phase, by arrive_expect_tx and arrive=False."""
    buf = ad.smem((2, R, C), ad.float32)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, R), :], buf.at[0], barrier=bar)
    for i in ad.range(1):
        bar.wait()
        ad.async_copy(buf.at[0], y.at[ad.ds(0, R), :])
        bar.arrive_expect_tx(BYTES)
        ad.async_copy(x.at[ad.ds(R, R), :], buf.at[1], barrier=bar, arrive=False)
    bar.wait()
    ad.async_copy(buf.at[1], y.at[ad.ds(R, R), :])
    ad.await_async_copy(0)


def test_one_arrival_before_each_wait_passes_the_check():
    x, y = _arrays()
    _one_phase_an_iteration.interpret(x, y, BYTES=R * C * 4)
    np.testing.assert_array_equal(y, x)


@ad.kernel(grid=(1,), block=256)
def _every_warpgroup_arrives(x, y, ARRIVALS: ad.constexpr):
    bar = ad.barrier(arrival_count=ARRIVALS)
    bar.arrive()
    bar.wait()


def test_code_every_warpgroup_runs_arrives_once_per_warpgroup():
    x, y = _arrays()
    _every_warpgroup_arrives.interpret(x, y, ARRIVALS=2)
    refused = r"arrival_count=1, but 2 arrival\(s\) .*1 in each of the 2 warpgroups"
    with pytest.raises(ad.TraceError, match=refused):
        _every_warpgroup_arrives.interpret(x, y, ARRIVALS=1)


@ad.kernel(grid=(1,), block=128)
def _predicated(x, y):
    a = ad.smem((R, C), ad.float32)
    bar = ad.barrier(arrival_count=2)
    ad.async_copy(x.at[ad.ds(0, R), :], a, barrier=bar)
    ad.async_copy(x.at[ad.ds(0, R), :], a, barrier=bar, predicate=ad.program_id(0) == 1)
    bar.wait()  # the predicated copy never runs


def test_an_uncountable_barrier_is_left_to_the_interpreter():
    x, y = _arrays()
    deadlock = r"the phase expects 2 arrival\(s\) \(its arrival_count\) and got 1"
    with pytest.raises(ad.DeadlockError, match=deadlock):
        _predicated.interpret(x, y)


@ad.kernel(grid=(1,), block=128)
def _announced(x, y):
    buf = ad.smem((R, C), ad.float32)
    bar = ad.barrier(arrival_count=1)
    ad.async_copy(x.at[ad.ds(0, R), :], buf, barrier=bar, arrive=False)
    bar.arrive_expect_tx(R * C * 4)
    bar.arrive()  # one arrival too many
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(0, R), :])
    ad.await_async_copy(0)


def test_a_copy_without_arrival_is_not_listed_among_the_arrivals():
    x, y = _arrays()
    with pytest.raises(ad.TraceError) as caught:
        _announced.interpret(x, y)
    fn, here = _announced.fn, __file__
    assert (f"2 arrival(s) come before the wait here (arrive(1) at {here}:{line_of(fn, 'bar.arrive()')}; "
            f"arrive_expect_tx at {here}:{line_of(fn, 'bar.arrive_expect_tx')}), where 1 are expected"
            ) in caught.value.message
