"""The loads of an attention CTA (`asyncdsl.blocks.attention_loads`) in the interpreter: the query
tile split between two consumers and key/value blocks through a ring of two slots (or rings of
different lengths for keys and values), refilled as both consumers release them, each consumer
seeing every block once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import attention_loads
from asyncdsl.blocks.attention_loads import AttentionLoads


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


def _summed_kernel(stages, value_stages):
    """The docstring's kernel with a ring of `stages` key slots and `value_stages` value slots;
    the consumers free a block's values before they read its keys."""
    @ad.kernel(block=384)
    def summed(q, k, v, out):
        loads = AttentionLoads(q.dtype, 64, 2, 64, k.dtype, v.dtype, 64, stages, value_stages=value_stages)
        blocks = k.shape[0] // 64
        with ad.warpgroup_role(2):
            for w in range(2):
                loads.load_query(w, q.at[ad.ds(w * 64, 64), :])
            for j in ad.range(blocks):
                loads.load(j, lambda i: k.at[ad.ds(i * 64, 64), :], lambda i: v.at[ad.ds(i * 64, 64), :])
        with ad.warpgroup_role((0, 1)):
            me = ad.warpgroup_idx()
            loads.query_landed.wait()
            total = loads.q.at[me][...].astype(ad.float32)
            for j in range(blocks):
                values = loads.value_slot(j)
                loads.wait_values(values)
                total = total + loads.values(values)[...].astype(ad.float32)
                ad.warpgroup_barrier()
                loads.release_values(values)
                slot = loads.slot(j)
                loads.wait_keys(slot)
                total = total + loads.k.at[slot][...].astype(ad.float32)
                ad.warpgroup_barrier()
                loads.release_keys(slot)
            ad.store(out.at[ad.ds(me * 64, 64), :], total)

    return summed


@pytest.mark.parametrize("stages,value_stages,blocks", [(2, 1, 5), (1, 3, 4), (3, 2, 7)])
def test_keys_and_values_may_have_rings_of_their_own_lengths(stages, value_stages, blocks):
    """Fewer value slots than key slots (as the wide attention backward at D = 256 takes) and
    the reverse: each block is still seen once by each consumer, in its own slots."""
    rng = np.random.default_rng(blocks)
    q = rng.integers(-4, 4, (128, 64)).astype(ml_dtypes.bfloat16)
    k, v = (rng.integers(-4, 4, (64 * blocks, 64)).astype(ml_dtypes.bfloat16) for _ in range(2))
    out = np.full((128, 64), np.nan, np.float32)
    _summed_kernel(stages, value_stages).interpret(q, k, v, out)
    blocks_sum = (k.astype(np.float32) + v.astype(np.float32)).reshape(blocks, 64, 64).sum(axis=0)
    assert np.array_equal(out, q.astype(np.float32) + np.concatenate([blocks_sum, blocks_sum]))
