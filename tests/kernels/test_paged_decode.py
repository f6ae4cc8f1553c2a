"""The paged decode (`asyncdsl.kernels.paged_decode_attention`) in the interpreter against a
float64 reference: page sizes 16 and 64, head dims 64 and 128, grouped query heads, 1 to 8
queries a sequence (causal within them), ragged lengths down to 1 (and 0), skewed batches whose
long sequences the balanced schedule splits (merged in order, the same bits every call), fp8
caches with scales; a block table naming pages past the cache or a length past the
table is reported at the caller's line (and compiled as checks under ASYNCDSL_DEBUG=1); shapes
the kernel does not take are refused at trace time; every configuration assembles with ptxas."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
import asyncdsl.kernels.paged_decode as module
from asyncdsl.blocks.balanced_splits import SPLITS, SplitBudget, host_plan
from asyncdsl.kernels.paged_decode import paged_decode_kernel, paired_decode_kernel
from asyncdsl.kernels.paged_decode_config import ring_stages
from asyncdsl.kernels.paged_decode_reference import reference
from asyncdsl.kernels.paged_decode_splits import merge_kernel, plan_kernel
from asyncdsl.runtime.ptxas import assemble

BF16 = ml_dtypes.bfloat16
# p and o are bf16: a few bf16 ulps of outputs of magnitude up to about 1.
TOLERANCE = 2e-2


def inputs(batch, queries, heads, kv_heads, d, page, pages, max_pages, lens, dtype=BF16, seed=0):
    """Random q and caches, a block table of random pages (sequences may share one, as with a
    shared prefix), and the lengths."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, queries, heads, d)).astype(BF16)
    k, v = (rng.standard_normal((pages, page, kv_heads, d)).astype(dtype) for _ in range(2))
    table = rng.integers(0, pages, (batch, max_pages), dtype=np.int32)
    return q, k, v, table, np.array(lens, np.int32)


def check(got, expected):
    np.testing.assert_allclose(got.astype(np.float64), expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("page,d,heads,kv_heads,lens,splits,block", [
    (16, 64, 4, 2, (1, 50, 17), 1, 64),          # ragged, one key only, pages not whole
    (16, 128, 8, 1, (64, 3), None, 64),          # eight heads a group
    (64, 64, 2, 2, (130, 1), None, 64),          # no grouping, two pages of 64
    (64, 128, 4, 1, (256, 64), None, 32),        # eight blocks of 32: two splits of four
    (64, 64, 4, 2, (100, 33), None, 32),         # blocks of half a page
])
def test_one_query_a_sequence_matches_float64(page, d, heads, kv_heads, lens, splits, block):
    q, k, v, table, seq_lens = inputs(len(lens), 1, heads, kv_heads, d, page, 16, 256 // page, lens)
    o = K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, splits=splits, block=block)
    assert o.shape == (len(lens), heads, d) and o.dtype == BF16
    check(o, reference(q[:, 0], k, v, table, seq_lens)[:, 0])


@pytest.mark.parametrize("queries,heads,splits", [(4, 8, 1), (8, 8, None), (2, 4, 1)])
def test_several_queries_see_keys_up_to_their_own(queries, heads, splits):
    q, k, v, table, seq_lens = inputs(2, queries, heads, 1, 64, 16, 12, 20, (queries, 300))
    if splits is None:  # the long sequence's queries see keys of several pieces, merged in order
        assert planned(seq_lens, 1, 320, 32).max() > 1
    o = K.paged_decode_attention(q, k, v, table, seq_lens, splits=splits, block=32)
    check(o, reference(q, k, v, table, seq_lens))


def planned(seq_lens, kv_heads, capacity, block, ctas_per_sm=module.CTAS_PER_SM):
    """The splits the host function plans for each sequence in the interpreter."""
    units = SplitBudget.make(len(seq_lens), kv_heads, ctas_per_sm * module.HOST_SMS).units
    return host_plan(seq_lens, capacity, block, units)[SPLITS, :len(seq_lens)]


# Skewed batches: one long sequence among short ones (which the schedule splits, the others
# not), empty ones, one key, exactly a block; pages of 16 and 64, several queries, fp8.
@pytest.mark.parametrize("page,queries,heads,kv_heads,lens,block,fp8", [
    (16, 1, 4, 2, (0, 1, 64, 700, 5, 33), 64, False),
    (64, 1, 8, 1, (640, 0, 1, 32), 32, False),
    (16, 4, 8, 2, (4, 64, 500, 9), 32, False),
    (64, 2, 4, 1, (130, 2, 520), 64, True),
    (16, 1, 4, 1, (1000,), 64, False),                 # one long sequence alone
])
def test_a_skewed_batch_is_split_where_it_is_long(page, queries, heads, kv_heads, lens, block, fp8):
    width = -(-max(lens) // page)
    dtype = ml_dtypes.float8_e4m3fn if fp8 else BF16
    q, k, v, table, seq_lens = inputs(len(lens), queries, heads, kv_heads, 64, page, 3 * width, width, lens,
                                      dtype)
    splits = planned(seq_lens, kv_heads, width * page, block)
    long = int(np.argmax(lens))
    assert splits[long] > 1 and (np.delete(splits, long) == 1).all(), splits
    scales = {"k_scale": np.float32(0.5), "v_scale": np.array([2.0], np.float32)} if fp8 else {}
    o = K.paged_decode_attention(q, k, v, table, seq_lens, block=block, **scales)
    check(o, reference(q, k, v, table, seq_lens, **({"k_scale": 0.5, "v_scale": 2.0} if fp8 else {})))


def test_fp8_caches_are_dequantised_by_their_scales():
    q, k, v, table, seq_lens = inputs(2, 1, 4, 2, 64, 16, 12, 4, (37, 64), dtype=ml_dtypes.float8_e4m3fn)
    o = K.paged_decode_attention(q, k, v, table, seq_lens, k_scale=np.float32(0.5),
                                 v_scale=np.array([2.0], np.float32))
    check(o, reference(q, k, v, table, seq_lens, k_scale=0.5, v_scale=2.0))


@pytest.mark.parametrize("page,ctas_per_sm", [(16, 1), (16, 2), (64, 1)])
def test_pages_gathered_by_the_threads_cp_async_give_the_bytes_of_tma_copies(page, ctas_per_sm):
    """Both builds; a long sequence split, a short one, an empty one."""
    lens = (700, 5, 0)
    width = -(-max(lens) // page)
    q, k, v, table, seq_lens = inputs(len(lens), 1, 8, 2, 128, page, 3 * width, width, lens)
    by_tma, by_threads = (K.paged_decode_attention(q, k, v, table, seq_lens, ctas_per_sm=ctas_per_sm,
                                                   gather=gather) for gather in ("tma", "cp_async"))
    assert np.array_equal(by_tma.view(np.uint16), by_threads.view(np.uint16))
    check(by_threads, reference(q, k, v, table, seq_lens))


@pytest.mark.parametrize("ctas_per_sm", [1, 4])
def test_splits_merge_in_order_to_the_same_bytes_every_call(ctas_per_sm):
    q, k, v, table, seq_lens = inputs(3, 1, 4, 1, 64, 16, 40, 40, (600, 20, 300))
    assert (planned(seq_lens, 1, 640, 64, ctas_per_sm) > 1).sum() == 2
    first, again = (K.paged_decode_attention(q, k, v, table, seq_lens, ctas_per_sm=ctas_per_sm)
                    for _ in range(2))
    assert np.array_equal(first.view(np.uint16), again.view(np.uint16))
    check(first, reference(q, k, v, table, seq_lens))


def test_one_split_a_sequence_launches_no_merge(monkeypatch):
    launched = []
    monkeypatch.setattr(module, "launch", lambda kernel, *args, **options: launched.append(kernel))
    q, k, v, table, seq_lens = inputs(1, 1, 4, 1, 64, 16, 40, 40, (600,))
    K.paged_decode_attention(q, k, v, table, seq_lens, splits=1)
    assert launched == [plan_kernel, paged_decode_kernel]


@pytest.mark.parametrize("entry,lens,message", [
    (8, (40, 33, 20), "a block table entry names no page of the cache's 8"),     # just past the cache
    (-3, (40, 33, 20), "a block table entry names no page of the cache's 8"),
    (2, (40, 33, 1000), "a sequence length runs past its block table's 48 positions"),
])
def test_a_bad_block_table_is_reported_at_the_callers_line(entry, lens, message):
    q, k, v, table, _ = inputs(3, 1, 2, 1, 64, 16, 8, 3, (0, 0, 0))
    table[1, 1] = entry
    with pytest.raises(ad.AssumptionError, match=message) as caught:
        K.paged_decode_attention(q[:, 0], k, v, table, np.array(lens, np.int32), block=32)
    assert caught.value.location.file == __file__


def test_an_entry_past_a_sequences_length_is_never_looked_at():
    """Table entries beyond a sequence's last page are padding: whatever they hold, nothing is
    reported and the result is the same."""
    q, k, v, table, seq_lens = inputs(2, 1, 2, 1, 64, 16, 8, 4, (20, 64))
    padded = table.copy()
    padded[0, 2:] = (-1, 1 << 30)
    ours, theirs = (K.paged_decode_attention(q[:, 0], k, v, t, seq_lens, block=32) for t in (table, padded))
    assert np.array_equal(ours.view(np.uint16), theirs.view(np.uint16))


def test_debug_mode_compiles_the_table_checks(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    compiled = paged_decode_kernel.compile(*specs())
    checks = compiled.binary.params[-1].checks
    # Beside the table's checks, the copies' own of their page coordinate, which the kernel
    # clamps into the cache: never failing, whatever the table holds.  Six a page (the page and
    # the head of the keys' two copies of 64 columns and of the values'), four pages of 16 a
    # block of 64 keys.
    copies = [check for check in checks if check.message.startswith("a traced index of a copy")]
    assert len(copies) == 6 * 4
    table = [check.message.split(" (")[0] for check in checks if check not in copies]
    assert list(dict.fromkeys(table)) == [  # each made where a block's scores are (the first, the rest)
        "a sequence length runs past its block table's 4096 positions",
        "a block table entry names no page of the cache's 1024"]
    assert all(check.file == __file__ for check in checks)  # the line that made the kernel
    assemble(compiled.ptx)


@pytest.mark.parametrize("splits", [1, None])
def test_padding_entries_past_a_sequences_last_page_are_never_read(splits):
    """A block of 64 keys over pages of 16 runs past a sequence's last page: the entries after
    it are padding (here page 0, full of NaN, as an uninitialised pool may be) and never read."""
    q, k, v, table, _ = inputs(2, 1, 4, 1, 64, 16, 8, 8, (0, 0))
    table[:, 2:] = 0
    table[:, :2] = np.where(table[:, :2] == 0, 1, table[:, :2])  # the live pages hold numbers
    k[0], v[0] = np.nan, np.nan
    seq_lens = np.array([20, 32], np.int32)
    o = K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, splits=splits, block=32)
    assert not np.isnan(o.astype(np.float32)).any()
    check(o, reference(q[:, 0], k, v, table, seq_lens)[:, 0])


def test_an_empty_sequence_gives_zeros():
    q, k, v, table, seq_lens = inputs(2, 1, 2, 1, 64, 16, 8, 4, (0, 5))
    o = K.paged_decode_attention(q[:, 0], k, v, table, seq_lens)
    assert not o[0].astype(np.float32).any()
    check(o, reference(q[:, 0], k, v, table, seq_lens)[:, 0])


@pytest.mark.parametrize("page", [16, 64])
def test_the_plan_counts_blocks_of_64_keys_whatever_the_page_size(page, monkeypatch):
    """512 positions are eight blocks of 64 keys in pages of 16 as in pages of 64: two splits of
    four (a block per page of 16 would have counted 32 blocks)."""
    launched = []
    monkeypatch.setattr(module, "launch", lambda kernel, *args, **options: launched.append(options))
    q, k, v, table, seq_lens = inputs(1, 1, 8, 1, 64, page, 64, 512 // page, (512,))
    K.paged_decode_attention(q[:, 0], k, v, table, seq_lens)
    assert launched[0]["BK"] == 64 and launched[0]["CAPACITY"] == 512
    assert list(planned(seq_lens, 1, 512, 64)) == [2]


def test_the_ring_follows_the_ctas_a_multiprocessor_holds_at_once():
    """The single build takes a multiprocessor's registers (blocks of 64 keys need more than the
    128 a thread two CTAs of 256 threads could each have) and a ring of 200 KiB; the paired build
    starts at 128, hands the producer's share to the consumer, and takes half the shared memory."""
    assert ring_stages(64, 128) == 5
    assert ring_stages(64, 64, 2) == 6 and ring_stages(64, 128, 2) == 2  # two: 113 KiB each beside q
    for d in (64, 128):
        _, log = assemble(paged_decode_kernel.ptx(*specs(d=d)), verbose=True)
        assert int(re.findall(r"Used (\d+) registers", log)[0]) > 65536 // (2 * 256), (d, log)
        ptx = paired_decode_kernel.ptx(*specs(d=d))
        assert ".maxnreg 128" in ptx and "setmaxnreg.inc.sync.aligned.u32 216;" in ptx
        assert "Used 128 registers" in assemble(ptx, verbose=True)[1]


@pytest.mark.parametrize("ctas_per_sm,kernel", [(1, "paged_decode_kernel"), (2, "paired_decode_kernel"),
                                                (4, "paired_decode_kernel")])
def test_a_plan_for_two_ctas_a_multiprocessor_or_more_runs_on_the_paired_build(ctas_per_sm, kernel,
                                                                                monkeypatch):
    launched = []
    monkeypatch.setattr(module, "launch", lambda k, *args, **options: launched.append((k, options)))
    q, k, v, table, seq_lens = inputs(1, 1, 8, 1, 128, 16, 64, 32, (512,))
    K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, ctas_per_sm=ctas_per_sm)
    decode, options = launched[1]
    assert decode is getattr(module, kernel)
    assert options["STAGES"] == ring_stages(64, 128, min(ctas_per_sm, 2))


def test_a_budget_it_does_not_plan_for_is_refused_at_the_callers_line():
    q, k, v, table, seq_lens = inputs(1, 1, 2, 1, 64, 16, 8, 4, (5,))
    for bad in (0, 5, True):
        with pytest.raises(ad.ArgumentError, match="ctas_per_sm, the CTAs a multiprocessor") as caught:
            K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, ctas_per_sm=bad)
        assert caught.value.location.file == __file__
    with pytest.raises(ad.ArgumentError, match="gather, how pages reach shared memory") as caught:
        K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, gather="ldg")
    assert caught.value.location.file == __file__
    with pytest.raises(ad.ArgumentError, match=r"q is \(B, H, D\) or \(B, Q, H, D\), got \(2, 64\)") as \
            caught:
        K.paged_decode_attention(q[0, 0], k, v, table, seq_lens)
    assert caught.value.location.file == __file__


def specs(batch=4, queries=1, heads=32, kv_heads=8, d=128, page=16, dtype=ad.bfloat16, units=33, pages=1024):
    rows = queries * heads
    return (ad.ArraySpec((batch, queries, heads, d), ad.bfloat16),
            *(ad.ArraySpec((pages, page, kv_heads, d), dtype) for _ in range(2)),
            ad.ArraySpec((batch, 4096 // page), ad.int32), ad.ArraySpec((batch,), ad.int32),
            ad.ArraySpec((2,), ad.float32), ad.ArraySpec((5, units + batch), ad.int32),
            ad.ArraySpec((batch, queries, heads, d), ad.bfloat16),
            ad.ArraySpec((2 * units, rows, d), ad.float32), ad.ArraySpec((2 * units, rows), ad.float32))


@pytest.mark.parametrize("page,d,dtype,queries", [
    (16, 128, ad.bfloat16, 1), (64, 128, ad.bfloat16, 1), (16, 64, ad.bfloat16, 8),
    (64, 64, ad.float8_e4m3fn, 1), (16, 128, ad.float8_e4m3fn, 4)])
@pytest.mark.parametrize("block", [32, 64])
@pytest.mark.parametrize("decode", [paged_decode_kernel, paired_decode_kernel], ids=["single", "paired"])
def test_the_paged_decode_assembles_without_spills_or_advisories(page, d, dtype, queries, block, decode):
    heads = 64 // queries if queries > 1 else 32
    kernel_ptx = decode.ptx(*specs(queries=queries, heads=heads, d=d, page=page, dtype=dtype),
                                         SCALED=dtype != ad.bfloat16, BK=block)
    _, log = assemble(kernel_ptx, verbose=True)
    assert not re.search(r"C75\d\d", log), log
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"], log


@pytest.mark.parametrize("d", [64, 128])
def test_the_merge_assembles_without_spills(d):
    f32 = ad.float32
    ptx = merge_kernel.ptx(ad.ArraySpec((5, 300), ad.int32), ad.ArraySpec((66, 96, d), f32),
                           ad.ArraySpec((66, 96), f32), ad.ArraySpec((267, 96, d), ad.bfloat16))
    _, log = assemble(ptx, verbose=True)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"], log


@pytest.mark.parametrize("batch,units", [(32, 33), (4000, 264)])
def test_the_plan_assembles_without_spills(batch, units):
    ptx = plan_kernel.ptx(ad.ArraySpec((batch,), ad.int32), ad.ArraySpec((5, units + batch), ad.int32),
                          CAPACITY=32768, BK=64)
    _, log = assemble(ptx, verbose=True)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"], log


@pytest.mark.parametrize("change,message", [
    (dict(page=32), "page size 32: the paged decode takes pages of 16 or 64"),
    (dict(d=96), "head dim 96: the paged decode takes 64 or 128"),
    (dict(queries=8, heads=16, kv_heads=1), "queries × group at most 64"),
    (dict(heads=12, kv_heads=8), "the heads must group evenly"),
    (dict(block=48), "BK, the positions of a step, must be 32 or 64"),
])
def test_shapes_the_kernel_does_not_take_are_refused_at_its_line(change, message):
    with pytest.raises(ad.TraceError, match=message) as caught:
        block = change.pop("block", 64)
        paged_decode_kernel.ptx(*specs(**change), BK=block)
    assert caught.value.location.file.endswith("paged_decode.py")


def test_a_workspace_of_other_slots_or_types_is_refused_at_its_line():
    *arguments, part, lse = specs()
    for bad in ((part, ad.ArraySpec((65, 32), ad.float32)), (part, ad.ArraySpec((66, 32), ad.bfloat16)),
                (ad.ArraySpec((66, 32), ad.float32), lse)):
        with pytest.raises(ad.TraceError, match=r"the workspace must be float32 parts \(slots, 32, 128\)"):
            paged_decode_kernel.ptx(*arguments, *bad)


def test_a_page_size_it_does_not_take_is_refused_through_the_host_function():
    q, k, v, table, seq_lens = inputs(1, 1, 2, 1, 64, 16, 8, 4, (5,))
    with pytest.raises(ad.TraceError, match="page size 8"):
        K.paged_decode_attention(q[:, 0], k.reshape(16, 8, 1, 64), v.reshape(16, 8, 1, 64), table, seq_lens)


@pytest.mark.parametrize("stages", [1, 7, "3"])
def test_a_ring_shared_memory_cannot_hold_or_too_short_to_stream_is_refused_at_the_callers_line(stages):
    q, k, v, table, seq_lens = inputs(1, 1, 2, 1, 128, 16, 4, 4, (40,))
    refusal = "STAGES, the key blocks in flight, must be an int from 2 to 6"
    with pytest.raises(ad.TraceError, match=refusal) as caught:
        K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, stages=stages)
    assert caught.value.location.file == __file__


def test_a_smaller_ring_gives_the_same_bytes():
    q, k, v, table, seq_lens = inputs(2, 1, 2, 1, 128, 16, 20, 16, (250, 77))
    ours, theirs = (K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, block=32, stages=stages)
                    for stages in (None, 2))
    assert np.array_equal(ours.view(np.uint16), theirs.view(np.uint16))


def test_a_ring_of_blocks_of_pages_takes_a_slot_and_a_barrier_a_block():
    """Pages of 16 in blocks of 64 keys: 13 blocks of head dim 64 fill a multiprocessor's shared
    memory, one barrier each; a paired build holds 6."""
    q, k, v, table, seq_lens = inputs(1, 1, 2, 1, 64, 16, 8, 8, (100,))
    K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, splits=1, stages=13)
    K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, splits=1, ctas_per_sm=2, stages=6)
    for ctas, most in ((1, 13), (2, 6)):
        with pytest.raises(ad.TraceError, match=f"must be an int from 2 to {most} "):
            K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, splits=1, ctas_per_sm=ctas,
                                     stages=most + 1)