"""RMSNorm (`asyncdsl.kernels.rms_norm`) on every path its plan takes, in the interpreter against
numpy in float64; the host function; its refusals (tests/ir/test_ptx.py assembles its PTX at
the benchmarks' shapes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from row_support import ANY_LENGTH, SHAPES, assert_refused, matrix, random_rows, vector
from support import examples, line_of

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.rms_norm import choose, reference, rms_norm_padded, rms_norm_rows


def _close(y, x, w, eps=1e-6) -> bool:
    # float32 sums in another order than numpy's float64: within a bfloat16 rounding of the result
    expected = reference(x, w, eps).astype(np.float64)
    return np.allclose(y.astype(np.float64), expected, rtol=2 ** -7, atol=2 ** -7)


@pytest.mark.parametrize("shape", SHAPES + ANY_LENGTH, ids=str)
def test_rms_norm_matches_numpy_on_every_path(shape):
    x, w = random_rows(shape, 2), vector(shape[1], 3)
    y = np.full_like(x, np.nan)
    kernel, constexprs = choose(shape[1])
    kernel.interpret(x, w, y, **constexprs)
    assert _close(y, x, w)


@settings(max_examples=examples(12))
@given(rows=st.integers(1, 4), n=st.integers(1, 40000), eps=st.sampled_from([1e-6, 1e-5]),
       seed=st.integers(0, 2 ** 16))
def test_rms_norm_matches_numpy_at_any_row_length(rows, n, eps, seed):
    x, w = random_rows((rows, n), seed), vector(n, seed + 1)
    assert _close(K.rms_norm(x, w, eps), x, w, eps)


def test_rms_norm_takes_the_kernel_made_for_the_rows_length():
    assert choose(4096) == (rms_norm_rows, {"EPS": 1e-6, "ROWS": 2, "CHUNK": 4096})
    assert choose(8192) == (rms_norm_rows, {"EPS": 1e-6, "ROWS": 1, "CHUNK": 8192})  # whole
    assert choose(4224)[0] is rms_norm_rows  # whole, 33 elements a thread
    assert choose(12288) == (rms_norm_rows, {"EPS": 1e-6, "ROWS": 1, "CHUNK": 4096})  # pieces
    assert choose(8320)[0] is rms_norm_padded  # 65 pieces of 128 otherwise
    assert choose(1000, 1e-5) == (rms_norm_padded, {"EPS": 1e-5, "ROWS": 8, "WIDTH": 1024})
    # Longer padded rows one a CTA (two ran 3x slower once compiled by the driver's JIT)
    assert choose(12345) == (rms_norm_padded, {"EPS": 1e-6, "ROWS": 1, "WIDTH": 4096})
    # Padded rows of up to 8192 in one window of whole 16-byte vectors a thread
    assert choose(6000)[1] == {"EPS": 1e-6, "ROWS": 1, "WIDTH": 6144}
    assert choose(8000)[1] == {"EPS": 1e-6, "ROWS": 1, "WIDTH": 8192}
    assert choose(2100)[1] == {"EPS": 1e-6, "ROWS": 2, "WIDTH": 2304}  # 8-byte vectors


def test_the_host_function_makes_its_output_or_writes_the_one_given():
    x, w = random_rows((9, 1000), 4), vector(1000, 5)
    y = K.rms_norm(x, w)
    assert y.shape == x.shape and y.dtype == x.dtype and _close(y, x, w)
    out = np.full_like(x, np.nan)
    assert K.rms_norm(x, w, out=out) is out and np.array_equal(out, y)


def test_the_host_function_refuses_what_is_no_matrix_of_rows_at_the_callers_line():
    with pytest.raises(ad.ArgumentError, match=r"x must be a matrix of rows .* got shape \(256,\)") as caught:
        K.rms_norm(np.ones(256, np.float32), np.ones(256, np.float32))  # the call
    test = test_the_host_function_refuses_what_is_no_matrix_of_rows_at_the_callers_line
    assert caught.value.location.line == line_of(test, "# the call")


@pytest.mark.parametrize("kernel,specs,constexprs,message", [
    (rms_norm_rows, (matrix(64, 1024), ad.ArraySpec((512,), ad.bfloat16), matrix(64, 1024)),
     {"EPS": 1e-6, "ROWS": 8, "CHUNK": 1024}, r"w must have shape \(1024,\) \(one weight a column of x\)"),
    (rms_norm_padded, (matrix(9, 1000), ad.ArraySpec((1000,), ad.bfloat16), matrix(8, 1000)),
     {"EPS": 1e-6, "ROWS": 8, "WIDTH": 1024}, r"y must have shape \(9, 1000\)"),
], ids=["weight", "output"])
def test_arguments_that_do_not_fit_x_are_refused(kernel, specs, constexprs, message):
    assert_refused(kernel, specs, constexprs, message)
