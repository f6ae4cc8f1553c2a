"""Rows in a row kernel (`asyncdsl.blocks.rows`), in the interpreter: staged in shared memory
whole or in pieces, padded windows from GMEM with what the padding reads as, the vectors that
come with the rows, and the mask of the elements within the rows."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import rows as rows_block
from asyncdsl.blocks.rows import padded_rows, staged_rows


def _matrix(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("shape,rows,width", [((5, 1000), 2, 512), ((3, 7), 1, 256), ((4, 2048), 4, 1024)],
                         ids=str)
def test_the_docstring_example_doubles_every_element_and_writes_nothing_else(shape, rows, width):
    doubled = run_example(rows_block)["doubled"]
    x = _matrix(shape)
    y = np.full_like(x, np.nan)
    doubled.interpret(x, y, ROWS=rows, WIDTH=width)
    assert np.array_equal(y.astype(np.float32), 2 * x.astype(np.float32))


@ad.kernel(grid=lambda x, w, y, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def staged_weighted(x, w, y, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    rows = staged_rows(x, ROWS, CHUNK, vectors=(w,))
    for c in rows.pieces():
        ad.store(rows.window(y, c), (rows.piece(c) * rows.vectors(c)[0][None, :]).astype(y.dtype))


@pytest.mark.parametrize("shape,rows,chunk", [((7, 512), 2, 512), ((3, 4096), 1, 1024), ((1, 8192), 1, 8192)],
                         ids=str)
def test_staged_rows_are_the_rows_whole_or_in_pieces_with_their_vectors(shape, rows, chunk):
    """Several rows a CTA (the last CTA's past the array's end), or one row in pieces."""
    x, w = _matrix(shape, 1), _matrix(shape[1:], 2)
    y = np.full_like(x, np.nan)
    staged_weighted.interpret(x, w, y, ROWS=rows, CHUNK=chunk)
    assert np.array_equal(y, (x.astype(np.float32) * w.astype(np.float32)).astype(ml_dtypes.bfloat16))


@ad.kernel(grid=lambda x, w, b, y, WIDTH: (x.shape[0],))
def padded_sums(x, w, b, y, WIDTH: ad.constexpr):
    """y[r, 0] = the sum of row r past its end (-1 a padded element), y[r, 1] = how many of the
    piece's elements `inside` counts, y[r, 2] = the sum of w·x + b over the row."""
    rows = padded_rows(x, 1, WIDTH, vectors=(w, b), other=-1.0)
    padding = ad.zeros((1,), ad.float32)
    inside = ad.zeros((1,), ad.float32)
    total = ad.zeros((1,), ad.float32)
    for c in range(rows.count):
        v, (weight, bias) = rows.piece(c), rows.vectors(c)
        mask = rows.inside(c)
        padding = padding + ad.where(mask, 0.0, v).sum(axis=1)
        inside = inside + ad.where(mask, 1.0, 0.0).sum(axis=1)
        total = total + ad.where(mask, v * weight[None, :] + bias[None, :], 0.0).sum(axis=1)
    for column, value in enumerate((padding, inside, total)):
        ad.store(y.at[rows.rows, ad.ds(column, 1)], value[:, None])


@pytest.mark.parametrize("n,width", [(1000, 512), (7, 256), (1024, 1024)])
def test_padded_windows_read_other_past_the_end_and_mask_it_out(n, width):
    x = np.ones((3, n), np.float32)
    w, b = np.full(n, 2.0, np.float32), np.full(n, 0.5, np.float32)
    y = np.zeros((3, 3), np.float32)
    padded_sums.interpret(x, w, b, y, WIDTH=width)
    padding = ad.cdiv(n, width) * width - n
    assert np.array_equal(y, np.tile([-padding, n, 2.5 * n], (3, 1)).astype(np.float32))
