"""Checks of the arguments' shapes (`asyncdsl.blocks.shapes`): refused at trace time with the
rule broken, at the line of the user's code that asked."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example
from support import line_of

import asyncdsl as ad
from asyncdsl.blocks import shapes
from asyncdsl.blocks.shapes import check_rows, row_length


def test_the_docstring_example_runs_and_refuses_an_output_of_another_shape():
    negated = run_example(shapes)["negated"]
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    y = np.zeros_like(x)
    negated.interpret(x, y)
    assert np.array_equal(y, -x)
    with pytest.raises(ad.TraceError, match=r"y must have shape \(64, 128\) \(one element for each of x's\)"):
        negated.compile(ad.ArraySpec((64, 128), ad.float32), ad.ArraySpec((32, 128), ad.float32))


@ad.kernel(grid=(1,))
def scaled(x, y, scales):
    check_rows(("x", x), ("y", y), ("scales", scales))  # the check


@pytest.mark.parametrize("scales,message", [
    (ad.ArraySpec((4,), ad.float32), r"scales must have shape \(8,\)"),
    (ad.ArraySpec((8,), ad.bfloat16), "scales must be float32"),
])
def test_scales_are_one_float32_a_row(scales, message):
    matrix = ad.ArraySpec((8, 128), ad.bfloat16)
    with pytest.raises(ad.TraceError, match=message) as caught:
        scaled.compile(matrix, matrix, scales)
    assert caught.value.location.line == line_of(scaled.fn, "# the check")


@pytest.mark.parametrize("x,got", [(np.ones(256, np.float32), "shape (256,)"),
                                   (np.ones((8, 0), np.float32), "shape (8, 0)"),
                                   ([[1.0] * 256] * 8, "got list")])
def test_row_length_refuses_what_is_no_matrix_of_rows_at_the_callers_line(x, got):
    with pytest.raises(ad.ArgumentError, match="x must be a matrix of rows") as caught:
        row_length("x", x)  # the call
    assert got in caught.value.message
    test = test_row_length_refuses_what_is_no_matrix_of_rows_at_the_callers_line
    assert caught.value.location.line == line_of(test, "# the call")
