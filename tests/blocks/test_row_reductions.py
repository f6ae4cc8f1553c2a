"""Reductions along rows over pieces (`accumulate`) and over warpgroups (`combine`,
`across_warpgroups`), in the interpreter against numpy."""

from __future__ import annotations

import operator

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import row_reductions
from asyncdsl.blocks.row_reductions import across_warpgroups


@pytest.mark.parametrize("n,width", [(3000, 1024), (1024, 1024), (5, 256)])
def test_the_docstring_example_takes_each_rows_maximum_over_its_pieces(n, width):
    row_peaks = run_example(row_reductions)["row_peaks"]
    x = (np.random.default_rng(n).standard_normal((4, n)) - 10).astype(ml_dtypes.bfloat16)  # all below 0
    peaks = np.full(4, np.nan, np.float32)
    row_peaks.interpret(x, peaks, WIDTH=width)
    assert np.array_equal(peaks, x.astype(np.float32).max(axis=1))  # the -inf padding never wins


@ad.kernel(grid=(1,), block=128 * 3)
def summed_in_turn(x, y):
    """Three warpgroups each sum a third of the row, then fold the thirds in their order."""
    me = ad.warpgroup_idx()
    third = x.shape[1] // 3
    part = ad.load(x.at[:, ad.ds(me * third, third)]).sum(axis=1)
    total = across_warpgroups(ad.smem((3, 1), ad.float32), me, part, operator.add)
    with ad.when(me == 2):
        ad.store(y.at[...], total)


def test_across_warpgroups_folds_the_parts_in_their_order_in_every_warpgroup():
    # float32 sums of these thirds differ by the order of the fold: (a + b) + c is 1, a + (b + c) 0.
    x = np.zeros((1, 384), np.float32)
    x[0, 0], x[0, 128], x[0, 256] = 2.0 ** 24, -(2.0 ** 24), 1.0
    y = np.full(1, np.nan, np.float32)
    summed_in_turn.interpret(x, y)
    assert y[0] == 1.0
    x[0, 0], x[0, 128], x[0, 256] = 1.0, 2.0 ** 24, -(2.0 ** 24)
    summed_in_turn.interpret(x, y)
    assert y[0] == 0.0  # (1 + 2^24) rounds to 2^24 first
