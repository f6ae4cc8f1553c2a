"""numpy scalars with register tiles follow numpy 2's promotion (NEP 50): a numpy scalar is typed
(`bf16_tile * np.float32(0.1)` is float32), a Python number is weak (it takes the tile's dtype),
and a promotion to a dtype no tile computes on (int64, float64) is a `TraceError` at the line.
The reference is numpy itself on the same arrays and scalars."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, line_of

import asyncdsl as ad

TILE_DTYPES = [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16),
               np.dtype(np.int32)]
SCALAR_TYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64,
                np.uint32]
COMPUTED = {np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.int32)}

# Each program applies one operation to the tile `t` and the numpy scalar `s`, on either side;
# numpy's expression is the same text on the array.
OPERATIONS = {
    "t + s": lambda ad_, t, s: t + s,
    "s - t": lambda ad_, t, s: s - t,
    "t * s": lambda ad_, t, s: t * s,
    "maximum(t, s)": lambda ad_, t, s: ad_.maximum(t, s),
    "where(t > 1, t, s)": lambda ad_, t, s: ad_.where(t > 1, t, s),
    "t < s": lambda ad_, t, s: t < s,
}
NUMPY = {
    "t + s": lambda t, s: t + s,
    "s - t": lambda t, s: s - t,
    "t * s": lambda t, s: t * s,
    "maximum(t, s)": lambda t, s: np.maximum(t, s),
    "where(t > 1, t, s)": lambda t, s: np.where(t > 1, t, s),
    "t < s": lambda t, s: t < s,
}


def _program(operation, scalar, out_dtype):
    @ad.kernel(grid=(1,), block=128)
    def k(x, y):
        r = OPERATIONS[operation](ad, ad.load(x), scalar)
        ad.store(y, r.astype(ad.int32) if r.dtype == ad.dtypes.BOOL else r)

    return k


def _tile_values(dtype) -> np.ndarray:
    values = (np.arange(8 * 16) % 11 - 4).reshape(8, 16)
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        return (values * 0.375).astype(dtype)
    return values.astype(dtype)


@settings(max_examples=examples(40), deadline=None)
@given(st.sampled_from(TILE_DTYPES), st.sampled_from(SCALAR_TYPES), st.sampled_from(sorted(OPERATIONS)),
       st.integers(-3, 3))
def test_numpy_scalars_promote_as_numpy_2_does(dtype, scalar_type, operation, value):
    x = _tile_values(dtype)
    if operation == "t < s" or scalar_type in (np.uint8, np.uint32):
        value = abs(value)
    scalar = scalar_type(value if np.dtype(scalar_type).kind != "f" else value * 0.3)
    want = NUMPY[operation](x, scalar)
    refused = want.dtype not in COMPUTED and want.dtype != np.bool_
    if operation == "t < s":  # numpy compares in the wider type; an exact scalar needs none
        refused = np.result_type(dtype, scalar) not in COMPUTED and scalar.astype(dtype) != scalar
    k = _program(operation, scalar, want.dtype)
    y = np.zeros(want.shape, np.int32 if want.dtype == np.bool_ else want.dtype)
    if refused:
        with pytest.raises(ad.TraceError, match=r"numpy 2.*no register tile computes on") as caught:
            k.interpret(x, y)
        assert caught.value.location is not None
        return
    k.interpret(x, y)
    assert np.array_equal(y, want.astype(y.dtype))


def test_python_numbers_stay_weak():
    @ad.kernel(grid=(1,), block=128)
    def k(x, y):
        ad.store(y, ad.load(x) * 0.1)

    x = _tile_values(np.dtype(ml_dtypes.bfloat16))
    y = np.zeros_like(x)
    k.interpret(x, y)
    assert np.array_equal(y, x * ml_dtypes.bfloat16(0.1))  # numpy 2: a Python float is weak too


def test_an_int64_scalar_is_refused_at_the_users_line_with_the_reason():
    @ad.kernel(grid=(1,), block=128)
    def k(x, y):
        ad.store(y, ad.load(x) * np.int64(3))

    x = np.full((8, 32), 2**30, np.int32)
    with pytest.raises(ad.TraceError) as caught:
        k.interpret(x, np.zeros_like(x))
    assert "an int32 tile with np.int64(3) is int64 in numpy 2" in caught.value.message
    assert caught.value.location.line == line_of(k.fn, "np.int64(3)")
