"""Reading a paged KV cache (`asyncdsl.blocks.paged_kv`) in the interpreter: the docstring's
kernel lays a sequence out densely through its block table, page sizes 16 and 64; entries past
the cache or negative and lengths past the table read nothing (zeros), against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import paged_kv


def dense(cache, table, lens, positions):
    """Head 0 of each sequence through its table in numpy, zeros where no key is."""
    pages, page = cache.shape[:2]
    out = np.zeros((len(lens), positions, cache.shape[3]), cache.dtype)
    for b, length in enumerate(lens):
        for t in range(min(length, positions, table.shape[1] * page)):
            if 0 <= table[b, t // page] < pages:
                out[b, t] = cache[table[b, t // page], t % page, 0]
    return out


@pytest.mark.parametrize("page,lens", [(16, (40, 100, 0)), (64, (1, 64, 127))])
def test_the_docstring_example_lays_sequences_out_through_their_tables(page, lens):
    unpaged = run_example(paged_kv)["unpaged"]
    rng = np.random.default_rng(page)
    cache = rng.standard_normal((6, page, 2, 64)).astype(np.float32)
    table = rng.integers(0, 6, (3, 128 // page), dtype=np.int32)
    out = np.full((3, 128, 64), np.nan, np.float32)
    unpaged.interpret(cache, table, np.array(lens, np.int32), out, BK=32)
    np.testing.assert_array_equal(out, dense(cache, table, lens, 128))


def test_a_bad_table_reads_nothing_outside_the_cache():
    """The cache given to the kernel is the first 6 pages of an array whose 7th page is NaN:
    entry 6 (just past the cache), a negative one and a length past the table read zeros."""
    unpaged = run_example(paged_kv)["unpaged"]
    whole = np.random.default_rng(0).standard_normal((7, 16, 1, 64)).astype(np.float32)
    whole[6] = np.nan
    table = np.array([[0, 6, 2, 3], [-1, 1, 5, 4]], np.int32)
    lens = np.array([64, 1000], np.int32)
    out = np.full((2, 128, 64), np.nan, np.float32)
    unpaged.interpret(whole[:6], table, lens, out, BK=32)
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(out, dense(whole[:6], table, lens, 128))


@ad.kernel(grid=lambda cache, table, lens, out, SPLITS, BK: (SPLITS, table.shape[0]), block=128)
def split_copies(cache, table, lens, out, SPLITS: ad.constexpr, BK: ad.constexpr):
    """out[b]: head 0 of the positions of sequence b, each split copying its blocks by TMA."""
    split, b = ad.program_id(0), ad.program_id(1)
    seq = paged_kv.PagedSequence(table, lens, b, cache.shape[0], cache.shape[1])
    first, count = seq.split_blocks(BK, split, SPLITS)
    rows, landed = ad.smem((BK, cache.shape[3]), cache.dtype), ad.barrier()
    last = seq.last_entry()
    for j in ad.range(count):
        ad.async_copy(seq.box(cache, seq.page((first + j) * BK, last), (first + j) * BK, BK, 0), rows,
                      barrier=landed)
        landed.wait()
        ad.store(out.at[b, ad.ds((first + j) * BK, BK), :], rows[...])
        ad.warpgroup_barrier()  # all have read the rows before the next copy lands


@pytest.mark.parametrize("page,block,splits", [(16, 16, 3), (64, 32, 2), (64, 64, 1)])
def test_splits_copy_their_share_of_each_sequences_own_blocks(page, block, splits):
    """Blocks past a sequence's length are not walked (their rows keep their NaN); an entry
    past the cache or negative copies its nearest page; a length past the table is cut to it."""
    rng = np.random.default_rng(page + block)
    cache = rng.standard_normal((6, page, 2, 64)).astype(np.float32)
    table = rng.integers(0, 6, (4, 256 // page), dtype=np.int32)
    table[1, 0], table[2, 1] = 9, -4
    lens = np.array([1, page + 3, 2 * page, 1000], np.int32)
    out = np.full((4, 256, 64), np.nan, np.float32)
    split_copies.interpret(cache, table, lens, out, SPLITS=splits, BK=block)
    for b, length in enumerate(np.minimum(lens, 256)):
        walked = -(-length // block) * block  # whole blocks: the last one's rows past the length too
        pages = np.clip(table[b, np.arange(walked) // page], 0, 5)
        np.testing.assert_array_equal(out[b, :walked], cache[pages, np.arange(walked) % page, 0])
        assert np.isnan(out[b, walked:]).all()


@ad.kernel(grid=lambda cache, table, lens, out, FIRST: (table.shape[0],), block=128)
def one_box(cache, table, lens, out, FIRST: ad.constexpr):
    """out[b]: head 0 of the page `box` gives for position FIRST of sequence b."""
    b = ad.program_id(0)
    seq = paged_kv.PagedSequence(table, lens, b, cache.shape[0], cache.shape[1])
    rows, landed = ad.smem(out.shape[1:], cache.dtype), ad.barrier()
    at = FIRST + 0 * b
    ad.async_copy(seq.box(cache, seq.page(at, seq.last_entry()), at, cache.shape[1], 0), rows, barrier=landed)
    landed.wait()
    ad.store(out.at[b], rows[...])


@pytest.mark.parametrize("first", [0, 16, 32, 48, 64, 208])
def test_a_box_past_the_sequences_last_page_reads_that_page(first):
    """The last block of a sequence whose length is not whole blocks of several pages runs past
    its last page: its positions there read that page again (hidden as past the length), never
    the padding entries after it (a page that may hold anything, NaN included) nor the next row
    of the table; a length past the table counts as the table's width, an empty sequence as one
    page."""
    rng = np.random.default_rng(first)
    cache = rng.standard_normal((6, 16, 2, 64)).astype(np.float32)
    table = rng.integers(0, 6, (4, 3), dtype=np.int32)  # 48 positions a sequence
    lens = np.array([20, 48, 1000, 0], np.int32)
    out = np.full((4, 16, 64), np.nan, np.float32)
    one_box.interpret(cache, table, lens, out, FIRST=first)
    last = (np.clip(lens, 1, 48) - 1) // 16
    np.testing.assert_array_equal(out, cache[table[np.arange(4), np.minimum(first // 16, last)], :, 0])
