"""The loads of an attention CTA (`asyncdsl.blocks.attention_loads`) in the interpreter: the query
tile split between two consumers and key/value blocks through a ring of two slots (or rings of
different lengths for keys and values), refilled as both consumers release them, each consumer
seeing every block once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example

from asyncdsl.blocks import attention_loads


@pytest.mark.parametrize("blocks", [1, 2, 5])
def test_the_docstring_example_sums_every_block_once_for_each_consumer(blocks):
    """One block (no slot reused), as many blocks as slots, and a ring refilled twice over."""
    summed = run_example(attention_loads)["summed"]
    rng = np.random.default_rng(blocks)
    q = rng.integers(-4, 4, (128, 64)).astype(ml_dtypes.bfloat16)
    k, v = (rng.integers(-4, 4, (64 * blocks, 64)).astype(ml_dtypes.bfloat16) for _ in range(2))
    out = np.full((128, 64), np.nan, np.float32)
    summed.interpret(q, k, v, out)
    blocks_sum = (k.astype(np.float32) + v.astype(np.float32)).reshape(blocks, 64, 64).sum(axis=0)
    assert np.array_equal(out, q.astype(np.float32) + np.concatenate([blocks_sum, blocks_sum]))


@pytest.mark.parametrize("value_stages,blocks", [(1, 5), (3, 4), (2, 7)])
def test_keys_and_values_may_have_rings_of_their_own_lengths(value_stages, blocks):
    """Fewer value slots than key slots (as the wide attention backward at D = 256 takes) and
    more: each block is still seen once by each consumer, in its own slots."""
    summed = run_example(attention_loads)["summed"]
    rng = np.random.default_rng(blocks)
    q = rng.integers(-4, 4, (128, 64)).astype(ml_dtypes.bfloat16)
    k, v = (rng.integers(-4, 4, (64 * blocks, 64)).astype(ml_dtypes.bfloat16) for _ in range(2))
    out = np.full((128, 64), np.nan, np.float32)
    summed.interpret(q, k, v, out, VALUE_STAGES=value_stages)
    blocks_sum = (k.astype(np.float32) + v.astype(np.float32)).reshape(blocks, 64, 64).sum(axis=0)
    assert np.array_equal(out, q.astype(np.float32) + np.concatenate([blocks_sum, blocks_sum]))
