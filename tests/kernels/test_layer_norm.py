"""LayerNorm (`asyncdsl.kernels.layer_norm`) on every path its plan takes, in the interpreter
against numpy in float64, with rows whose mean is far above their spread; the host function; its
refusals (tests/ir/test_ptx.py assembles its PTX at the benchmarks' shapes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from row_support import ANY_LENGTH, SHAPES, assert_refused, matrix, random_rows, vector
from support import examples

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.layer_norm import choose, layer_norm_padded, layer_norm_rows, reference

VECTOR = ad.ArraySpec


def _close(y, x, w, b, eps=1e-5) -> bool:
    # float32 sums in another order than numpy's float64: within a bfloat16 rounding of the result
    return np.allclose(y.astype(np.float64), reference(x, w, b, eps).astype(np.float64), rtol=2 ** -7,
                       atol=2 ** -6)


@pytest.mark.parametrize("shape", SHAPES + ANY_LENGTH, ids=str)
def test_layer_norm_matches_numpy_on_every_path(shape):
    x = random_rows(shape, 3, offset=100.0)  # a mean far above the spread
    w, b = vector(shape[1], 4), vector(shape[1], 5)
    y = np.full_like(x, np.nan)
    kernel, constexprs = choose(shape[1])
    kernel.interpret(x, w, b, y, **constexprs)
    assert _close(y, x, w, b)


@settings(max_examples=examples(12))
@given(rows=st.integers(1, 4), n=st.integers(1, 9000), offset=st.sampled_from([0.0, 100.0, -1000.0]),
       spread=st.sampled_from([1e-2, 1.0, 30.0]), seed=st.integers(0, 2 ** 16))
def test_layer_norm_matches_numpy_at_any_row_length_mean_and_spread(rows, n, offset, spread, seed):
    """Rows whose mean is up to 10^5 spreads away from zero (bfloat16 rounds such rows coarsely,
    numpy sees the same values)."""
    x = random_rows((rows, n), seed, scale=spread, offset=offset)
    w, b = vector(n, seed + 1), vector(n, seed + 2)
    assert _close(K.layer_norm(x, w, b), x, w, b)


def test_layer_norm_of_a_constant_row_is_its_bias():
    x = np.full((3, 1000), 7.0, ml_dtypes.bfloat16)
    w = np.full(1000, 2.0, ml_dtypes.bfloat16)
    b = np.linspace(-1, 1, 1000).astype(ml_dtypes.bfloat16)
    # The mean is 7000 / 1000 rounded once, exactly 7: every x - mean is 0, the variance 0 with the
    # padding masked out, and y = 0 · rstd · w + b is b bit for bit.
    assert np.array_equal(K.layer_norm(x, w, b), np.broadcast_to(b, x.shape))


def test_layer_norm_takes_the_kernel_made_for_the_rows_length():
    assert choose(4096) == (layer_norm_rows, {"EPS": 1e-5, "ROWS": 2, "CHUNK": 4096})
    assert choose(8192)[1] == {"EPS": 1e-5, "ROWS": 1, "CHUNK": 8192}  # held whole
    assert choose(16384)[1] == {"EPS": 1e-5, "ROWS": 1, "CHUNK": 4096}  # pieces of 4096
    assert choose(4224)[1] == {"EPS": 1e-5, "ROWS": 1, "CHUNK": 4224}  # held whole
    assert choose(8320)[0] is layer_norm_padded  # 65 pieces of 128 otherwise
    assert choose(1000, 1e-6) == (layer_norm_padded, {"EPS": 1e-6, "ROWS": 8, "WIDTH": 1024})
    assert choose(12345)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 4096}
    # Padded rows in one window of whole 16-byte vectors up to 7168, longer ones in pieces of 4096
    assert choose(6000)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 6144}
    assert choose(7000)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 7168}
    assert choose(8000)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 4096}


def test_the_host_function_writes_the_output_given():
    x, w, b = random_rows((2, 5000), 6), vector(5000, 7), vector(5000, 8)
    out = np.full_like(x, np.nan)
    assert K.layer_norm(x, w, b, 1e-6, out=out) is out and _close(out, x, w, b, 1e-6)


@pytest.mark.parametrize("kernel,specs,constexprs,message", [
    (layer_norm_rows, (matrix(64, 1024), VECTOR((1024,), ad.bfloat16), VECTOR((512,), ad.bfloat16),
                       matrix(64, 1024)),
     {"EPS": 1e-5, "ROWS": 8, "CHUNK": 1024}, r"b must have shape \(1024,\) \(one bias a column of x\)"),
    (layer_norm_padded, (matrix(9, 1000), VECTOR((1000,), ad.bfloat16), VECTOR((1000,), ad.bfloat16),
                         matrix(9, 900)),
     {"EPS": 1e-5, "ROWS": 8, "WIDTH": 1024}, r"y must have shape \(9, 1000\)"),
], ids=["bias", "output"])
def test_arguments_that_do_not_fit_x_are_refused(kernel, specs, constexprs, message):
    assert_refused(kernel, specs, constexprs, message)
