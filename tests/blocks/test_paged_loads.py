"""A ring of key and value blocks gathered page by page (`asyncdsl.blocks.paged_loads`) in the
interpreter, against numpy: blocks of several pages and pages of several blocks, copied by TMA or
written by the threads, the ring refilled; the layouts assembled by ptxas."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import paged_loads
from asyncdsl.blocks.paged_loads import FILL_ROWS, PagedLoads
from asyncdsl.runtime.ptxas import assemble

BF16 = ml_dtypes.bfloat16


def small_integers(rng, shape):
    return rng.integers(-3, 4, shape).astype(BF16)  # products and sums exact in float32


@pytest.mark.parametrize("blocks", [1, 2, 5])
def test_the_docstring_example_takes_every_block_through_the_ring(blocks):
    summed = run_example(paged_loads)["summed"]
    rng = np.random.default_rng(blocks)
    q, cache = small_integers(rng, (64, 128)), small_integers(rng, (4 * blocks + 3, 16, 128))
    table = rng.permutation(len(cache))[:4 * blocks].astype(np.int32)
    out = np.full((64, 128), np.nan, np.float32)
    summed.interpret(q, cache, table, out)
    expected = np.zeros((64, 128))
    for j in range(blocks):
        keys = cache[table[4 * j:4 * j + 4]].reshape(64, 128).astype(np.float64)
        s = (q.astype(np.float64) @ keys.T).astype(np.float32).astype(BF16).astype(np.float64)
        expected += s @ keys
    assert np.array_equal(out, expected)


@ad.kernel(block=256)
def gathered(q, k_cache, v_cache, table, s_out, o_out, BK: ad.constexpr, STAGES: ad.constexpr,
             FILLED: ad.constexpr, GATHER: ad.constexpr = "tma"):
    """s_out[j] = q k_jᵀ and o_out[j] = (s_out[j] in bf16) v_j for each block j of BK positions, the
    pages of block j being table[j * pieces ..] (or part of one page: table[j // pages_a_block])."""
    page, d = k_cache.shape[1], k_cache.shape[2]
    piece = min(BK, page)
    loads = PagedLoads(64, BK, page, d, STAGES, filled=FILLED, gather=GATHER)
    blocks = s_out.shape[0]
    with ad.warpgroup_role(1):
        for j in ad.range(blocks):
            first = j * BK  # the block's first position in the sequence the table pages
            if FILLED:
                def rows(cache, r, c=None, first=first):
                    where = first + r + ad.iota((FILL_ROWS,), ad.int32, 0)
                    pages = ad.load(table.at[where // page])
                    columns = (ad.iota((1, d), ad.int32, 1) if c is None
                               else ad.iota((1, 64), ad.int32, 1) + 64 * c)
                    return ad.load(cache.at[pages[:, None], (where % page)[:, None], columns])

                loads.fill(j, lambda r, c: rows(k_cache, r, c), lambda r: rows(v_cache, r))
            else:
                starts = [first + i * piece for i in range(BK // piece)]
                pages = [ad.load_index(table.at[at // page]) for at in starts]
                loads.load(j, pages,
                           lambda i, p, c: k_cache.at[p, ad.ds(starts[i] % page, piece), ad.ds(64 * c, 64)],
                           lambda i, p: v_cache.at[p, ad.ds(starts[i] % page, piece), :])
    with ad.warpgroup_role(0):
        loads.write_query(lambda c: ad.load(q.at[:, ad.ds(64 * c, 64)], layout=ad.WGMMA))
        s = ad.registers((64, BK), ad.float32, layout=ad.WGMMA)
        acc = ad.registers((64, d), ad.float32, layout=ad.WGMMA)
        for j in ad.range(blocks):
            slot = loads.slot(j)
            loads.wait_keys(slot)
            loads.scores(s, slot)
            ad.wgmma_wait(0)
            loads.release_keys(slot)
            ad.store(s_out.at[j], s[...])
            loads.wait_values(slot)
            ad.wgmma(acc, s[...].astype(ad.bfloat16), loads.values(slot), accumulate=False)
            ad.wgmma_wait(0)
            loads.release_values(slot)
            ad.store(o_out.at[j], acc[...])


CASES = [(16, 64, 64), (16, 32, 128), (64, 64, 128), (64, 32, 64), (32, 64, 128)]


HOW = [(False, "tma"), (False, "cp_async"), (True, "tma")]
HOW_IDS = ["copied", "gathered by cp.async", "filled"]


@pytest.mark.parametrize("filled,gather", HOW, ids=HOW_IDS)
@pytest.mark.parametrize("page,block,d", CASES, ids=str)
def test_each_block_is_its_pages_keys_and_values(page, block, d, filled, gather):
    rng = np.random.default_rng(page + block + d)
    blocks, positions = 5, 5 * block
    pages = -(-positions // page)
    k_cache, v_cache = (small_integers(rng, (pages + 2, page, d)) for _ in "kv")
    table = rng.permutation(len(k_cache))[:pages].astype(np.int32)
    q = small_integers(rng, (64, d))
    s_out = np.full((blocks, 64, block), np.nan, np.float32)
    o_out = np.full((blocks, 64, d), np.nan, np.float32)
    gathered.interpret(q, k_cache, v_cache, table, s_out, o_out, BK=block, STAGES=2, FILLED=filled,
                       GATHER=gather)
    keys, values = (c[table].reshape(-1, d)[:positions].astype(np.float64) for c in (k_cache, v_cache))
    for j in range(blocks):
        rows = slice(j * block, (j + 1) * block)
        s = q.astype(np.float64) @ keys[rows].T
        assert np.array_equal(s_out[j], s)
        assert np.array_equal(o_out[j], s.astype(np.float32).astype(BF16).astype(np.float64) @ values[rows])


@pytest.mark.parametrize("filled,gather", HOW, ids=HOW_IDS)
@pytest.mark.parametrize("page,block,d", CASES, ids=str)
def test_the_layouts_assemble(page, block, d, filled, gather):
    spec = ad.ArraySpec
    ptx = gathered.ptx(spec((64, d), ad.bfloat16), *(spec((12, page, d), ad.bfloat16) for _ in "kv"),
                       spec((12 * page // min(page, block),), ad.int32), spec((3, 64, block), ad.float32),
                       spec((3, 64, d), ad.float32), BK=block, STAGES=2, FILLED=filled, GATHER=gather)
    log = assemble(ptx, verbose=True)[1]
    assert "0 bytes spill stores" in log and "C75" not in log, log


@pytest.mark.parametrize("block,page,d", [(48, 32, 128), (32, 48, 128), (64, 16, 96)])
def test_blocks_of_part_of_pages_or_head_dims_of_part_of_a_chunk_are_refused(block, page, d):
    @ad.kernel(block=128)
    def ring(x):
        PagedLoads(64, block, page, d, 2)

    with pytest.raises(ad.TraceError, match="blocks of whole pages"):
        ring.ptx(ad.ArraySpec((1,), ad.int32))
