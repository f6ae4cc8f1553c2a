"""What a GPU shows as a hang or a wrong answer, the interpreter names: the error, the kernel, the
CTA, the warpgroup and the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from support import line_of

import asyncdsl as ad
from asyncdsl.errors import AssumptionError, BarrierError, OutOfBoundsError

B = 32


def interpret_error(error_type, kernel, *fragments, line: str, shape=(B, B), **constexprs):
    """Interpret `kernel` on f32 arrays of `shape`; it must raise `error_type` at `line`."""
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = np.zeros_like(x)
    with pytest.raises(error_type) as caught:
        kernel.interpret(x, y, **constexprs)
    error = caught.value
    message = str(error)
    for fragment in (f"kernel {kernel.name}", *fragments):
        assert fragment in message, message
    assert error.location is not None and error.location.file == __file__, message
    assert error.location.line == line_of(kernel.fn, line), message
    assert message.startswith(f"{__file__}:{error.location.line}: ")
    return message


# -- deadlocks ----------------------------------------------------------------------------------


@ad.kernel(grid=(1,))
def expects_too_many_bytes(x, y):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    bar.arrive_expect_tx(2 * B * B * 4)
    ad.async_copy(x.at[...], tile, barrier=bar, arrive=False)
    bar.wait()  # never completes


def test_deadlock_when_expected_bytes_never_arrive():
    interpret_error(
        ad.DeadlockError, expects_too_many_bytes,
        "deadlock", "CTA (0, 0, 0) warpgroup 0", "parity 0", "4096 tx bytes still expected",
        line="never completes",
    )


@ad.kernel(grid=(1,))
def wrong_parity(x, y):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=bar)
    bar.wait(parity=1)  # parity 1 is the phase after the load's


def test_deadlock_when_waiting_on_the_wrong_parity():
    interpret_error(
        ad.DeadlockError, wrong_parity,
        "for the phase of parity 1", "phase 1 (parity 1) incomplete", "1 of 1 arrivals pending",
        line="parity 1 is",
    )


# The two kernels below copy in a loop of a traced trip count (an int argument), so that the
# arrival rule cannot be checked while tracing (tests/frontend/test_arrivals.py) and the
# interpreter is the one to find the hang.


@ad.kernel(grid=(1,))
def waits_twice(x, y, n):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    for _ in ad.range(n):
        ad.async_copy(x.at[...], tile, barrier=bar)
    bar.wait()
    bar.wait()  # the tracked parity moved on to the next phase


def test_deadlock_when_a_tracked_wait_has_no_phase_to_see():
    interpret_error(ad.DeadlockError, waits_twice, "parity 1", line="tracked parity moved on", n=1)


@ad.kernel(grid=(1,))
def missing_arrive(x, y, n):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier(arrival_count=2)
    for _ in ad.range(n):
        ad.async_copy(x.at[...], tile, barrier=bar)
    bar.wait()  # a second arrival never comes


def test_deadlock_when_an_arrival_is_missing():
    message = interpret_error(
        ad.DeadlockError, missing_arrive, "1 of 2 arrivals pending, 0 tx bytes", line="second arrival", n=1
    )
    copy = line_of(missing_arrive.fn, "ad.async_copy")
    assert (f"the phase expects 2 arrival(s) (its arrival_count) and got 1: the TMA load at "
            f"{__file__}:{copy} "
            "in CTA (0, 0, 0) warpgroup 0") in message


@ad.kernel(grid=(2,), block=256)
def crossed_waits(x, y):
    first = ad.barrier()
    second = ad.barrier()
    with ad.when(ad.warpgroup_idx() == 0):
        first.wait()  # warpgroup 0 waits for warpgroup 1
        second.arrive()
    with ad.when(ad.warpgroup_idx() == 1):
        second.wait()  # warpgroup 1 waits for warpgroup 0
        first.arrive()


def test_deadlock_lists_every_blocked_warpgroup():
    message = interpret_error(ad.DeadlockError, crossed_waits, line="warpgroup 0 waits")
    first, second = line_of(crossed_waits.fn, "first = "), line_of(crossed_waits.fn, "second = ")
    assert ("CTA (0, 0, 0) warpgroup 0 at "
            f"{__file__}:{line_of(crossed_waits.fn, 'warpgroup 0 waits')}" in message)
    assert ("CTA (0, 0, 0) warpgroup 1 at "
            f"{__file__}:{line_of(crossed_waits.fn, 'warpgroup 1 waits')}" in message)
    assert f"the mbarrier allocated at {__file__}:{first}" in message
    assert f"the mbarrier allocated at {__file__}:{second}" in message


@ad.kernel(grid=(4,), cluster=(2, 1, 1))
def last_cta_waits_forever(x, y):
    bar = ad.barrier()
    with ad.when(ad.program_id(0) == 3):
        bar.wait()  # nobody arrives


def test_deadlock_in_a_later_cluster_names_its_ctas():
    message = interpret_error(
        ad.DeadlockError, last_cta_waits_forever, "CTA (3, 0, 0) warpgroup 0 at", line="nobody arrives",
    )
    exit_line = line_of(last_cta_waits_forever.fn, "@ad.kernel")  # where the kernel's code starts
    assert f"CTA (2, 0, 0) warpgroup 0 at {__file__}:{exit_line}" in message
    assert "waits at the kernel's exit (a cluster meets before its CTAs exit)" in message
    assert "CTA (0, 0, 0)" not in message  # the first cluster finished


@ad.kernel(grid=(1,), block=256)
def one_sided_cta_barrier(x, y):
    bar = ad.barrier()
    with ad.when(ad.warpgroup_idx() == 0):
        ad.cta_barrier()  # warpgroup 1 never comes
    with ad.when(ad.warpgroup_idx() == 1):
        bar.wait()


def test_deadlock_at_a_cta_barrier_names_who_is_missing():
    interpret_error(
        ad.DeadlockError, one_sided_cta_barrier,
        "waits at cta_barrier", "not yet: CTA (0, 0, 0) warpgroup 1",
        line="never comes",
    )


# -- mbarrier misuse ---------------------------------------------------------------------------


@ad.kernel(grid=(1,))
def expects_too_few_bytes(x, y):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    bar.arrive_expect_tx(B * B * 4 // 2)
    ad.async_copy(x.at[...], tile, barrier=bar, arrive=False)  # completes the whole box
    bar.wait()


def test_more_bytes_completed_than_expected():
    interpret_error(
        BarrierError, expects_too_few_bytes,
        "completed 4096 bytes", "expected only 2048 more", "more bytes completed than were expected",
        line="completes the whole box",
    )


@ad.kernel(grid=(1,))
def arrives_without_expect_tx(x, y):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=bar, arrive=False)
    bar.arrive()  # should have been arrive_expect_tx
    bar.wait()


def test_bytes_completed_before_an_arrival_that_expected_none():
    interpret_error(
        BarrierError, arrives_without_expect_tx, "leaves phase 0 with 4096 more bytes completed",
        line="should have been",
    )


@ad.kernel(grid=(1,))
def arrives_too_often(x, y):
    bar = ad.barrier(arrival_count=1)
    with ad.when(ad.program_id(0) == 0):  # conditional: left to the interpreter, not counted while tracing
        bar.arrive(2)  # two arrivals, one allowed
    bar.wait()


def test_more_arrivals_than_the_count_allows():
    interpret_error(
        BarrierError, arrives_too_often, "2 arrival(s)", "only 1 of its 1 arrivals left",
        line="one allowed",
    )


# -- races -------------------------------------------------------------------------------------


@ad.kernel(grid=(1,))
def stores_before_waiting(x, y):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=bar)  # the load
    ad.async_copy(tile, y.at[...])  # no wait before
    ad.await_async_copy(0)
    bar.wait()


def test_reading_smem_a_load_was_not_waited_for():
    message = interpret_error(
        ad.RaceError, stores_before_waiting, "the TMA store reads shared memory bytes [0, 4096)",
        "before waiting for phase 0", line="no wait before",
    )
    assert f"the TMA load at {__file__}:{line_of(stores_before_waiting.fn, 'the load')}" in message


def overwrites_while_storing(await_first: bool):
    @ad.kernel(grid=(1,))
    def kernel(x, y):
        tile = ad.smem((B, B), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[...], tile, barrier=bar)
        bar.wait()
        ad.async_copy(tile, y.at[...])  # the store
        if await_first:
            ad.await_async_copy(0, read_only=True)
        ad.async_copy(x.at[...], tile, barrier=bar)  # the second load
        bar.wait()

    return kernel


def test_overwriting_smem_a_store_may_still_read():
    kernel = overwrites_while_storing(await_first=False)
    message = interpret_error(
        ad.RaceError, kernel, "the TMA load overwrites shared memory bytes [0, 4096)",
        "read_only=True suffices", line="the second load",
    )
    assert f"the TMA store at {__file__}:{line_of(kernel.fn, 'the store')}" in message


def test_awaiting_the_store_makes_the_overwrite_safe():
    x = np.ones((B, B), np.float32)
    y = np.zeros_like(x)
    overwrites_while_storing(await_first=True).interpret(x, y)
    assert (y == 1).all()


@ad.kernel(grid=(1,), block=256)
def unsynchronised_handover(x, y):
    tile = ad.smem((B, B), x.dtype)
    loaded = ad.barrier()
    with ad.when(ad.warpgroup_idx() == 0):
        ad.async_copy(x.at[...], tile, barrier=loaded)
        loaded.wait()
    with ad.when(ad.warpgroup_idx() == 1):
        ad.async_copy(tile, y.at[...])  # warpgroup 1 never learnt that the load landed
        ad.await_async_copy(0)


def test_another_warpgroup_must_learn_that_the_load_landed():
    interpret_error(
        ad.RaceError, unsynchronised_handover, "CTA (0, 0, 0) warpgroup 1", "the TMA store reads",
        line="never learnt",
    )


# -- out of bounds -----------------------------------------------------------------------------


@ad.kernel(grid=(3,))
def ring_index_too_far(x, y):
    bufs = ad.smem((2, B, B), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], bufs.at[ad.program_id(0)], barrier=bar)  # slot 2 does not exist
    bar.wait()


def test_smem_view_out_of_bounds():
    interpret_error(
        OutOfBoundsError, ring_index_too_far, "CTA (2, 0, 0) warpgroup 0",
        "index 2 along dim 0 of the shared-memory buffer of shape (2, 32, 32)", line="does not exist",
    )


@ad.kernel(grid=(3,))
def barrier_index_too_far(x, y):
    bars = ad.barrier(num=2)
    bars[ad.program_id(0)].arrive()  # barrier 2 does not exist


def test_barrier_index_out_of_bounds():
    interpret_error(
        OutOfBoundsError, barrier_index_too_far, "CTA (2, 0, 0)", "barrier index 2 is outside the group of 2",
        line="does not exist",
    )


@ad.kernel(grid=(2,))
def stores_above_the_array(x, y):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=bar)
    bar.wait()
    ad.async_copy(tile, y.at[ad.ds(ad.program_id(0) * B - B, B), :])  # row -32 for CTA 0
    ad.await_async_copy(0)


def test_store_at_negative_coordinates_faults():
    interpret_error(
        AssumptionError, stores_above_the_array, "CTA (0, 0, 0)",
        "coordinate along dim 0 of its view is negative",
        "fault on the", "(found -32)", line="row -32",
    )


# -- what the interpreter does not model yet -----------------------------------------------------


@ad.kernel(grid=(1,))
def reduces_into_y(x, y):
    tile = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=bar)
    bar.wait()
    ad.async_copy(tile, y.at[...], reduction="add")  # the reduction
    ad.await_async_copy(0)


def test_stores_into_read_only_arrays_are_refused():
    x = np.zeros((B, B), np.float32)
    y = np.zeros_like(x)
    y.flags.writeable = False
    with pytest.raises(ad.ArgumentError, match="TMA store to argument 'y', whose numpy array is read-only"):
        overwrites_while_storing(await_first=True).interpret(x, y)


def test_reduction_stores_combine_with_gmem_rather_than_overwrite_it():
    x = np.full((B, B), 1.5, np.float32)
    y = np.full_like(x, 2.0)
    reduces_into_y.interpret(x, y)
    assert (y == 3.5).all()  # tests/passes/test_reduction.py covers every op


def test_traced_division_by_zero_is_reported_at_its_line():
    @ad.kernel(grid=(1,))
    def divide(x):
        buf = ad.smem((8, 8), x.dtype)
        bar = ad.barrier()
        row = 8 // ad.program_id(0)  # divides by zero
        ad.async_copy(x.at[ad.ds(row, 8), :], buf, barrier=bar)
        bar.wait()

    x = np.zeros((16, 8), np.float32)
    with pytest.raises(ad.InterpretError, match="division by zero") as caught:
        divide.interpret(x)
    assert caught.value.location.line == inspect.getsourcelines(divide.fn)[1] + 4


@ad.kernel(grid=(1,))
def half_written(x, y):
    buf = ad.smem((2, 4, 256), ad.float32)
    counts = ad.smem((4, 256), ad.int32)
    buf.at[0][...] = ad.load(x.at[:, :])  # buf.at[1] is never written, nor is `counts`
    ad.cta_barrier()
    ad.store(y.at[0], buf.at[0][...])
    ad.store(y.at[1], buf.at[1][...])
    ad.store(y.at[2], counts[...].astype(ad.float32))


def test_shared_memory_nothing_wrote_reads_as_nan_and_minus_one_not_as_zeros():
    x = np.arange(4 * 256, dtype=np.float32).reshape(4, 256)
    y = np.zeros((3, 4, 256), np.float32)
    half_written.interpret(x, y)
    assert np.array_equal(y[0], x) and np.isnan(y[1]).all() and (y[2] == -1).all()
