"""SwiGLU's gradients (`asyncdsl.kernels.swiglu_backward`) in the interpreter against numpy in
float64, whose backward is itself checked by finite differences; ptxas at the training shapes."""

from __future__ import annotations

import numpy as np
import pytest
from grad_support import assert_no_spills, numerical_gradient, relative_error
from row_support import random_rows

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.swiglu_backward import reference_backward, swiglu_backward_kernel

BF16 = 2 ** -8  # a bfloat16 rounding


def test_the_float64_reference_is_the_gradient_by_finite_differences():
    rng = np.random.default_rng(0)
    a, b, dy = (rng.standard_normal((3, 4)) * 3 for _ in range(3))

    def loss(a, b):
        return (a / (1 + np.exp(-a)) * b * dy).sum()

    da, db = reference_backward(dy, a, b)
    assert np.allclose(da, numerical_gradient(lambda v: loss(v, b), a), atol=1e-7)
    assert np.allclose(db, numerical_gradient(lambda v: loss(a, v), b), atol=1e-7)


@pytest.mark.parametrize("shape", [(3, 2048), (5, 3000), (2, 7), (4, 14336)], ids=str)
def test_the_gradients_match_float64(shape):
    a, b, dy = random_rows(shape, 1), random_rows(shape, 2), random_rows(shape, 3, scale=1.0)
    da, db = K.swiglu_backward(dy, a, b)
    assert da.dtype == db.dtype == a.dtype and da.shape == db.shape == a.shape
    expected_da, expected_db = reference_backward(dy, a, b)
    # element by element: within about a bfloat16 rounding of each element (ex2.approx's error is
    # far below it), measured against the largest as the norms' are
    for got, expected in ((da, expected_da), (db, expected_db)):
        assert relative_error(got, expected) < BF16
        assert np.allclose(got.astype(np.float64), expected, rtol=2 * BF16, atol=1e-3)


def test_a_chunk_that_is_no_multiple_of_1024_is_refused():
    spec = ad.ArraySpec((4, 4096), ad.bfloat16)
    with pytest.raises(ad.TraceError, match="CHUNK must be a positive multiple of 1024"):
        swiglu_backward_kernel.compile(*(spec,) * 5, CHUNK=1000)


@pytest.mark.parametrize("n", [8192, 14336, 28672, 3000])
def test_the_training_shapes_assemble_without_spills(n, ptxas):
    spec = ad.ArraySpec((16384, n), ad.bfloat16)
    assert_no_spills(swiglu_backward_kernel.ptx(*(spec,) * 5, CHUNK=1024 * 2))


@pytest.mark.parametrize("shape", [(0, 256), (4, 0)])
def test_no_elements_give_empty_results_and_a_mismatch_is_still_refused(shape):
    import ml_dtypes

    a = np.zeros(shape, ml_dtypes.bfloat16)
    y = K.swiglu(a, a.copy())
    da, db = K.swiglu_backward(a.copy(), a, a.copy())
    assert y.shape == da.shape == db.shape == shape
    with pytest.raises(ad.ArgumentError, match=r"b has shape \(0, 128\)"):
        K.swiglu(np.zeros((0, 256), ml_dtypes.bfloat16), np.zeros((0, 128), ml_dtypes.bfloat16))
