"""The query rows' numbers of attention's backward pass staged in SMEM by a producer
(`asyncdsl.blocks.query_row_stats`), in the interpreter: each block's rows reach the consumer in
the columns' layout through a ring of two slots refilled as the consumer frees them."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

from asyncdsl.blocks import query_row_stats


@pytest.mark.parametrize("blocks", [1, 2, 5])
def test_the_docstring_example_hands_every_blocks_rows_over_once(blocks):
    """One block (no slot reused), as many blocks as slots, and the ring refilled twice over."""
    spread = run_example(query_row_stats)["spread"]
    rng = np.random.default_rng(blocks)
    lse, delta = (rng.standard_normal(64 * blocks).astype(np.float32) for _ in range(2))
    out = np.full((blocks, 64, 64), np.nan, np.float32)
    spread.interpret(lse, delta, out)
    wanted = (lse - delta).reshape(blocks, 1, 64)
    assert np.array_equal(out, np.broadcast_to(wanted, out.shape))
