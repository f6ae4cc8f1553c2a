"""The launch order of attention backward's key blocks in deterministic mode
(`asyncdsl.blocks.attention_grads.ordered_position`)."""

from __future__ import annotations

import numpy as np
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


@given(blocks=st.integers(1, 40), heads=st.integers(1, 12), start=st.integers(0, 400))
def test_the_cta_running_at_once_span_a_chunk_of_each_head(blocks, heads, start):
    """Any run of CTAs launched one after another holds, of each head, key blocks within one
    chunk or two neighbouring ones: the adds that wait in a row are at most a chunk's."""
    window = [ordered_position(n, blocks, heads) for n in range(start, min(start + heads, blocks * heads))]
    for h in range(heads):
        xs = [x for x, head in window if head == h]
        assert not xs or max(xs) - min(xs) < 2 * ORDERED_CHUNK


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
