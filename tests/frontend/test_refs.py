"""Indexing GMEM arrays in kernel code (`asyncdsl/frontend/refs.py`): a literal integer index is
numpy's, as a literal slice is; a traced index and a `ds` start are TMA coordinates."""

from __future__ import annotations

import numpy as np
import pytest

import asyncdsl as ad


@ad.kernel(grid=(1,), block=128)
def _row(x, y, INDEX: ad.constexpr):
    buf = ad.smem((x.shape[1],), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[INDEX, :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[0, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,), block=128)
def _rows(x, y, START: ad.constexpr):
    buf = ad.smem((1, x.shape[1]), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[START:START + 1 or None, :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[0:1, :])
    ad.await_async_copy(0)


@pytest.mark.parametrize("index", [-1, -2, -33, 0, 32])
def test_a_literal_index_names_numpys_row_as_the_literal_slice_does(index):
    x = np.arange(33 * 4, dtype=np.int32).reshape(33, 4) + 1
    by_index, by_slice = np.zeros((1, 4), np.int32), np.zeros((1, 4), np.int32)
    _row.interpret(x, by_index, INDEX=index)
    _rows.interpret(x, by_slice, START=index)
    np.testing.assert_array_equal(by_index[0], x[index])
    np.testing.assert_array_equal(by_slice, by_index)


def test_a_literal_index_before_the_first_row_is_refused_at_its_line():
    x = np.zeros((33, 4), np.int32)
    with pytest.raises(ad.TraceError, match=r"test_refs.py:\d+: .*index -34 is out of bounds for dim 0 "
                                            r"of size 33: "
                                            r"a literal negative index counts from the end, as in numpy"):
        _row.interpret(x, x, INDEX=-34)


def test_a_literal_index_past_the_end_is_a_coordinate_out_of_bounds():
    x = np.arange(33 * 4, dtype=np.int32).reshape(33, 4) + 1
    y = np.full((1, 4), -1, np.int32)
    _row.interpret(x, y, INDEX=40)
    assert not y.any()


@ad.kernel(grid=(2,), block=128)
def _traced_row(x, y):
    buf = ad.smem((x.shape[1],), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.program_id(0) - 1, :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[ad.program_id(0), :])
    ad.await_async_copy(0)


def test_a_traced_negative_index_stays_a_coordinate_outside_the_array():
    x = np.arange(33 * 4, dtype=np.int32).reshape(33, 4) + 1
    y = np.full((2, 4), -1, np.int32)
    _traced_row.interpret(x, y)
    np.testing.assert_array_equal(y, [[0] * 4, x[0]])


@ad.kernel(grid=(1,), block=128)
def _bulk_row(x, y):
    buf = ad.smem((192,), ad.uint8)
    bar = ad.barrier()
    ad.async_copy(x.at[-31, :], buf, barrier=bar, oob="undefined")
    bar.wait()
    ad.async_copy(buf, y.at[-31, :], oob="undefined")
    ad.await_async_copy(0)


def test_a_literal_negative_index_of_a_bulk_copy_wraps_too():
    x = (np.arange(32 * 192).reshape(32, 192) % 251 + 1).astype(np.uint8)
    y = np.zeros_like(x)
    _bulk_row.interpret(x, y)
    expected = np.zeros_like(x)
    expected[1] = x[1]
    np.testing.assert_array_equal(y, expected)


@ad.kernel(grid=(1,), block=128)
def _folded_row(x, y, INDEX: ad.constexpr):
    buf = ad.smem((x.shape[1],), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.program_id(0) * 0 + INDEX, :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[0, :])
    ad.await_async_copy(0)


def test_an_index_computed_from_a_traced_one_stays_a_coordinate_when_folded():
    # `i * 0` folds while tracing, yet what is computed from it is a traced index, not a literal.
    x = np.arange(33 * 4, dtype=np.int32).reshape(33, 4) + 1
    y = np.full((1, 4), -1, np.int32)
    _folded_row.interpret(x, y, INDEX=-1)
    assert not y.any()
    _folded_row.interpret(x, y, INDEX=2)
    np.testing.assert_array_equal(y[0], x[2])
    assert "cp.async.bulk.tensor" in _folded_row.ptx(x, y, INDEX=2)
