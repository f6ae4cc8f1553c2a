"""Chunked prefill over a paged KV cache (`asyncdsl.kernels.paged_prefill`) in the interpreter
against float64 attention over each sequence's gathered pages: page sizes 16 and 64, grouped
k/v heads, chunks of length 0 and 1 and longer than a CTA's rows, the whole context in one
chunk; a bad block table reads zeros or is cut to its pages, never outside the cache; no row of
another sequence is written; page sizes and shapes the kernel does not take are refused while
tracing; every configuration through ptxas with no spill."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.paged_prefill import paged_prefill_kernel, reference
from asyncdsl.runtime.ptxas import assemble

BF16 = ml_dtypes.bfloat16


def batch(chunks, contexts, page, heads=2, kv_heads=1, d=64, pages=48, max_pages=16, seed=1):
    """Random q, caches and a block table of distinct random pages for each sequence."""
    rng = np.random.default_rng(seed)
    cu_q = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], heads, d)).astype(BF16)
    k_cache, v_cache = (rng.standard_normal((pages, page, kv_heads, d)).astype(BF16) for _ in range(2))
    table = np.stack([rng.permutation(pages)[:max_pages] for _ in chunks]).astype(np.int32)
    return q, k_cache, v_cache, table, np.array(contexts, np.int32), cu_q


def check(o, lse, expected_o, expected_lse):
    np.testing.assert_allclose(o.astype(np.float64), expected_o, atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-3, rtol=0)


@pytest.mark.parametrize("page,chunks,contexts,heads,kv_heads,d", [
    (16, (5, 0, 70, 1), (40, 0, 200, 1), 2, 1, 64),
    (64, (5, 0, 70, 1), (40, 0, 200, 1), 2, 1, 64),
    (64, (130, 3), (130, 250), 4, 2, 128),  # a whole context in one chunk; a chunk of 3 after 247
    (16, (17,), (100,), 1, 1, 256),
])
def test_paged_prefill_matches_float64(page, chunks, contexts, heads, kv_heads, d):
    q, k_cache, v_cache, table, seq_lens, cu_q = batch(chunks, contexts, page, heads, kv_heads, d)
    o, lse = K.paged_prefill(q, k_cache, v_cache, table, seq_lens, cu_q, max(chunks))
    check(o, lse, *reference(q, k_cache, v_cache, table, seq_lens, cu_q))


def test_a_table_that_is_not_whole_blocks_is_read_only_within_its_width():
    """Pages of 16 go four to a block of 64 keys: a table of 5 pages ends inside the second
    block, whose pieces past it read the last entry, masked as past the length."""
    q, k_cache, v_cache, table, seq_lens, cu_q = batch((9, 30), (80, 75), 16, max_pages=5)
    o, lse = K.paged_prefill(q, k_cache, v_cache, table, seq_lens, cu_q, 30)
    check(o, lse, *reference(q, k_cache, v_cache, table, seq_lens, cu_q))


def test_padding_entries_past_a_sequences_last_page_are_never_read():
    """A block of 64 keys over pages of 16 runs past a sequence's last page: the entries after
    it are padding (here page 0, full of NaN, as an uninitialised pool may be) and never read."""
    q, k_cache, v_cache, table, _, cu_q = batch((3, 5), (0, 0), 16, max_pages=8)
    table[:, 2:] = 0
    k_cache[0], v_cache[0] = np.nan, np.nan
    table[:, :2] = np.where(table[:, :2] == 0, 1, table[:, :2])  # the live pages hold numbers
    seq_lens = np.array([20, 32], np.int32)
    o, lse = K.paged_prefill(q, k_cache, v_cache, table, seq_lens, cu_q, 5)
    assert not np.isnan(o.astype(np.float32)).any()
    check(o, lse, *reference(q, k_cache, v_cache, table, seq_lens, cu_q))


@pytest.mark.parametrize("page", (16, 64))
def test_one_block_in_flight_is_enough_whatever_the_page_size(page):
    """A block of 64 keys is one slot of the ring, gathered from four pages of 16 or one of 64:
    a ring of one slot streams it (keys and values freed on their own barriers), no hang."""
    q, k_cache, v_cache, table, seq_lens, cu_q = batch((9, 30), (130, 75), page, max_pages=12)
    o, lse = np.zeros_like(q), np.zeros((q.shape[1], len(q)), np.float32)
    paged_prefill_kernel.interpret(q, k_cache, v_cache, o, lse, table, seq_lens, cu_q, 30, STAGES=1)
    check(o, lse, *reference(q, k_cache, v_cache, table, seq_lens, cu_q))


def test_a_bad_table_reads_zeros_or_is_cut_to_its_pages():
    """Page numbers past the cache and below 0 read zero keys and values (a score of 0 each);
    a length past the table's pages is cut to them."""
    q, k_cache, v_cache, table, _, cu_q = batch((4, 4), (0, 0), 16, max_pages=4)
    table[0, 1], table[0, 2] = 1000, -3
    seq_lens = np.array([60, 500], np.int32)  # the second runs past its 4 pages of 16
    o, lse = K.paged_prefill(q, k_cache, v_cache, table, seq_lens, cu_q, 4)
    zero_pages = np.concatenate([k_cache, np.zeros_like(k_cache[:1])]), \
        np.concatenate([v_cache, np.zeros_like(v_cache[:1])])
    safe_table = np.where((table < 0) | (table >= len(k_cache)), len(k_cache), table).astype(np.int32)
    check(o, lse, *reference(q, *zero_pages, safe_table, np.array([60, 64], np.int32), cu_q))


def test_only_the_sequences_rows_are_written():
    q, k_cache, v_cache, table, seq_lens, cu_q = batch((30, 1, 90), (60, 9, 90), 64)
    o, lse = np.full_like(q, 7.0), np.full((2, len(q)), -5.0, np.float32)
    one = np.array([cu_q[1], cu_q[2]], np.int32)  # the middle sequence alone
    table, seq_lens = table[1:2].copy(), seq_lens[1:2].copy()  # fresh arrays: TMA-aligned
    K.paged_prefill(q, k_cache, v_cache, table, seq_lens, one, 1, out=o, lse=lse)
    expected_o, expected_lse = reference(q, k_cache, v_cache, table, seq_lens, one)
    check(o[30:31], lse[:, 30:31], expected_o[30:31], expected_lse[:, 30:31])
    others = np.ones(len(q), bool)
    others[30] = False
    assert (o[others].astype(np.float32) == 7.0).all() and (lse[:, others] == -5.0).all()


def _specs(page=64, d=128, heads=32, kv_heads=8, cache_heads=None, lse_shape=None, batch=16, cu=None,
           dtype=ad.bfloat16):
    q = ad.ArraySpec((4096, heads, d), dtype)
    cache = ad.ArraySpec((2048, page, cache_heads or kv_heads, d), dtype)
    return (q, cache, cache, q, ad.ArraySpec(lse_shape or (heads, 4096), ad.float32),
            ad.ArraySpec((batch, 128), ad.int32), ad.ArraySpec((batch,), ad.int32),
            ad.ArraySpec((cu or batch + 1,), ad.int32), 512)


@pytest.mark.parametrize("page,d", [(16, 64), (16, 128), (16, 256), (64, 64), (64, 128), (64, 256)])
def test_paged_prefill_assembles_without_spills_or_advisories(page, d):
    _, log = assemble(paged_prefill_kernel.ptx(*_specs(page, d)), verbose=True)
    assert not re.search(r"C75\d\d", log), log
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"], log


@pytest.mark.parametrize("change,fragment", [
    (dict(page=32), "page size 32: this kernel takes pages of 16 or 64 tokens"),
    (dict(kv_heads=6), "32 query heads cannot be grouped over 6"),
    (dict(dtype=ad.float16), "q, the caches and o must be bfloat16, got float16"),
    (dict(lse_shape=(4096, 32)), r"lse has shape \(4096, 32\), expected \(32, 4096\)"),
    (dict(cu=16), r"seq_lens must be \(B,\), cu_seqlens_q \(B \+ 1,\)"),
])
def test_what_the_kernel_does_not_take_is_refused_while_tracing(change, fragment):
    with pytest.raises(ad.TraceError, match=fragment):
        paged_prefill_kernel.ptx(*_specs(**change))
