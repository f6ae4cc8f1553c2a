"""Softmax (`asyncdsl.kernels.softmax`) on every path its plan takes, in the interpreter against
numpy in float64: several rows a CTA, a row split over two warpgroups, one row held whole, rows
in pieces, and rows of any length read from GMEM padded; the host function; its refusals
(tests/ir/test_ptx.py assembles its PTX at the benchmarks' shapes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from row_support import ANY_LENGTH, SHAPES, assert_refused, matrix, random_rows
from support import examples, line_of

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.softmax import choose, reference, softmax_halves, softmax_padded, softmax_rows


def _error(y, x) -> float:
    return float(np.abs(y.astype(np.float64) - reference(x).astype(np.float64)).max())


@pytest.mark.parametrize("shape", SHAPES + ANY_LENGTH, ids=str)
def test_softmax_matches_numpy_on_every_path(shape):
    x = random_rows(shape, 1)
    y = np.full_like(x, np.nan)
    kernel, constexprs = choose(shape[1])
    kernel.interpret(x, y, **constexprs)
    assert _error(y, x) <= 2 ** -8  # a bfloat16 ulp of 1


@settings(max_examples=examples(12))
@given(rows=st.integers(1, 4), n=st.integers(1, 40000), seed=st.integers(0, 2 ** 16))
def test_softmax_matches_numpy_at_any_row_length(rows, n, seed):
    x = random_rows((rows, n), seed)
    assert _error(K.softmax(x), x) <= 2 ** -8


def test_softmax_takes_the_kernel_made_for_the_rows_length():
    assert choose(8192)[0] is softmax_halves
    assert choose(6144)[0] is softmax_halves
    assert choose(4096)[0] is softmax_rows
    assert choose(16384)[0] is softmax_rows
    assert choose(8320)[0] is softmax_padded  # 65 pieces of 128 otherwise
    assert choose(16384 + 8192)[0] is softmax_rows  # pieces of 8192
    assert choose(1000) == (softmax_padded, {"ROWS": 2, "WIDTH": 1024})
    # Halves only of whole 16-byte vectors a thread, padded windows too
    assert choose(5120) == (softmax_rows, {"ROWS": 1, "CHUNK": 5120})
    assert choose(7168) == (softmax_rows, {"ROWS": 1, "CHUNK": 7168})
    assert choose(6000) == (softmax_padded, {"ROWS": 1, "WIDTH": 6144})
    assert choose(8000) == (softmax_padded, {"ROWS": 1, "WIDTH": 8192})
    assert choose(2100) == (softmax_padded, {"ROWS": 1, "WIDTH": 2560})  # 8-byte vectors
    # Multiples of 128 whose rows kernel would move elements alone go padded; 8-byte vectors stay
    assert choose(640) == (softmax_padded, {"ROWS": 2, "WIDTH": 1024})
    assert choose(1152) == (softmax_padded, {"ROWS": 1, "WIDTH": 2048})
    assert choose(768) == (softmax_rows, {"ROWS": 2, "CHUNK": 768})
    assert choose(3584) == (softmax_rows, {"ROWS": 1, "CHUNK": 3584})


def test_the_host_function_makes_its_output_or_writes_the_one_given():
    x = random_rows((3, 1000), 2)
    y = K.softmax(x)
    assert y.shape == x.shape and y.dtype == x.dtype and _error(y, x) <= 2 ** -8
    out = np.full_like(x, np.nan)
    assert K.softmax(x, out=out) is out and np.array_equal(out, y)


@pytest.mark.parametrize("x,got", [(np.ones(256, np.float32), "shape (256,)"),
                                   (np.ones((8, 0), np.float32), "shape (8, 0)"),
                                   ([[1.0] * 256] * 8, "got list")])
def test_the_host_function_refuses_what_is_no_matrix_of_rows_at_the_callers_line(x, got):
    with pytest.raises(ad.ArgumentError, match="x must be a matrix of rows") as caught:
        K.softmax(x)  # the call
    assert got in caught.value.message
    test = test_the_host_function_refuses_what_is_no_matrix_of_rows_at_the_callers_line
    assert caught.value.location.line == line_of(test, "# the call")


@pytest.mark.parametrize("kernel,specs,constexprs", [
    (softmax_rows, (matrix(64, 1024), matrix(32, 1024)), {"ROWS": 2, "CHUNK": 1024}),
    (softmax_halves, (matrix(5, 8192), matrix(5, 4096)), {}),
    (softmax_padded, (matrix(5, 1000), matrix(5, 900)), {"ROWS": 2, "WIDTH": 1024}),
], ids=lambda v: getattr(v, "name", ""))
def test_an_output_of_another_shape_is_refused(kernel, specs, constexprs):
    message = rf"y must have shape \({specs[0].shape[0]}, \d+\) \(one element for each of x's\)"
    assert_refused(kernel, specs, constexprs, message)



def test_softmax_of_rows_whose_maximum_is_shared_is_uniform():
    x = np.full((2, 1000), 5.0, ml_dtypes.bfloat16)
    assert np.array_equal(K.softmax(x).astype(np.float32), np.full((2, 1000), 1 / 1000, np.float32)
                          .astype(ml_dtypes.bfloat16).astype(np.float32))
