"""The interpreter's model of the tensor cores' sums of 8-bit float products (`fp8_step`,
docs/hardware.md §14.2): the terms truncated toward zero at 2**(largest exponent - 13), the sum
to 14 significant bits; exact where every partial sum is a small integer; its laws (sign
symmetry, any order of K) as properties.  Both models (`mma_step` for 16-bit and tf32 inputs
too) against the module docstring's recipe computed term by term in exact rationals."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.interpret.mma_numerics import fp8_step, mma_step

E4M3 = ml_dtypes.float8_e4m3fn


def _step(a_values, b_values, acc=0.0, accumulate=False):
    a = np.array([a_values], E4M3)
    b = np.array([b_values], E4M3).T
    return fp8_step(np.full((1, 1), acc, np.float32), a, b, accumulate)[0, 0]


def test_a_term_below_the_largest_exponent_less_13_is_truncated_away():
    # 1·1 sets the scale (exponent 0); 2**-7 · 2**-7 = 2**-14 is below 2**-13 and goes, where
    # float32 (and the 16-bit model) keep 1 + 2**-14.
    assert _step([1.0, 2.0 ** -7], [1.0, 2.0 ** -7]) == np.float32(1.0)
    assert mma_step(np.zeros((1, 1), np.float32), np.array([[1.0, 2.0 ** -7]], np.float32),
                    np.array([[1.0], [2.0 ** -7]], np.float32), False)[0, 0] == np.float32(1.0 + 2.0 ** -14)
    # 2**-6 · 2**-7 = 2**-13 is on the quantum and stays.
    assert _step([1.0, 2.0 ** -6], [1.0, 2.0 ** -7]) == np.float32(1.0 + 2.0 ** -13)


def test_the_scale_is_the_sum_of_the_operands_exponents_not_the_product():
    # ±1.875 · 1.875 = ±3.515625 have exponent sum 0 (their values' exponent is 1): the quantum
    # is 2**-13, so 2**-13 survives beside them (and is all that is left once they cancel).
    assert _step([1.875, -1.875, 2.0 ** -6], [1.875, 1.875, 2.0 ** -7]) == np.float32(2.0 ** -13)


def test_the_sum_keeps_fourteen_significant_bits():
    # 64·128 + 64·128 + 1·1 = 16385: every term is a multiple of the quantum 2**0 (exponent sum
    # 13), but the sum needs 15 bits and is truncated to 16384.
    assert _step([64.0, 64.0, 1.0], [128.0, 128.0, 1.0]) == np.float32(16384.0)
    assert _step([-64.0, -64.0, -1.0], [128.0, 128.0, 1.0]) == np.float32(-16384.0)


def test_the_old_accumulator_is_one_of_the_terms():
    # An accumulator of 2**10 sets the quantum to 2**-3: the product 2**-4 is truncated away.
    assert _step([2.0 ** -2], [2.0 ** -2], acc=1024.0, accumulate=True) == np.float32(1024.0)
    assert _step([2.0 ** -2], [2.0 ** -2], acc=np.nan, accumulate=False) == np.float32(2.0 ** -4)


def test_small_integer_sums_are_exact():
    rng = np.random.default_rng(0)
    a = rng.integers(-8, 9, (64, 32)).astype(E4M3)
    b = rng.integers(-8, 9, (32, 48)).astype(E4M3)
    acc = rng.integers(-4000, 4000, (64, 48)).astype(np.float32)
    expected = acc + a.astype(np.float64) @ b.astype(np.float64)  # |sums| < 2**13
    np.testing.assert_array_equal(fp8_step(acc, a, b, True), expected)


def test_nan_and_inf_propagate():
    assert np.isnan(_step([np.nan, 1.0], [1.0, 1.0]))
    e5m2 = ml_dtypes.float8_e5m2
    a = np.array([[np.inf, 1.0]], e5m2)
    assert fp8_step(np.zeros((1, 1), np.float32), a, np.ones((2, 1), e5m2), False)[0, 0] == np.inf




def _without_nan(bits: np.ndarray) -> np.ndarray:
    """E4M3 codes with its NaNs (S.1111.111) moved to the largest finite magnitude (S.1111.110)."""
    return np.where(bits & 0x7F == 0x7F, bits ^ 1, bits).astype(np.uint8)


# An (8, 32) array of E4M3 codes, NaN excluded.  Drawn as one string of bytes: hypothesis draws
# (and shrinks) it in one step, where an array strategy draws every element on its own.
_FP8_VALUES = st.binary(min_size=8 * 32, max_size=8 * 32).map(
    lambda raw: _without_nan(np.frombuffer(raw, np.uint8).reshape(8, 32)))


@settings(max_examples=examples(60), deadline=None)
@given(_FP8_VALUES, _FP8_VALUES, st.floats(-1e4, 1e4, width=32), st.booleans())
def test_negating_the_inputs_negates_the_sum(a_bits, b_bits, old, accumulate):
    a, b = a_bits.view(E4M3), b_bits.view(E4M3).T
    acc = np.full((8, 8), old, np.float32)
    forward = fp8_step(acc, a, b, accumulate)
    backward = fp8_step(-acc, a, (-b.astype(np.float32)).astype(E4M3), accumulate)
    np.testing.assert_array_equal(forward, -backward)


@settings(max_examples=examples(60), deadline=None)
@given(_FP8_VALUES, _FP8_VALUES, st.permutations(range(32)))
def test_the_order_of_k_does_not_matter(a_bits, b_bits, order):
    a, b = a_bits.view(E4M3), b_bits.view(E4M3).T
    acc = np.zeros((8, 8), np.float32)
    np.testing.assert_array_equal(fp8_step(acc, a, b, False), fp8_step(acc, a[:, order], b[order], False))


def _toward_zero_f32(exact: Fraction) -> np.float32:
    nearest = np.float32(float(exact))
    return np.nextafter(nearest, np.float32(0)) if abs(Fraction(float(nearest))) > abs(exact) else nearest


def _truncated(x: Fraction, quantum: Fraction) -> Fraction:
    return math.trunc(x / quantum) * quantum


def _rational_mma(acc, a, b, accumulate):
    """mma_step's recipe, one output at a time: every term aligned to the largest's exponent and
    truncated to 26 significant bits, the exact sum truncated to float32."""
    out = np.empty(acc.shape, np.float32)
    for m, n in np.ndindex(*acc.shape):
        terms = [Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[m], b[:, n])]
        terms += [Fraction(float(acc[m, n]))] if accumulate else []
        _, exponent = math.frexp(float(max(abs(t) for t in terms)))  # exact: a float64 product
        quantum = Fraction(2) ** (exponent - 26)
        out[m, n] = _toward_zero_f32(sum(_truncated(t, quantum) for t in terms))
    return out


def _floor_log2(x: float) -> int:
    return math.frexp(x)[1] - 1 if x else -4096


def _rational_fp8(acc, a, b, accumulate):
    """fp8_step's recipe, one output at a time: the scale from the operands' exponents, each
    term truncated to 2**(scale - 13), the exact sum truncated to 14 significant bits."""
    out = np.empty(acc.shape, np.float32)
    for m, n in np.ndindex(*acc.shape):
        pairs = [(float(x), float(y)) for x, y in zip(a[m], b[:, n])]
        old = float(acc[m, n]) if accumulate else 0.0
        scales = [_floor_log2(x) + _floor_log2(y) for x, y in pairs if x * y] + [_floor_log2(old)]
        scale = max(scales) if max(scales) > -2048 else 0
        quantum = Fraction(2) ** (scale - _FP8_TERM_BITS)
        total = sum(_truncated(Fraction(x) * Fraction(y), quantum) for x, y in pairs)
        total += _truncated(Fraction(old), quantum)
        if total:
            total = _truncated(total, Fraction(2) ** (math.frexp(float(total))[1] - 14))
        out[m, n] = np.float32(float(total))
    return out


_FP8_TERM_BITS = 13
_INPUTS = st.sampled_from([ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])


@settings(max_examples=examples(40), deadline=None)
@given(_INPUTS, st.integers(0, 2**32 - 1), st.sampled_from(["normal", "wide", "small integers"]),
       st.booleans())
def test_both_models_give_the_bits_of_their_recipe_in_exact_arithmetic(dtype, seed, kind, accumulate):
    rng = np.random.default_rng(seed)
    k = 32 if np.dtype(dtype).itemsize == 1 else 16
    shape = {"a": (3, k), "b": (k, 4), "acc": (3, 4)}
    draw = {
        "normal": lambda s: rng.standard_normal(s),
        "wide": lambda s: rng.standard_normal(s) * np.exp2(rng.integers(-12, 12, s)),
        "small integers": lambda s: rng.integers(-3, 4, s).astype(np.float64),
    }[kind]
    with np.errstate(over="ignore"):
        a, b = draw(shape["a"]).astype(dtype), draw(shape["b"]).astype(dtype)
    a, b = np.where(np.isfinite(a), a, 0).astype(dtype), np.where(np.isfinite(b), b, 0).astype(dtype)
    a[0, 0], b[1, 0] = -0.0, 0.0  # signed zeros among the terms
    acc = (draw(shape["acc"]) * 8).astype(np.float32)
    if np.dtype(dtype).itemsize == 1:
        expected, got = _rational_fp8(acc, a, b, accumulate), fp8_step(acc, a, b, accumulate)
    else:
        expected, got = _rational_mma(acc, a, b, accumulate), mma_step(acc, a, b, accumulate)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
