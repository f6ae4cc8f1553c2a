"""The CTA work of attention forward (`asyncdsl.blocks.attention_forward`) in the interpreter: the
docstring's one-head kernel against float64 causal attention, on whole and ragged lengths; and
an online softmax of rows that see no key (`empty_rows`) giving 0 and -inf, not NaN; a paged
ring without the pages refused."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example
from support import expect

import asyncdsl as ad
from asyncdsl.blocks import attention_forward
from asyncdsl.blocks.online_softmax import OnlineSoftmax
from asyncdsl.blocks.paged_loads import PagedLoads


@pytest.mark.parametrize("length", [256, 200])
def test_the_docstring_example_is_causal_attention(length):
    one_head = run_example(attention_forward)["one_head"]
    rng = np.random.default_rng(length)
    q, k, v = (rng.standard_normal((length, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    o, lse = np.full_like(q, np.nan), np.full(length, np.nan, np.float32)
    one_head.interpret(q, k, v, o, lse)
    logits = q.astype(np.float64) @ k.astype(np.float64).T / 8
    logits[np.triu(np.ones((length, length), bool), 1)] = -np.inf
    top = logits.max(axis=1, keepdims=True)
    weights = np.exp(logits - top)
    total = weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(o.astype(np.float64), weights / total @ v.astype(np.float64), atol=2e-2)
    np.testing.assert_allclose(lse, (top + np.log(total))[:, 0], atol=1e-3)


@ad.kernel(block=128)
def masked_rows(x, o, lse):
    """Rows 0..31 of x see no column (all masked), the others all 64: one block of scores."""
    state = OnlineSoftmax(64, scale=1.4426950408889634, empty_rows=True)
    state.start()
    scores = ad.load(x, layout=ad.WGMMA)
    hidden = ad.iota((64, 64), ad.int32, 0) < 32
    p, _ = state.update(ad.where(hidden, -math.inf, scores), ad.float32)
    ad.store(o, state.normalize(p))
    ad.store(lse, state.log_sum_exp())


def test_rows_that_see_nothing_are_zero_with_a_log_sum_exp_of_minus_infinity():
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    o, lse = np.full((64, 64), np.nan, np.float32), np.full(64, np.nan, np.float32)
    masked_rows.interpret(x, o, lse)
    assert (o[:32] == 0).all() and np.isneginf(lse[:32]).all()
    wide = x[32:].astype(np.float64)
    np.testing.assert_allclose(lse[32:], np.log(np.exp(wide).sum(axis=1)), rtol=1e-6)
    np.testing.assert_allclose(o[32:], np.exp(wide) / np.exp(wide).sum(axis=1, keepdims=True), rtol=1e-5)


@ad.kernel(block=384)
def paged_without_pages(q, cache, o, lse):
    """A paged ring given rows with no `locate`: which page holds a key, it cannot know."""
    tile = attention_forward.QueryTile(128, 128, rows=128, BK=64, causal=True)
    loads = PagedLoads(64, 64, 16, 64, stages=2, parts=2, query_copied=True)
    rows = attention_forward.HeadRows(*(lambda start, count, x=x: x.at[ad.ds(start, count), :]
                                        for x in (q, cache, cache)))
    attention_forward.attend(tile, loads, rows, scale=0.18, finish=lambda *_: None)  # the call


def test_a_paged_ring_without_pages_is_refused_at_the_callers_line():
    spec = ad.ArraySpec((128, 64), ad.bfloat16)
    expect(ad.TraceError, paged_without_pages, (spec, spec, spec, ad.ArraySpec((128,), ad.float32)), {},
           "takes the page of each key from HeadRows.locate", line_text="the call")
