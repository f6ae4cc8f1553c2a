"""`asyncdsl.Pipeline`: a producer and a consumer warpgroup stream tiles through its ring and
the result is numpy's; releasing slots the consumer read itself without the warpgroup barrier
is refused by the interpreter; bad arguments are errors at the line.  (The GEMM example uses it
too: its interpreter, ptxas and GPU tests cover the wgmma side.)"""

from __future__ import annotations

import numpy as np
import pytest

import asyncdsl as ad

ROWS, COLUMNS = 16, 64


@ad.kernel(grid=(1,), block=256)
def _plus_one(x, y, STAGES: ad.constexpr, AFTER_WGMMA: ad.constexpr):
    steps = x.shape[0] // ROWS
    ring_buffer = ad.smem((STAGES, ROWS, COLUMNS), x.dtype)
    ring = ad.Pipeline(STAGES, loads=1, consumers=1)
    with ad.warpgroup_role(1):
        for step in ad.range(steps):
            slot, landed = ring.produce(step)
            ad.async_copy(x.at[ad.ds(step * ROWS, ROWS), :], ring_buffer.at[slot], barrier=landed)
    with ad.warpgroup_role(0):
        for step in ad.range(steps):
            slot = ring.consume(step)
            tile = ring_buffer.at[slot][...]
            ring.release(step, after_wgmma=AFTER_WGMMA)  # the consumer read the slot itself
            ad.store(y.at[ad.ds(step * ROWS, ROWS), :], tile + 1.0)


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_tiles_stream_through_the_ring(stages):
    x = np.random.default_rng(0).standard_normal((7 * ROWS, COLUMNS)).astype(np.float32)
    y = np.zeros_like(x)
    _plus_one.interpret(x, y, STAGES=stages, AFTER_WGMMA=False)
    np.testing.assert_array_equal(y, x + np.float32(1))


def test_a_release_without_the_barrier_after_the_consumers_own_reads_is_refused():
    x = np.zeros((2 * ROWS, COLUMNS), np.float32)
    with pytest.raises(ad.InterpretError, match="sync=False after the register-tile load"):
        _plus_one.interpret(x, np.zeros_like(x), STAGES=2, AFTER_WGMMA=True)


@ad.kernel(grid=(1,), block=128)
def _no_stages(x):
    ad.Pipeline(0)  # the ring


def test_a_ring_needs_slots():
    with pytest.raises(ad.TraceError, match="stages must be a Python int >= 1") as caught:
        _no_stages.compile(ad.ArraySpec((8, 8), ad.float32))
    assert caught.value.location.line == _no_stages.fn.__code__.co_firstlineno + 2
