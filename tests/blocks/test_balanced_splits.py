"""The balanced split schedule (`asyncdsl.blocks.balanced_splits`): on random lengths (empty,
negative, past the table, a few long among many short) every block of every sequence is taken by
exactly one slot's piece, pieces never exceed the chunk, the extra splits fit the units, pieces
of a sequence of several splits go to distinct workspace slots in split order and each such
sequence has one merge; the plan kernel writes numpy's plan (`host_plan`) bit for bit; the
docstring's example says what it shows; and the one-pass merge of a device-known number of
splits is the softmax over all of them."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

import asyncdsl as ad
from asyncdsl.blocks import balanced_splits
from asyncdsl.blocks.balanced_splits import (
    DIRECT,
    IDLE,
    MERGE,
    MIN_BLOCKS,
    PART,
    SEQ,
    SPLIT,
    SPLITS,
    SplitBudget,
    host_plan,
    write_plan,
)
from asyncdsl.blocks.split_kv_merge import merge_splits_in_order


def pieces(plan, lens, capacity, size):
    """What each grid slot does, as `SplitWork` reads the plan: (slot, b, split, first, count,
    part or None for a direct write), idle slots left out; and each sequence's blocks."""
    blocks = (np.clip(np.asarray(lens, np.int64), 0, capacity) + size - 1) // size
    found = []
    for slot in range(plan.shape[1]):
        b, k = int(plan[SEQ, slot]), int(plan[SPLIT, slot])
        if b == IDLE:
            continue
        splits = int(plan[SPLITS, b])
        first = k * blocks[b] // splits
        part = None if splits == 1 else int(plan[PART, b]) + k
        found.append((slot, b, k, first, (k + 1) * blocks[b] // splits - first, part))
    return found, blocks


def check_plan(plan, lens, capacity, size, units, max_splits=None):
    batch = len(lens)
    found, blocks = pieces(plan, lens, capacity, size)
    chunk = max(MIN_BLOCKS, -(-int(blocks.sum()) // units))
    taken = [np.zeros(n, int) for n in blocks]
    for _slot, b, _k, first, count, _part in found:
        taken[b][first:first + count] += 1
        assert count <= chunk or max_splits is not None  # a bound on the splits makes longer pieces
        assert count >= 1 or blocks[b] == 0
    assert all((t == 1).all() for t in taken), "every block exactly once"
    assert sorted((b, k) for _, b, k, *_ in found) == [(b, k) for b in range(batch)
                                                        for k in range(plan[SPLITS, b])]
    assert [slot for slot, _, k, *_ in found if k == 0] == [units + b for b in range(batch)]
    parts = [(b, k, part) for _, b, k, _, _, part in found if part is not None]
    slots = sorted(part for *_, part in parts)
    assert slots == list(range(len(slots))) and len(slots) <= 2 * units, "distinct, packed slots"
    assert all(part - k == plan[PART, b] for b, k, part in parts)
    multi = [b for b in range(batch) if plan[SPLITS, b] > 1]
    assert list(plan[MERGE, :len(multi)]) == multi and (plan[MERGE, len(multi):units] == IDLE).all()
    assert all(plan[PART, b] == DIRECT for b in range(batch) if plan[SPLITS, b] == 1)


lengths = st.lists(st.one_of(st.integers(-5, 300), st.integers(0, 5000), st.just(0)), min_size=1, max_size=70)


@settings(max_examples=examples(200), deadline=None)
@given(lens=lengths, units=st.integers(1, 140), size=st.sampled_from([32, 64]),
       width=st.integers(1, 80), max_splits=st.sampled_from([None, None, 1, 2, 5]))
def test_every_block_of_every_sequence_is_taken_once(lens, units, size, width, max_splits):
    capacity = 16 * width
    plan = host_plan(lens, capacity, size, units, max_splits)
    check_plan(plan, lens, capacity, size, units, max_splits)
    if max_splits is not None:
        assert plan[SPLITS, :len(lens)].max() <= max_splits


def test_the_long_sequences_take_the_splits_and_the_short_ones_one_each():
    lens = [100] * 30 + [20000, 6000]
    plan = host_plan(lens, 32768, 64, units=33)
    blocks = -(-np.array(lens) // 64)  # 2 each, 313 and 94: 467 in all, 15 a piece
    assert list(plan[SPLITS, :32]) == [1] * 30 + [21, 7]
    assert list(plan[SEQ, :33]) == [30] * 20 + [31] * 6 + [IDLE] * 7  # the extra splits first
    check_plan(plan, lens, 32768, 64, 33)
    assert max(count for *_, count, _ in pieces(plan, lens, 32768, 64)[0]) == 15 == -(-blocks.sum() // 33)


def test_the_budget_gives_the_launch_shapes():
    budget = SplitBudget.make(batch=32, kv_heads=8, ctas=264)
    assert (budget.units, budget.slots, budget.workspace, budget.plan_shape) == (33, 65, 66, (5, 65))
    assert SplitBudget.make(batch=1, kv_heads=8, ctas=132).units == 16  # 8 heads × 16 ≤ 132 CTAs
    assert SplitBudget.make(batch=1, kv_heads=64, ctas=4).units == 1


def test_the_docstring_example_says_what_it_shows():
    names = run_example(balanced_splits)
    assert (names["budget"].units, names["budget"].slots, names["budget"].workspace) == (4, 7, 8)
    assert list(names["plan"][SPLITS, :3]) == [1, 1, 3]
    assert list(names["plan"][SEQ]) == [2, 2, -1, -1, 0, 1, 2]
    assert list(names["plan"][SPLIT, :2]) == [1, 2]


@ad.kernel(grid=(1,), block=128)
def planned(lens, plan, CAPACITY: ad.constexpr, SIZE: ad.constexpr, MAX_SPLITS: ad.constexpr = None):
    write_plan(plan, lens, CAPACITY, SIZE, MAX_SPLITS)


@pytest.mark.parametrize("batch,units,max_splits", [(3, 4, None), (70, 9, None), (5, 130, None),
                                                     (130, 33, None), (40, 20, 3)])
def test_the_plan_kernel_writes_numpys_plan(batch, units, max_splits):
    """Several steps of 64 sequences and of 64 unit slots; a long sequence among short ones
    (the extra splits cross a step of 64 sequences), empty, negative and too long lengths."""
    rng = np.random.default_rng(batch)
    lens = rng.integers(0, 400, batch).astype(np.int32)
    lens[rng.integers(0, batch, 3)] = rng.integers(3000, 9000, 3)
    lens[0], lens[-1] = 0, -7
    lens[batch // 2] = 1 << 20  # past the table: counts its 8192 positions
    plan = np.full((5, units + batch), 12345, np.int32)
    planned.interpret(lens, plan, CAPACITY=8192, SIZE=64, MAX_SPLITS=max_splits)
    expected = host_plan(lens, 8192, 64, units, max_splits)
    written = np.ones(expected.shape, bool)
    written[[SPLITS, PART], batch:] = False  # per sequence: the first B columns
    written[MERGE, units:] = False
    np.testing.assert_array_equal(plan[written], expected[written])
    assert (expected[SPLITS, :batch] > 1).sum() >= 1
    check_plan(plan, lens, 8192, 64, units, max_splits)


@ad.kernel(grid=(1,), block=128)
def merged_in_order(parts, lses, counts, out):  # parts (C, 64, D), lses (C, 64), counts (1,) int32
    o, _ = merge_splits_in_order(ad.load_index(counts.at[0]),
                                 lambda c: ad.load(parts.at[c], layout=ad.WGMMA),
                                 lambda c: ad.load(lses.at[c], layout=ad.WGMMA_ROW), 64, parts.shape[2])
    ad.store(out, o)


@pytest.mark.parametrize("count", [1, 2, 5])
def test_the_one_pass_merge_is_the_softmax_over_every_split(count):
    rng = np.random.default_rng(count)
    scores, values = rng.standard_normal((64, 10 * count)) * 4, rng.standard_normal((10 * count, 64))
    parts, lses = [], []
    for chunk in np.split(np.arange(10 * count), count):
        top = scores[:, chunk].max(axis=1, keepdims=True)
        e = np.exp(scores[:, chunk] - top)
        parts.append(e @ values[chunk] / e.sum(axis=1, keepdims=True))
        lses.append(top[:, 0] + np.log(e.sum(axis=1)))
    parts, lses = np.array(parts + [parts[0] * np.nan], np.float32), np.array(lses + [lses[0]], np.float32)
    out = np.full((64, 64), np.nan, np.float32)
    merged_in_order.interpret(parts, lses, np.array([count], np.int32), out)  # the NaN part unread
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e @ values / e.sum(axis=1, keepdims=True), atol=2e-5, rtol=1e-5)
