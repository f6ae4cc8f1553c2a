"""Merging split-KV parts (`asyncdsl.blocks.split_kv_merge`) in the interpreter: the merge of
the parts of any split of a row's keys is the softmax-weighted sum over all of them (float64
numpy), and a part that saw no key weighs nothing."""

from __future__ import annotations

import numpy as np
from docstring_examples import run_example
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.blocks import split_kv_merge


def parts_of(scores, values, cuts):
    """Each chunk's normalised output and log-sum-exp, as a split's CTA would give them."""
    parts, lses = [], []
    for chunk in np.split(np.arange(scores.shape[1]), cuts):
        s = scores[:, chunk]
        top = s.max(axis=1, keepdims=True)
        e = np.exp(s - top)
        parts.append(e @ values[chunk] / e.sum(axis=1, keepdims=True))
        lses.append((top + np.log(e.sum(axis=1, keepdims=True)))[:, 0])
    return np.array(parts, np.float32), np.array(lses, np.float32)


@settings(max_examples=examples(6), deadline=None)
@given(seed=st.integers(0, 2**16), cuts=st.lists(st.integers(1, 95), min_size=1, max_size=4, unique=True),
       spread=st.floats(0.1, 20.0))
def test_merging_the_parts_of_any_split_gives_the_whole_softmax(seed, cuts, spread):
    merged = run_example(split_kv_merge)["merged"]
    rng = np.random.default_rng(seed)
    scores, values = rng.standard_normal((64, 96)) * spread, rng.standard_normal((96, 64))
    parts, lses = parts_of(scores, values, sorted(cuts))
    out = np.full((64, 64), np.nan, np.float32)
    merged.interpret(parts, lses, out)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e @ values / e.sum(axis=1, keepdims=True), atol=2e-5, rtol=1e-5)


def test_a_part_that_saw_no_key_weighs_nothing():
    merged = run_example(split_kv_merge)["merged"]
    rng = np.random.default_rng(1)
    parts = rng.standard_normal((3, 64, 64)).astype(np.float32)
    lses = rng.standard_normal((3, 64)).astype(np.float32)
    lses[1] = -1e29  # what a split with only hidden keys reports
    out = np.full((64, 64), np.nan, np.float32)
    merged.interpret(parts, lses, out)
    w = np.exp(lses[[0, 2]] - lses[[0, 2]].max(axis=0))
    np.testing.assert_allclose(out, (parts[[0, 2]] * w[..., None]).sum(0) / w.sum(0)[:, None], atol=2e-6)
