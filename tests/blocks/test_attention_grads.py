"""The launch order of attention backward's key blocks in deterministic mode
(`asyncdsl.blocks.attention_grads.ordered_position`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import asyncdsl as ad
from asyncdsl.blocks.attention_grads import ORDERED_CHUNK, grid_position, ordered_position


@given(blocks=st.integers(1, 40), heads=st.integers(1, 12))
def test_every_key_block_of_every_head_has_one_place(blocks, heads):
    places = [ordered_position(n, blocks, heads) for n in range(blocks * heads)]
    assert sorted(places) == [(x, h) for x in range(blocks) for h in range(heads)]


@given(blocks=st.integers(1, 40), heads=st.integers(1, 12))
def test_a_key_block_starts_after_the_blocks_it_waits_for(blocks, heads):
    """In deterministic mode key block x of a head waits for the head's blocks before it in x
    (to its right); each of those is launched earlier, so no CTA waits for one not yet running."""
    launched = {ordered_position(n, blocks, heads): n for n in range(blocks * heads)}
    for (x, h), n in launched.items():
        assert x == 0 or launched[(x - 1, h)] < n


@given(blocks=st.integers(1, 40), heads=st.integers(1, 12), resident=st.integers(1, 132),
       start=st.integers(0, 400))
def test_ctas_running_at_once_hold_few_chunks_of_a_head(blocks, heads, resident, start):
    """Of `resident` CTAs launched one after another (those that may run at once), a head's key
    blocks lie within the chunks that many launches reach: one more than resident / (a chunk of
    every head), where a head's whole row of key blocks started at once before."""
    end = min(start + resident, blocks * heads)
    window = [ordered_position(n, blocks, heads) for n in range(min(start, end), end)]
    chunks = -(-resident // (ORDERED_CHUNK * heads)) + 1
    for h in range(heads):
        xs = [x for x, head in window if head == h]
        assert not xs or max(xs) // ORDERED_CHUNK - min(xs) // ORDERED_CHUNK < chunks


@ad.kernel(grid=lambda key_blocks, counts, order: (order.shape[1], order.shape[0]), block=128)
def ordered_adds(key_blocks, counts, order):
    """Each live key block of each head waits, as the deterministic backward's adds do, until
    the blocks to its right have counted themselves in, records its place, counts itself in."""
    x, head = grid_position(True)
    blocks = ad.load_index(key_blocks.at[head])  # a head's own count (varlen): the others are dead
    with ad.when(x < blocks):
        j = blocks - 1 - x
        ad.wait_signal(counts.at[head, 0], "ge", blocks - 1 - j)
        place = ad.zeros((1, 1), ad.int32) + ad.load_index(counts.at[head, 1])
        ad.store(order.at[ad.ds(head, 1), ad.ds(j, 1)], place)
        ad.signal(counts.at[head, 1], 1, op="add")
        ad.signal(counts.at[head, 0], 1, op="add")


@pytest.mark.parametrize("blocks,heads", [(19, 3), (8, 2), (9, 4), (1, 5), (17, 1), (5, 3)])
def test_ordered_adds_run_right_to_left_without_waiting_for_a_cta_not_started(blocks, heads):
    """The interpreter runs CTAs in launch order and reports a wait that nothing could end; whole
    chunks, a narrower last one, one block, and heads with fewer key blocks than the grid."""
    rng = np.random.default_rng(blocks * heads)
    key_blocks = rng.integers(1, blocks + 1, heads).astype(np.int32)
    key_blocks[0] = blocks
    counts = np.zeros((heads, 2), np.int32)
    order = np.full((heads, blocks), -1, np.int32)
    ordered_adds.interpret(key_blocks, counts, order)
    for h, n in enumerate(key_blocks):
        assert list(order[h, :n]) == [n - 1 - j for j in range(n)]
        assert counts[h, 0] == n


def test_the_kernel_computes_the_same_places_as_the_host():
    """`grid_position` in a kernel (the interpreter) against `ordered_position` on ints."""

    @ad.kernel(grid=lambda out: (out.shape[0], out.shape[1]), block=128)
    def places(out):
        x, head = grid_position(True)
        ones = ad.zeros((1, 1, 2), ad.int32) + 1
        ad.store(out.at[ad.ds(ad.program_id(0), 1), ad.ds(ad.program_id(1), 1), :],
                 ad.where(ad.iota((1, 1, 2), ad.int32, 2) == 0, ones * x, ones * head))

    blocks, heads = 19, 3
    out = np.full((blocks, heads, 2), -1, np.int32)
    places.interpret(out)
    for x0 in range(blocks):
        for h0 in range(heads):
            assert tuple(out[x0, h0]) == ordered_position(x0 + blocks * h0, blocks, heads)
