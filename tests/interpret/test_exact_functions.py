"""The exact `tanh`, `sin` and `cos` (the default, approx=False): compositions of other tile ops,
against float64 numpy (within the bounds docs/register-tiles.md states), their symmetries as
laws over any float32, their special values, and their PTX (no `.approx` instruction of their
own; approx=True is that instruction alone)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from support import examples

import asyncdsl as ad

SHAPE = (8, 16)
BOUNDS = {"tanh": 2, "sin": 2.5, "cos": 2.5}  # ulps of the true function, float32 results >= 2^-126


@ad.kernel(grid=(1,), block=128)
def exact_functions(x, y):
    t = ad.load(x)
    ad.store(y.at[0], ad.tanh(t))
    ad.store(y.at[1], ad.sin(t))
    ad.store(y.at[2], ad.cos(t))
    ad.store(y.at[3], ad.tanh(-t))
    ad.store(y.at[4], ad.sin(-t))
    ad.store(y.at[5], ad.cos(-t))


def _run(x: np.ndarray) -> np.ndarray:
    y = np.zeros((6, *x.shape), np.float32)
    exact_functions.interpret(x, y)
    return y


def _ulps(got: np.ndarray, true: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(true.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - true) / spacing


FLOATS = hnp.arrays(np.float32, SHAPE, elements=st.floats(width=32, allow_nan=True, allow_infinity=True))


@settings(max_examples=examples(30), deadline=None)
@given(FLOATS)
def test_tanh_and_sin_are_odd_and_cos_even_bit_for_bit(x):
    y = _run(x)
    bits = y.view(np.uint32)
    for odd, of_negated in ((0, 3), (1, 4)):
        same = (bits[odd] ^ 0x80000000) == bits[of_negated]
        assert (same | np.isnan(y[odd])).all()
    assert ((bits[2] == bits[5]) | np.isnan(y[2])).all()
    assert (np.abs(y[0][~np.isnan(x)]) <= 1).all()


@settings(max_examples=examples(30), deadline=None)
@given(hnp.arrays(np.float32, SHAPE, elements=st.floats(-2.0**23, 2.0**23, width=32)))
def test_within_their_bounds_of_the_true_functions(x):
    y = _run(x)
    for position, (name, function) in enumerate((("tanh", np.tanh), ("sin", np.sin), ("cos", np.cos))):
        true = function(x.astype(np.float64))
        domain = np.abs(true) >= 2.0**-126
        assert _ulps(y[position][domain], true[domain]).max(initial=0) <= BOUNDS[name], name
        tiny = ~domain & (true != 0)  # below the normal range: within the smallest subnormal's steps
        assert (np.abs(y[position][tiny] - true[tiny]) <= 2.0**-148).all(), name


def test_special_values():
    x = np.resize(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 2.0**23, 2.0**23 + 1, 3e38,
                            20.0, -20.0, 0.625, -0.625, 1e-20, 88.0], np.float32), SHAPE)
    y = _run(x)[:3, 0]
    tanh, sin, cos = (row.tolist() for row in y)
    assert np.signbit(y[:, 1]).tolist() == [True, True, False]  # tanh(-0), sin(-0) are -0; cos(-0) is 1
    assert tanh[:4] == [0.0, 0.0, 1.0, -1.0] and np.isnan(tanh[4])
    assert sin[5:7] == tanh[5:7] == [np.float32(1e-40), np.float32(-1e-40)] and cos[5:7] == [1.0, 1.0]
    assert np.isnan(sin[2:5]).all() and np.isnan(cos[2:5]).all()  # sin(±inf), sin(NaN)
    assert not np.isnan(sin[7]) and np.isnan(sin[8:10]).all() and np.isnan(cos[8:10]).all()  # beyond 2^23
    assert tanh[10:12] == [1.0, -1.0] and tanh[14] == np.float32(1e-20) and sin[14] == np.float32(1e-20)


@pytest.mark.parametrize("name, instruction", [("tanh", "tanh.approx.f32"), ("sin", "sin.approx.ftz.f32"),
                                               ("cos", "cos.approx.ftz.f32")])
def test_the_default_is_composed_and_approx_is_the_instruction(name, instruction, ptxas):
    function = getattr(ad, name)

    @ad.kernel(grid=(1,), block=128)
    def both(x, y):
        t = ad.load(x)
        ad.store(y.at[0], function(t))
        ad.store(y.at[1], function(t, approx=True))

    @ad.kernel(grid=(1,), block=128)
    def exact(x, y):
        ad.store(y.at[0], function(ad.load(x)))

    x, y = np.zeros(SHAPE, np.float32), np.zeros((2, *SHAPE), np.float32)
    assert instruction not in exact.ptx(x, y)
    ptx = both.ptx(x, y)
    ptxas(ptx)
    assert ptx.count(instruction) == 1  # one element a thread
