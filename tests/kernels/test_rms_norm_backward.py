"""RMSNorm for training (`asyncdsl.kernels.rms_norm_forward` / `rms_norm_backward`) in the
interpreter against numpy in float64, whose backward is itself checked by finite differences;
the configurations the backward picks assemble with ptxas without spills."""

from __future__ import annotations

import numpy as np
import pytest
from grad_support import assert_no_spills, numerical_gradient, relative_error, wide
from row_support import random_rows, vector

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.rms_norm_backward import backward_example, reference_backward, rms_norm_backward_rows, \
    rms_norm_stats, stats_config

BF16 = 2 ** -8  # a bfloat16 rounding


def _forward(x, w, eps=1e-6):
    return x * w / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)


def test_the_float64_reference_is_the_gradient_by_finite_differences():
    rng = np.random.default_rng(0)
    x, w, dy = rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal((3, 5))
    dx, dw = reference_backward(dy, x, w)
    assert np.allclose(dx, numerical_gradient(lambda v: (_forward(v, w) * dy).sum(), x), atol=1e-7)
    assert np.allclose(dw, numerical_gradient(lambda v: (_forward(x, v) * dy).sum(), w), atol=1e-7)


# Several rows a block, one row of 4096 and of 8192, padded lengths, and more blocks than CTAs.
@pytest.mark.parametrize("shape", [(7, 512), (9, 2048), (5, 4096), (3, 8192), (5, 1000), (4, 7), (3, 5000),
                                   (40, 96)], ids=str)
def test_forward_and_backward_match_float64(shape):
    x, w, dy = random_rows(shape, 1), vector(shape[1], 2), random_rows(shape, 3, scale=1.0)
    y, rstd = K.rms_norm_forward(x, w)
    assert y.dtype == x.dtype and rstd.dtype == np.float32 and rstd.shape == shape[:1]
    wx = wide(x)[0]
    assert np.allclose(rstd, 1 / np.sqrt((wx * wx).mean(axis=1) + 1e-6), rtol=1e-5)
    assert np.array_equal(y, K.rms_norm(x, w))
    dx, dw = K.rms_norm_backward(dy, x, w, rstd)
    assert dx.dtype == x.dtype and dw.dtype == w.dtype and dw.shape == w.shape
    expected_dx, expected_dw = reference_backward(dy, x, w)
    # float32 sums in another order than float64's, then one bfloat16 rounding
    assert relative_error(dx, expected_dx) < 2 * BF16
    assert relative_error(dw, expected_dw) < 2 * BF16


def test_rows_longer_than_the_backward_holds_are_refused():
    x = random_rows((2, 8200), 1)
    with pytest.raises(ad.ArgumentError, match="rows of up to 8192 elements, got 8200"):
        K.rms_norm_backward(x, x, x[0], np.ones(2, np.float32))


@pytest.mark.parametrize("n", [2048, 3072, 4096, 5120, 6144, 8192, 1000, 5000, 8000])
def test_every_configuration_assembles_without_spills(n, ptxas):
    specs, constexprs = backward_example(16384, n)
    assert_no_spills(rms_norm_backward_rows.ptx(*specs, **constexprs))


@pytest.mark.parametrize("n", [2048, 4096, 8192, 1000, 5000, 12345])
def test_the_statistics_kernel_assembles_without_spills_at_every_plan(n, ptxas):
    matrix, vector = ad.ArraySpec((16384, n), ad.bfloat16), ad.ArraySpec((n,), ad.bfloat16)
    assert_no_spills(rms_norm_stats.ptx(matrix, vector, matrix, ad.ArraySpec((16384,), ad.float32),
                                        **stats_config(n)))
