"""The query tiles of attention (`asyncdsl.blocks.attention_tiles`) in the interpreter: which
key blocks a CTA walks and which keys its mask hides, against the causal triangle and the
sequence's end; the layouts and their refusals."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import attention_tiles


def visible(S, S_KV, rows, block, causal):
    """The docstring example's mask: NaN where no CTA walked, else 0 or -inf."""
    kernel = run_example(attention_tiles)["visible"]
    mask = np.full((S, -(-S_KV // block) * block), np.nan, np.float32)
    kernel.interpret(mask, S=S, S_KV=S_KV, ROWS=rows, BK=block, CAUSAL=causal)
    return mask


@pytest.mark.parametrize("block", [64, 128, 192])
def test_causal_tiles_walk_to_their_diagonal_and_hide_the_keys_after_each_row(block):
    """Blocks narrower than a tile's rows (two cross its diagonal), as wide, and wider (one
    block crosses two tiles' diagonals); the tiles run last rows first."""
    S, rows = 512, 128
    mask = visible(S, S, rows, block, True)
    keys, queries = np.arange(mask.shape[1])[None, :], np.arange(S)[:, None]
    walked = ~np.isnan(mask)
    # Each tile walks the blocks up to the one holding its last row's key, and no further.
    last_key = (queries // rows + 1) * rows - 1
    assert np.array_equal(walked, keys < np.minimum((last_key // block + 1) * block, -(-S // block) * block))
    assert np.array_equal(mask[walked] == 0, (keys <= queries)[walked])


@pytest.mark.parametrize("S_KV,block", [(333, 128), (256, 128), (100, 192)])
def test_tiles_that_are_not_causal_walk_every_key_and_hide_those_past_the_end(S_KV, block):
    mask = visible(256, S_KV, 128, block, False)
    assert not np.isnan(mask).any()
    assert np.array_equal(mask == 0, np.broadcast_to(np.arange(mask.shape[1]) < S_KV, mask.shape))


def test_the_head_shapes_of_both_layouts_and_the_refusals():
    q, k = ad.ArraySpec((2, 100, 8, 64), ad.bfloat16), ad.ArraySpec((2, 300, 4, 64), ad.bfloat16)
    assert attention_tiles.head_shapes(q, k, "BSHD") == ((2, 8, 100, 64), (4, 300))
    assert attention_tiles.head_shapes(q, k, "BHSD") == (q.shape, (300, 4))
    with pytest.raises(ad.TraceError, match="LAYOUT must be one of"):
        attention_tiles.head_shapes(q, k, "SBHD")
    with pytest.raises(ad.TraceError, match=r"k must have 4 dims \(B, H, S, D\), got shape \(300, 64\)"):
        attention_tiles.head_shapes(q, ad.ArraySpec((300, 64), ad.bfloat16), "BHSD")
