"""Register-tile loads and stores in the interpreter: generic-proxy accesses, raced against the
copy engine and other warpgroups as the GPU needs (docs/hardware.md §12), each race at its line
and next to its correctly synchronised twin."""

from __future__ import annotations

import numpy as np
import pytest
from support import line_of

import asyncdsl as ad


def race(kernel, *fragments: str, line: str, **constexprs) -> str:
    """Interpreting `kernel` raises a RaceError saying `fragments`, at the line holding `line`."""
    x = np.ones((64, 128), np.float32)
    with pytest.raises(ad.RaceError) as caught:
        kernel.interpret(x, np.zeros_like(x), **constexprs)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    location = caught.value.location
    assert (location.file, location.line) == (__file__, line_of(kernel.fn, line)), message
    return message


@ad.kernel(grid=(1,))
def store_then_tma_store(x, y, FENCE: ad.constexpr):
    buf = ad.smem(x.shape, x.dtype)
    buf[...] = ad.full(x.shape, 3.0, x.dtype)
    if FENCE:
        ad.fence_async_smem()
    ad.async_copy(buf, y.at[...])  # the TMA store
    ad.await_async_copy(0)


def test_a_tma_store_of_stored_registers_needs_the_proxy_fence():
    line = line_of(store_then_tma_store.fn, "buf[...] = ")
    race(store_then_tma_store, f"register-tile store at {__file__}:{line}",
         "fence_async_smem() must order it before async-proxy use", line="the TMA store", FENCE=False)
    x, y = np.ones((64, 128), np.float32), np.zeros((64, 128), np.float32)
    store_then_tma_store.interpret(x, y, FENCE=True)
    assert (y == 3.0).all()


@ad.kernel(grid=(1,))
def load_before_the_wait(x, y):
    buf = ad.smem(x.shape, x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[...], buf, barrier=loaded)
    buf[...]  # too early
    loaded.wait()


def test_reading_a_tma_destination_before_its_wait_is_a_race():
    race(load_before_the_wait, "the register-tile load reads shared memory bytes [0, 32768)",
         "before waiting for phase 0", line="too early")


@ad.kernel(grid=(1,))
def overwrite_while_storing(x, y):
    buf = ad.smem(x.shape, x.dtype)
    buf[...] = ad.full(x.shape, 1.0, x.dtype)
    ad.fence_async_smem()
    ad.async_copy(buf, y.at[...])
    buf[...] = ad.full(x.shape, 2.0, x.dtype)  # the store may still be reading
    ad.await_async_copy(0)


def test_overwriting_what_a_tma_store_reads_is_a_race():
    race(overwrite_while_storing, "may still be reading", line="may still be reading")


@ad.kernel(grid=(1,), block=256)
def handed_over(x, y, EARLY: ad.constexpr):
    buf = ad.smem(x.shape, x.dtype)
    ready = ad.barrier()
    with ad.when(ad.warpgroup_idx() == 0):
        if EARLY:
            ready.arrive()  # before the store: warpgroup 1 learns nothing of it
        buf[...] = ad.full(x.shape, 5.0, x.dtype)
        if not EARLY:
            ready.arrive()
    with ad.when(ad.warpgroup_idx() == 1):
        ready.wait()
        buf[...]  # warpgroup 1 reads


def test_a_warpgroup_reads_another_ones_store_only_after_synchronising():
    race(handed_over, "CTA (0, 0, 0) warpgroup 1", "register-tile store",
         "synchronise with CTA (0, 0, 0) warpgroup 0", line="warpgroup 1 reads", EARLY=True)
    handed_over.interpret(np.ones((64, 128), np.float32), np.zeros((64, 128), np.float32), EARLY=False)


@ad.kernel(grid=(1,), block=256)
def stage_reused(x, y, EARLY: ad.constexpr):
    buf = ad.smem(x.shape, x.dtype)
    full, empty = ad.barrier(), ad.barrier()
    with ad.when(ad.warpgroup_idx() == 0):
        ad.async_copy(x.at[...], buf, barrier=full)
        empty.wait()
        ad.async_copy(x.at[...], buf, barrier=full)  # the producer refills the stage
    with ad.when(ad.warpgroup_idx() == 1):
        full.wait()
        if EARLY:
            empty.arrive()  # released before reading it
        buf[...]  # the consumer reads the stage
        if not EARLY:
            empty.arrive()
        full.wait()  # the refill lands before the CTA exits


def test_a_tma_load_refilling_a_stage_must_know_the_consumer_read_it():
    race(stage_reused, "overwrites shared memory bytes [0, 32768)",
         "CTA (0, 0, 0) warpgroup 1 reads into registers", line="the producer refills", EARLY=True)
    stage_reused.interpret(np.ones((64, 128), np.float32), np.zeros((64, 128), np.float32), EARLY=False)
