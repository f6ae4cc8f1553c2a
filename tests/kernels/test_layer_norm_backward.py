"""LayerNorm for training (`asyncdsl.kernels.layer_norm_forward` / `layer_norm_backward`) in the
interpreter against numpy in float64, whose backward is itself checked by finite differences;
the configurations the backward picks assemble with ptxas (spilling only at windows of 8192)."""

from __future__ import annotations

import numpy as np
import pytest
from grad_support import assert_no_spills, numerical_gradient, relative_error, spilled_bytes, wide
from row_support import random_rows, vector

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.layer_norm_backward import (
    backward_example,
    layer_norm_backward_rows,
    layer_norm_stats,
    reference_backward,
    stats_config,
)

BF16 = 2 ** -8  # a bfloat16 rounding


def _forward(x, w, b, eps=1e-5):
    d = x - x.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps) * w + b


def test_the_float64_reference_is_the_gradient_by_finite_differences():
    rng = np.random.default_rng(0)
    x, w, b, dy = rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal(5), \
        rng.standard_normal((3, 5))
    dx, dw, db = reference_backward(dy, x, w)
    assert np.allclose(dx, numerical_gradient(lambda v: (_forward(v, w, b) * dy).sum(), x), atol=1e-7)
    assert np.allclose(dw, numerical_gradient(lambda v: (_forward(x, v, b) * dy).sum(), w), atol=1e-7)
    assert np.allclose(db, numerical_gradient(lambda v: (_forward(x, w, v) * dy).sum(), b), atol=1e-7)


@pytest.mark.parametrize("shape", [(7, 512), (9, 2048), (5, 4096), (3, 8192), (5, 1000), (4, 7), (3, 5000),
                                   (40, 96)], ids=str)
def test_forward_and_backward_match_float64(shape):
    # rows far from zero: x̂ must come from the saved mean, not from x
    x, dy = random_rows(shape, 1, offset=20.0), random_rows(shape, 3, scale=1.0)
    w, b = vector(shape[1], 2), vector(shape[1], 4)
    y, mean, rstd = K.layer_norm_forward(x, w, b)
    wx = wide(x)[0]
    assert mean.dtype == rstd.dtype == np.float32 and mean.shape == rstd.shape == shape[:1]
    assert np.allclose(mean, wx.mean(axis=1), rtol=1e-6)
    assert np.allclose(rstd, 1 / np.sqrt(wx.var(axis=1) + 1e-5), rtol=1e-4)
    assert np.array_equal(y, K.layer_norm(x, w, b))
    dx, dw, db = K.layer_norm_backward(dy, x, w, mean, rstd)
    assert dx.dtype == x.dtype and dw.dtype == db.dtype == w.dtype and dw.shape == db.shape == w.shape
    for got, expected in zip((dx, dw, db), reference_backward(dy, x, w)):
        assert relative_error(got, expected) < 2 * BF16


@pytest.mark.parametrize("n", [2048, 3072, 4096, 5120, 6144, 7168, 1000, 5000])
def test_every_configuration_assembles_without_spills(n, ptxas):
    specs, constexprs = backward_example(16384, n)
    assert_no_spills(layer_norm_backward_rows.ptx(*specs, **constexprs))


@pytest.mark.parametrize("n", [8000, 8192])
def test_windows_of_8192_assemble_with_a_few_registers_spilled(n, ptxas):
    # dy, x and two float32 sums of 64 elements a thread: 255 registers and about 20 to the stack
    specs, constexprs = backward_example(16384, n)
    spills = spilled_bytes(layer_norm_backward_rows.ptx(*specs, **constexprs))
    assert 0 < max(spills) <= 128, spills


@pytest.mark.parametrize("n", [2048, 4096, 8192, 1000, 5000, 12345])
def test_the_statistics_kernel_assembles_without_spills_at_every_plan(n, ptxas):
    matrix, vector = ad.ArraySpec((16384, n), ad.bfloat16), ad.ArraySpec((n,), ad.bfloat16)
    stat = ad.ArraySpec((16384,), ad.float32)
    assert_no_spills(layer_norm_stats.ptx(matrix, vector, vector, matrix, stat, stat, **stats_config(n)))
