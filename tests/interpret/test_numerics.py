"""The element arithmetic of register tiles (asyncdsl.interpret.numerics), bit for bit, against the
independent references of numerics_reference.py (exact Fractions rounded by the textbook rule),
on special values (±0, ±inf, NaN, subnormals, extremes) and random ones."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import ml_dtypes
import numerics_reference as ref
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.interpret import numerics

RNG = np.random.default_rng(20261201)
COUNT = 400
INTEGERS = (np.dtype(np.int32), np.dtype(np.uint32))
NARROW_INTEGERS = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16))
ALL_FLOATS = (*ref.FLOATS, ref.E4M3, ref.E5M2)


def pairs(dtype, count=COUNT):
    """Operands: every pair of the special values, random pairs, and near-cancelling pairs."""
    values = ref.float_values(dtype, count, RNG)
    specials = values[:15]
    a, b = (np.array(x, dtype) for x in zip(*itertools.product(specials, specials)))
    shuffled = RNG.permutation(values)
    with np.errstate(all="ignore"):
        cancel = (-values.astype(np.float64) * (1 + RNG.standard_normal(values.size) * 2.0**-8)).astype(dtype)
    return np.concatenate([a, values, values]), np.concatenate([b, shuffled, cancel])


def test_canonical_nans_are_the_contract_bit_patterns():
    for dtype, pattern in ref.CANONICAL_NAN.items():
        nan = numerics.canonical_nan(dtype)
        assert nan.dtype == dtype and np.isnan(nan) and int(ref.bits(nan)) == pattern


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
@pytest.mark.parametrize(
    "name, reference",
    [("add", ref.add), ("subtract", ref.subtract), ("multiply", ref.multiply), ("divide", ref.divide)],
)
def test_float_ops_are_exact_results_rounded_once(dtype, name, reference):
    a, b = pairs(dtype)
    expected = ref.reference_array(lambda x, y: reference(x, y, dtype), dtype, a, b)
    assert ref.same_bits(getattr(numerics, name)(a, b), expected)


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
def test_fma_rounds_once(dtype):
    a, b = pairs(dtype)
    c = RNG.permutation(np.concatenate([a, b]))[: a.size]
    # a * b + c cancelling to a few bits, where rounding twice would show.
    with np.errstate(all="ignore"):
        near = (-(a.astype(np.float64) * b.astype(np.float64))).astype(dtype)
    a, b, c = np.concatenate([a, a]), np.concatenate([b, b]), np.concatenate([c, near])
    expected = ref.reference_array(lambda x, y, z: ref.fma(x, y, z, dtype), dtype, a, b, c)
    assert ref.same_bits(numerics.fma(a, b, c), expected)


@pytest.mark.parametrize(
    "dtype, a, b, c, expected",
    [
        # a * b is a float32 midpoint (1 + 2^-11 + 2^-24); c tips it up, but a float64 sum drops c.
        (ref.F32, 1 + 2.0**-12, 1 + 2.0**-12, 2.0**-70, 1 + 2.0**-11 + 2.0**-23),
        (ref.BF16, 1 + 2.0**-4, 1 + 2.0**-4, 2.0**-100, 1 + 2.0**-3 + 2.0**-7),
        (ref.BF16, 1 + 2.0**-4, 1 + 2.0**-4, -(2.0**-100), 1 + 2.0**-3),
    ],
    ids=str,
)
def test_fma_rounds_once_where_rounding_twice_would_not(dtype, a, b, c, expected):
    a, b, c = (np.array([v], dtype) for v in (a, b, c))
    assert float(numerics.fma(a, b, c)[0]) == expected


@pytest.mark.parametrize("dtype, mantissa",
                         [(ref.BF16, 7), (ref.F16, 10), (ref.E4M3, 3), (ref.E5M2, 2)], ids=str)
def test_values_just_off_a_midpoint_round_by_their_exact_value(dtype, mantissa):
    # float32 would round these onto the midpoint, where ties to even goes the wrong way.
    midpoint = 1 + 2.0 ** -(mantissa + 1)
    for offset, expected in ((2.0**-30, 1 + 2.0**-mantissa), (-(2.0**-30), 1.0)):
        assert float(numerics.round_float(np.array([midpoint + offset]), dtype)[0]) == expected
    # So would an int32 just above a bfloat16 midpoint.
    above = np.array([2**24 + 2**16 + 1], np.int32)
    assert float(numerics.int_to_float(above, ref.BF16)[0]) == 2.0**24 + 2.0**17


def test_fma_differs_from_a_multiply_then_an_add():
    a = np.array([1 + 2.0**-12], np.float32)
    c = np.array([-(1 + 2.0**-11)], np.float32)
    exact = Fraction(float(a[0])) ** 2 + Fraction(float(c[0]))
    assert float(numerics.fma(a, a, c)[0]) == float(exact) == 2.0**-24
    assert float(numerics.add(numerics.multiply(a, a), c)[0]) == 0.0


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
def test_maximum_and_minimum_propagate_nan_and_order_signed_zeros(dtype):
    a, b = pairs(dtype)
    assert ref.same_bits(numerics.maximum(a, b), ref.reference_array(ref.maximum, dtype, a, b))
    assert ref.same_bits(numerics.minimum(a, b), ref.reference_array(ref.minimum, dtype, a, b))


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
def test_comparisons_are_ordered_except_not_equal(dtype):
    a, b = pairs(dtype)
    for comparison, predicate in (("lt", "olt"), ("le", "ole"), ("gt", "ogt"), ("ge", "oge"), ("eq", "oeq"),
                                  ("ne", "une")):
        expected = [ref.compare(predicate, float(x), float(y)) for x, y in zip(a, b)]
        assert numerics.compare(comparison, a, b).tolist() == expected, comparison


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
def test_negate_and_absolute_only_touch_the_sign_bit(dtype):
    values = ref.float_values(dtype, COUNT, RNG)  # random bits: NaNs with payloads too
    sign = 1 << (dtype.itemsize * 8 - 1)
    assert np.array_equal(ref.bits(numerics.negate(values)), ref.bits(values) ^ sign)
    assert np.array_equal(ref.bits(numerics.absolute(values)), ref.bits(values) & (sign - 1))


def integer_values(dtype, count=COUNT):
    info = np.iinfo(dtype)
    edges = np.array([0, 1, info.max, info.min, info.max - 1, info.min + 1], np.int64)
    return np.concatenate([edges, RNG.integers(info.min, info.max, count, endpoint=True)]).astype(dtype)


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_integer_arithmetic_wraps(dtype):
    a, b = integer_values(dtype), RNG.permutation(integer_values(dtype))
    bits = dtype.itemsize * 8
    for name, op in (("add", int.__add__), ("subtract", int.__sub__), ("multiply", int.__mul__)):
        expected = [op(int(x), int(y)) % 2**bits for x, y in zip(a, b)]
        assert getattr(numerics, name)(a, b).view(f"uint{bits}").tolist() == expected, name
    absolute = [abs(int(x)) % 2**bits for x in a.view(f"int{bits}")]  # abs.s32: reads signed, wraps
    assert numerics.absolute(a).view(f"uint{bits}").tolist() == absolute


@pytest.mark.parametrize("dtype", INTEGERS + NARROW_INTEGERS, ids=str)
def test_integer_extrema_and_comparisons_read_the_dtype_signed_or_unsigned(dtype):
    a, b = integer_values(dtype), RNG.permutation(integer_values(dtype))
    x, y = a.tolist(), b.tolist()  # Python ints: signed or unsigned as the dtype reads them
    assert numerics.maximum(a, b).tolist() == [max(p, q) for p, q in zip(x, y)]
    assert numerics.minimum(a, b).tolist() == [min(p, q) for p, q in zip(x, y)]
    relations = {"lt": int.__lt__, "le": int.__le__, "gt": int.__gt__, "ge": int.__ge__, "eq": int.__eq__,
                 "ne": int.__ne__}
    for comparison, relation in relations.items():
        assert (numerics.compare(comparison, a, b).tolist()
                == [relation(p, q) for p, q in zip(x, y)]), comparison


# -- conversions ----------------------------------------------------------------------------------


def _converted(x: float, source, target) -> float | int:
    """The contract's float -> float conversion of one element (NaN handled by the caller)."""
    if math.isinf(x):
        return ref.round_fraction(Fraction(ref.FORMATS[target][2]) * 2, target) * (1 if x > 0 else -1)
    return ref.round_fraction(Fraction(x), target, negative_zero=math.copysign(1.0, x) < 0)


@pytest.mark.parametrize("source, target",
                         [(s, t) for s in ALL_FLOATS for t in ALL_FLOATS if s != t], ids=str)
def test_float_conversions_round_once_and_saturate_float8(source, target):
    values = ref.float_values(source, COUNT, RNG)
    result = numerics.float_to_float(values, target)
    finite = ~np.isnan(values)
    expected = ref.to_array([_converted(float(x), source, target) for x in values[finite]], target)
    assert ref.same_bits(result[finite], expected)
    nan_bits = ref.bits(result[~finite]).astype(np.int64)
    if target.itemsize <= source.itemsize or source != np.dtype(ml_dtypes.bfloat16):
        # The H200 canonicalises NaNs in every conversion but bfloat16 -> float32 (a shift).
        assert (nan_bits == ref.CANONICAL_NAN[target]).all()
    else:  # bfloat16 widened: the sign and the payload (mantissa bits, moved to the top) kept
        source_bits = ref.bits(values[~finite]).astype(np.int64)
        (source_mantissa, *_), (target_mantissa, *_) = ref.FORMATS[source], ref.FORMATS[target]
        shift, width = target_mantissa - source_mantissa, target.itemsize * 8
        assert (nan_bits >> (width - 1) == source_bits >> (source.itemsize * 8 - 1)).all()
        assert (nan_bits & ((1 << target_mantissa) - 1)
                == (source_bits & ((1 << source_mantissa) - 1)) << shift).all()


@pytest.mark.parametrize("source", ALL_FLOATS, ids=str)
@pytest.mark.parametrize("target", INTEGERS + NARROW_INTEGERS, ids=str)
def test_float_to_integer_truncates_saturates_and_sends_nan_to_zero(source, target):
    with np.errstate(over="ignore"):
        edges = np.array([2.0**31, -(2.0**31), 2.0**32, 255.9, -1.9, 65535.5]).astype(source)
    values = np.concatenate([ref.float_values(source, COUNT, RNG), edges])
    low, high = int(np.iinfo(target).min), int(np.iinfo(target).max)
    expected = [0 if math.isnan(x) else min(max(math.trunc(x) if math.isfinite(x) else x, low), high)
                for x in map(float, values)]
    assert numerics.float_to_int(values, target).tolist() == expected


@pytest.mark.parametrize("source", INTEGERS, ids=str)
@pytest.mark.parametrize("target", ALL_FLOATS, ids=str)
def test_integer_to_float_rounds_once(source, target):
    values = integer_values(source, COUNT)
    expected = ref.to_array([ref.round_fraction(Fraction(int(x)), target) for x in values], target)
    assert ref.same_bits(numerics.int_to_float(values, target), expected)


def test_bools_read_as_zero_and_one():
    flags = np.array([True, False])
    assert numerics.int_to_int(flags, np.int32).tolist() == [1, 0]
    assert numerics.int_to_float(flags, np.float32).tolist() == [1.0, 0.0]
    assert numerics.compare("gt", flags, flags[::-1]).tolist() == [True, False]
    assert numerics.int_to_int(np.array([2, 3, -1], np.int32), np.bool_).tolist() == [False, True, True]


@pytest.mark.parametrize("source", INTEGERS + NARROW_INTEGERS, ids=str)
@pytest.mark.parametrize("target", INTEGERS + NARROW_INTEGERS, ids=str)
def test_integer_conversions_extend_by_the_source_and_truncate(source, target):
    values = integer_values(source, 50)
    bits = target.itemsize * 8
    expected = [x % 2**bits for x in values.tolist()]
    assert numerics.int_to_int(values, target).view(f"uint{bits}").tolist() == expected


def test_approximate_functions_are_the_float64_function_rounded_and_ftz_flushes():
    x = np.array([-2.5, -1.0, -0.0, 0.0, 0.5, 3.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40], np.float32)
    with np.errstate(all="ignore"):
        for name, function in (("exp2", np.exp2), ("log2", np.log2), ("rsqrt", lambda v: 1 / np.sqrt(v)),
                               ("tanh", np.tanh), ("sin", np.sin), ("cos", np.cos)):
            expected = function(x.astype(np.float64)).astype(np.float32)
            result = numerics.approximate(name, x, ftz=False)
            same = (result == expected) | (np.isnan(result) & np.isnan(expected))
            assert same.all() and (ref.bits(result[np.isnan(result)]) == 0x7FFFFFFF).all(), name
    subnormal_in = np.array([1e-40, -1e-40], np.float32)
    assert (ref.bits(numerics.approximate("rsqrt", subnormal_in, ftz=True)).tolist()
            == [0x7F800000, 0xFF800000])
    assert numerics.approximate("exp2", np.array([-130.0], np.float32), ftz=False)[0] == np.float32(2.0**-130)
    assert ref.bits(numerics.approximate("exp2", np.array([-130.0], np.float32), ftz=True)).tolist() == [0]
    assert (ref.bits(numerics.approximate("sin", np.array([-1e-40], np.float32), ftz=True)).tolist()
            == [0x80000000])


# -- laws the implementation relies on --------------------------------------------------------------

finite_doubles = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e38, max_value=1e38)


@settings(max_examples=examples(150), deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=32),
       st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_rounding_a_sum_to_odd_then_to_float32_rounds_it_once(a, b):
    # The error-free sum, squeezed to one float64 by rounding to odd, then rounded to float32.
    odd = numerics._sum_to_odd(np.array(a), np.array(b))
    negative_zero = math.copysign(1.0, a + b) < 0
    assert float(numerics.round_float(np.asarray(odd), np.float32)) == ref.round_fraction(
        Fraction(a) + Fraction(b), ref.F32, negative_zero
    )


@settings(max_examples=examples(150), deadline=None)
@given(finite_doubles, st.sampled_from([ref.BF16, ref.F16, ref.E4M3, ref.E5M2]))
def test_rounding_through_float32_to_odd_equals_rounding_directly(x, dtype):
    got = numerics.round_float(np.array(x), dtype)
    expected = ref.round_fraction(Fraction(x), dtype, negative_zero=math.copysign(1.0, x) < 0)
    assert ref.same_bits(np.asarray(got), ref.to_array([expected], dtype).reshape(()))


float_bits = st.sampled_from(ref.FLOATS).flatmap(
    lambda d: st.tuples(st.just(d), st.integers(0, 2 ** (d.itemsize * 8) - 1),
                        st.integers(0, 2 ** (d.itemsize * 8) - 1))
)


@settings(max_examples=examples(150), deadline=None)
@given(float_bits)
def test_maximum_and_minimum_commute_bit_for_bit(drawn):
    dtype, x, y = drawn
    a, b = (np.array(v, ref.unsigned(dtype)).view(dtype) for v in (x, y))
    for function in (numerics.maximum, numerics.minimum):
        assert ref.same_bits(function(a, b), function(b, a))
    zero, negative_zero = np.array(0.0, dtype), np.array(-0.0, dtype)
    assert (ref.bits(numerics.maximum(negative_zero, zero))
            == ref.bits(numerics.maximum(zero, negative_zero)) == 0)


@settings(max_examples=examples(150), deadline=None)
@given(float_bits)
def test_narrow_floats_round_trip_through_float32(drawn):
    dtype, x, _ = drawn
    value = np.array(x, ref.unsigned(dtype)).view(dtype)
    back = numerics.float_to_float(numerics.float_to_float(value, np.float32), dtype)
    if np.isnan(value):
        assert int(ref.bits(back)) == ref.CANONICAL_NAN[dtype]
    else:
        assert ref.same_bits(back, value)


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(-(2**15), 2**15 - 1))
def test_small_integers_round_trip_through_float32(x):
    value = np.array(x, np.int16)
    assert numerics.float_to_int(numerics.int_to_float(value, np.float32), np.int16) == value


@settings(max_examples=examples(200), deadline=None)
@given(float_bits, st.integers(-160, 160))
def test_dividing_by_a_power_of_two_is_multiplying_by_its_reciprocal(drawn, k):
    # What lets the lowering replace x / 2^k by x * 2^-k when both powers fit the dtype.
    dtype, x, _ = drawn
    limits = ml_dtypes.finfo(dtype)
    assume(all(float(limits.smallest_subnormal) <= 2.0**e <= float(limits.max) for e in (k, -k)))
    value = np.array(x, ref.unsigned(dtype)).view(dtype)
    divisor, reciprocal = np.array(2.0**k, dtype), np.array(2.0**-k, dtype)
    assert ref.same_bits(numerics.divide(value, divisor), numerics.multiply(value, reciprocal))
