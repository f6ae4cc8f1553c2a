"""Column sums shared out over CTAs (`asyncdsl.blocks.partial_sums`) and finished in order
(`asyncdsl.kernels.column_sums`), in the interpreter: every row counted once, whatever the
number of CTAs, rows a block and rows of partial sums."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example

from asyncdsl.blocks import partial_sums
from asyncdsl.kernels.column_sums import sum_columns


@pytest.mark.parametrize("shape,rows,width,ctas", [((10, 300), 2, 512, 3), ((7, 1024), 4, 1024, 1),
                                                   ((5, 64), 1, 64, 5)], ids=str)
def test_the_docstring_example_sums_every_column_over_the_ctas_partials(shape, rows, width, ctas):
    column_partials = run_example(partial_sums)["column_partials"]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    partial = np.full((ctas, shape[1]), np.nan, np.float32)
    column_partials.interpret(x, partial, ROWS=rows, WIDTH=width, CTAS=ctas)
    total = sum_columns(partial, np.full(shape[1], np.nan, np.float32))
    assert np.allclose(total, x.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(264, 4096), (300, 1000), (5, 7)], ids=str)
def test_the_column_sums_are_the_sums_of_the_rows_rounded_once(shape):
    partial = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    total = sum_columns(partial, np.full(shape[1], np.nan, ml_dtypes.bfloat16))
    expected = partial.astype(np.float64).sum(axis=0)
    # float32 sums, then one bfloat16 rounding
    assert np.allclose(total.astype(np.float64), expected, rtol=2 ** -8, atol=1e-4)
