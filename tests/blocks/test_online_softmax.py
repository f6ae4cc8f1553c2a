"""The online softmax (`asyncdsl.blocks.online_softmax`) in the interpreter: scores that arrive a
block of columns at a time give the log-sum-exp and the softmax-weighted sums of the whole rows,
against float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.blocks import online_softmax


@pytest.mark.parametrize("blocks,spread", [(1, 1.0), (3, 4.0), (4, 30.0)])
def test_the_docstring_example_matches_the_softmax_of_whole_rows(blocks, spread):
    """Rows whose maximum moves from block to block (wide spread: α far from 1) and a single
    block (no rescaling at all)."""
    weighted = run_example(online_softmax)["weighted"]
    rng = np.random.default_rng(blocks)
    x = (rng.standard_normal((64, 64 * blocks)) * spread).astype(np.float32)
    x[:, -64:] += np.linspace(0, spread, 64, dtype=np.float32)[:, None]  # later maxima in some rows
    v = rng.standard_normal((64, 64 * blocks)).astype(np.float32)
    o, lse = np.full((64, 64), np.nan, np.float32), np.full(64, np.nan, np.float32)
    weighted.interpret(x, v, o, lse)
    wide = x.astype(np.float64)
    top = wide.max(axis=1, keepdims=True)
    e = np.exp(wide - top)
    total = e.sum(axis=1, keepdims=True)
    expected_o = ((e / total) * v).reshape(64, blocks, 64).sum(axis=1)
    np.testing.assert_allclose(lse, (top + np.log(total))[:, 0], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(o, expected_o, rtol=1e-5, atol=1e-6)


@settings(max_examples=examples(6), deadline=None)
@given(blocks=st.integers(1, 3), spread=st.floats(0.1, 50.0), seed=st.integers(0, 2**16))
def test_the_log_sum_exp_does_not_depend_on_the_order_of_the_blocks(blocks, spread, seed):
    """ln Σ e^x over a row is the same whichever block comes first: the running maximum and the
    rescaling by α make the blocked sum the whole row's, up to float32 rounding."""
    weighted = run_example(online_softmax)["weighted"]
    x = (np.random.default_rng(seed).standard_normal((64, 64 * blocks)) * spread).astype(np.float32)
    v = np.ones_like(x)
    lse, lse_reversed = (np.full(64, np.nan, np.float32) for _ in range(2))
    weighted.interpret(x, v, np.zeros((64, 64), np.float32), lse)
    reversed_blocks = np.ascontiguousarray(x.reshape(64, blocks, 64)[:, ::-1].reshape(64, -1))
    weighted.interpret(reversed_blocks, v, np.zeros((64, 64), np.float32), lse_reversed)
    np.testing.assert_allclose(lse, lse_reversed, rtol=1e-6, atol=1e-5)
