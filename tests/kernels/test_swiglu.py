"""SwiGLU's gate (`asyncdsl.kernels.swiglu`) in the interpreter against numpy in float64, at row
lengths that end in a partial chunk; the host function; its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from row_support import random_rows

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.swiglu import reference, swiglu_kernel


def _close(y, a, b) -> bool:
    expected = reference(a, b).astype(np.float64)
    error = np.abs(y.astype(np.float64) - expected)
    return bool((error <= 2 ** -7 * np.maximum(np.abs(expected), 1e-2)).all())  # a bfloat16 ulp


@pytest.mark.parametrize("shape,chunk",
                         [((96, 3000), 1024), ((3, 5000), 2048), ((2, 7), 1024), ((4, 2048), 2048)], ids=str)
def test_swiglu_matches_numpy_chunks_past_the_rows_end_included(shape, chunk):
    a, b = random_rows(shape, 1, scale=4), random_rows(shape, 2)
    y = np.full_like(a, np.nan)
    swiglu_kernel.interpret(a, b, y, CHUNK=chunk)
    assert _close(y, a, b)


def test_the_host_function_makes_its_output_or_writes_the_one_given():
    a, b = random_rows((5, 3000), 3, scale=8), random_rows((5, 3000), 4)
    y = K.swiglu(a, b)
    assert y.shape == a.shape and y.dtype == a.dtype and _close(y, a, b)
    out = np.full_like(a, np.nan)
    assert K.swiglu(a, b, out=out) is out and np.array_equal(out, y)


@pytest.mark.parametrize("chunk", [0, 1000, 2.0])
def test_a_chunk_that_is_no_multiple_of_1024_is_refused(chunk):
    spec = ad.ArraySpec((4, 2048), ad.bfloat16)
    with pytest.raises(ad.TraceError, match="CHUNK must be a positive multiple of 1024"):
        swiglu_kernel.compile(spec, spec, spec, CHUNK=chunk)


@pytest.mark.parametrize("b,y,message", [
    ((48, 3000), (96, 3000),
     r"b must have shape \(96, 3000\) \(silu\(a\) \* b takes them element by element\)"),
    ((96, 3000), (96, 2000), r"y must have shape \(96, 3000\) \(one element for each of a's\)"),
], ids=["b", "y"])
def test_arguments_of_another_shape_than_a_are_refused(b, y, message):
    specs = [ad.ArraySpec(shape, ad.bfloat16) for shape in ((96, 3000), b, y)]
    with pytest.raises(ad.TraceError, match=message):
        swiglu_kernel.compile(*specs, CHUNK=1024)
