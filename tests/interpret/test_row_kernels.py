"""The row kernels (softmax, RMSNorm) on every path their configuration takes, in the
interpreter against numpy: several rows a CTA with the last CTA past the end of the array, a row
split over two warpgroups (softmax), one row held whole, and rows in pieces."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from asyncdsl.examples import rms_norm as norm
from asyncdsl.examples import softmax as soft

SHAPES = [(7, 512), (5, 1024), (3, 4096), (3, 6144), (3, 8192), (2, 12288), (2, 16384)]


def _rows(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 3).astype(ml_dtypes.bfloat16), rng


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_softmax_rows_match_numpy_on_every_path(shape):
    x, _ = _rows(shape, 1)
    y = np.full_like(x, np.nan)
    kernel, constexprs = soft.choose(shape[1])
    kernel.interpret(x, y, **constexprs)
    expected = soft.reference(x).astype(np.float64)
    assert np.abs(y.astype(np.float64) - expected).max() <= 2 ** -8  # a bfloat16 ulp of 1


def test_softmax_takes_the_two_warpgroup_kernel_only_for_rows_it_halves_into_whole_vectors():
    assert soft.choose(8192)[0] is soft.softmax_halves
    assert soft.choose(6144)[0] is soft.softmax_halves
    assert soft.choose(4096)[0] is soft.softmax_rows
    assert soft.choose(16384)[0] is soft.softmax_rows
    assert soft.choose(8200)[0] is soft.softmax_rows  # not a multiple of 256


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rms_norm_rows_match_numpy_on_every_path(shape):
    x, rng = _rows(shape, 2)
    w = rng.standard_normal(shape[1]).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    norm.rms_norm.interpret(x, w, y, **norm.config(shape[1]))
    expected = norm.reference(x, w, 1e-6).astype(np.float64)
    # float32 sums in another order than numpy's float64: within a bfloat16 rounding of the result
    assert np.allclose(y.astype(np.float64), expected, rtol=2 ** -7, atol=2 ** -7)
