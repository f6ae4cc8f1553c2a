"""The consumer's K loop of a load ring (`asyncdsl.blocks.mma_loop`), in the interpreter."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support import line_of

import asyncdsl as ad
from asyncdsl.blocks.epilogues import store_in_pieces, store_ring
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import block_scaled_mma_loop, drain, mma_loop
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.blocks.persistent_tiles import PersistentTiles


@ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=256)
def product(a, b, c, CTAS: ad.constexpr, STAGES: ad.constexpr, IN_FLIGHT: ad.constexpr):
    """c = a @ b in 64 x 64 tiles, one consumer warpgroup, K in 64-deep steps."""
    tiles = PersistentTiles(a.shape[0], b.shape[1], 64, 64, CTAS, snake=0)
    k_steps = ad.cdiv(a.shape[1], 64)
    a_ring = ad.smem((STAGES, 64, 64), a.dtype, **tensor_core_layout(64))
    b_ring = ad.smem((STAGES, 64, 64), b.dtype, **tensor_core_layout(64))
    c_out = store_ring(1, c.dtype)
    ring = ad.Pipeline(STAGES, loads=2, consumers=1)

    def load(work, kk, slot, landed):
        ad.async_copy(a.at[ad.ds(work.row, 64), ad.ds(kk * 64, 64)], a_ring.at[slot], barrier=landed)
        ad.async_copy(b.at[ad.ds(kk * 64, 64), ad.ds(work.col, 64)], b_ring.at[slot], barrier=landed)

    def operands(slot):
        return a_ring.at[slot], b_ring.at[slot]

    with ad.warpgroup_role(1):
        produce(ring, tiles, k_steps, load)
    with ad.warpgroup_role(0):
        acc = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
        for work in tiles:
            mma_loop(acc, ring, work.index, k_steps, operands, IN_FLIGHT)  # the K loop
            drain(ring, work.index, k_steps, IN_FLIGHT)
            store_in_pieces(acc, c_out, 0, c, work.row, work.col)
        ad.await_async_copy(0)


def _operands():
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (128, 192)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (192, 64)).astype(ml_dtypes.bfloat16)
    return a, b, np.full((128, 64), np.nan, ml_dtypes.bfloat16)


@pytest.mark.parametrize("stages,in_flight", [(2, 1), (1, 0)])
def test_the_k_loop_sums_every_step(stages, in_flight):
    a, b, c = _operands()
    product.interpret(a, b, c, CTAS=1, STAGES=stages, IN_FLIGHT=in_flight)
    assert (c.astype(np.float64) == a.astype(np.float64) @ b.astype(np.float64)).all()


def test_a_ring_of_one_slot_under_a_wgmma_in_flight_is_refused_at_the_loop():
    # The wgmma in flight holds the only slot while the next step waits for it: a hang on the GPU
    # (a deadlock in the interpreter), refused when tracing instead.
    a, b, c = _operands()
    with pytest.raises(ad.TraceError, match="needs a ring of 2 slots or more") as caught:
        product.interpret(a, b, c, CTAS=1, STAGES=1, IN_FLIGHT=1)
    assert caught.value.location.line == line_of(product.fn, "# the K loop")


@ad.kernel(grid=lambda a, b, scales, count, c, **_: (1,), block=256)
def scaled_sum(a, b, scales, count, c, STAGES: ad.constexpr, FIRST: ad.constexpr):
    """c = Σ_kk scales[kk] · (a's kk-th 64 columns @ b's kk-th 64 rows) over a traced `count` of
    K steps, the loop starting at ring step FIRST (the steps before it consumed and released)."""
    steps = ad.load_index(count.at[0])
    a_ring = ad.smem((STAGES, 64, 64), a.dtype, **tensor_core_layout(64))
    b_ring = ad.smem((STAGES, 64, 64), b.dtype, **tensor_core_layout(64))
    ring = ad.Pipeline(STAGES, loads=2, consumers=1)
    with ad.warpgroup_role(1):
        for step in ad.range(FIRST + steps):
            kk = (step - FIRST).max(0)  # the steps before FIRST load slice 0, unread
            slot, landed = ring.produce(step)
            ad.async_copy(a.at[:, ad.ds(kk * 64, 64)], a_ring.at[slot], barrier=landed)
            ad.async_copy(b.at[ad.ds(kk * 64, 64), :], b_ring.at[slot], barrier=landed)
    with ad.warpgroup_role(0):
        accs = [ad.registers((64, 64), ad.float32, layout=ad.WGMMA) for _ in range(2)]
        total = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
        for step in range(FIRST):
            ring.consume(step)
            ring.release(step, after_wgmma=False)
        def scale(slot, kk):  # slice kk's scale, broadcast over the accumulator
            return ad.load(scales.at[ad.ds(kk, 1)])[None, :] + ad.zeros((64, 1), ad.float32)

        operands = lambda slot: (a_ring.at[slot], b_ring.at[slot])  # noqa: E731
        block_scaled_mma_loop(accs, total, ring, FIRST, steps, operands, scale)
        ad.store(c, total[...])


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("steps", range(10))
def test_the_block_scaled_loop_over_a_traced_count_sums_every_scaled_slice(steps, first):
    """Counts 0 to 9: whole groups of SCALED_GROUP slices and every remainder, traced; the
    loop from a ring step that is not a slot's first."""
    rng = np.random.default_rng(steps)
    k = max(steps, 1) * 64
    a = rng.integers(-3, 4, (64, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, 64)).astype(ml_dtypes.bfloat16)
    scales = (2.0 ** rng.integers(-3, 3, max(steps, 1))).astype(np.float32)
    c = np.full((64, 64), np.nan, np.float32)
    scaled_sum.interpret(a, b, scales, np.array([steps], np.int32), c, STAGES=3, FIRST=first)
    wanted = np.zeros((64, 64))
    for kk in range(steps):
        part = slice(kk * 64, (kk + 1) * 64)
        wanted += scales[kk] * (a[:, part].astype(np.float64) @ b[part].astype(np.float64))
    assert np.array_equal(c, wanted)
