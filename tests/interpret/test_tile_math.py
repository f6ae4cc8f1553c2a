"""Elementwise math on register tiles in the interpreter, op by op on every dtype it is defined
for (`arith`/`math` on vectors, `asyncdsl.compare`/`select`/`convert`), against the independent
references of numerics_reference.py (exact Fractions rounded by the textbook rule, one element
at a time), and the errors at the op's line."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numerics_reference as ref
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples
from tile_ir import BOOL, LINE, run_op
from xdsl.dialects import arith
from xdsl.dialects import math as xmath

import asyncdsl as ad
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.hw.options import Comparison

RNG = np.random.default_rng(7)
I32, U32 = np.dtype(np.int32), np.dtype(np.uint32)


def floats(dtype):
    return ref.float_values(dtype, 113, RNG)[: 8 * 16].reshape(8, 16)


def ints(dtype):
    info = np.iinfo(dtype)
    values = np.concatenate([[0, 1, info.max, info.min, info.max - 1], RNG.integers(info.min, info.max, 123)])
    return values.astype(dtype).reshape(8, 16)


def binary(op_class):
    return lambda a, b, result_type: op_class(a, b)


def compare(comparison: Comparison):
    return lambda a, b, result_type: ir.CompareOp(comparison, a, b)


FLOAT_BINARY = [
    (arith.AddfOp, ref.add), (arith.SubfOp, ref.subtract), (arith.MulfOp, ref.multiply),
    (arith.DivfOp, ref.divide),
]
# The contract's comparisons: floats ordered (false on NaN) except `ne`, which is unordered.
FLOAT_COMPARISONS = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
@pytest.mark.parametrize("op_class, reference", FLOAT_BINARY, ids=lambda v: getattr(v, "name", ""))
def test_float_arithmetic(dtype, op_class, reference):
    a, b = floats(dtype), RNG.permutation(floats(dtype).reshape(-1)).reshape(8, 16)
    expected = ref.reference_array(lambda x, y: reference(x, y, dtype), dtype, a, b).reshape(a.shape)
    assert ref.same_bits(run_op(binary(op_class), a, b), expected)


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
def test_float_fma_extrema_sign_ops_and_comparisons(dtype):
    a, b, c = floats(dtype), floats(dtype)[::-1], RNG.permutation(floats(dtype).reshape(-1)).reshape(8, 16)
    fma = run_op(lambda x, y, z, t: xmath.FmaOp(x, y, z), a, b, c)
    assert ref.same_bits(
        fma, ref.reference_array(lambda x, y, z: ref.fma(x, y, z, dtype), dtype, a, b, c).reshape(a.shape))
    for op_class, reference in ((arith.MaximumfOp, ref.maximum), (arith.MinimumfOp, ref.minimum)):
        assert ref.same_bits(run_op(binary(op_class), a, b),
                             ref.reference_array(reference, dtype, a, b).reshape(a.shape))
    sign = 1 << (8 * dtype.itemsize - 1)
    assert np.array_equal(ref.bits(run_op(lambda x, t: arith.NegfOp(x), a)), ref.bits(a) ^ sign)
    assert np.array_equal(ref.bits(run_op(lambda x, t: xmath.AbsFOp(x), a)), ref.bits(a) & (sign - 1))
    for comparison in Comparison:
        result = run_op(compare(comparison), a, b, result=BOOL)
        predicate = FLOAT_COMPARISONS[comparison.value]
        expected = [ref.compare(predicate, float(x), float(y)) for x, y in zip(a.flat, b.flat)]
        assert result.dtype == BOOL and result.reshape(-1).tolist() == expected, comparison


@pytest.mark.parametrize("dtype", [I32, U32], ids=str)
def test_integer_arithmetic_wraps_and_reads_signedness_from_the_dtype(dtype):
    a, b = ints(dtype), ints(dtype)[::-1]
    unsigned = lambda x: x.view(np.uint32).reshape(-1).tolist()  # noqa: E731
    signed = lambda x: x.view(np.int32).reshape(-1).tolist()  # noqa: E731
    wrapped = [
        (arith.AddiOp, lambda x, y: (x + y) % 2**32), (arith.SubiOp, lambda x, y: (x - y) % 2**32),
        (arith.MuliOp, lambda x, y: (x * y) % 2**32), (arith.AndIOp, int.__and__),
        (arith.OrIOp, int.__or__), (arith.XOrIOp, int.__xor__),
    ]
    for op_class, reference in wrapped:
        result = run_op(binary(op_class), a, b)
        assert (result.dtype == dtype
                and unsigned(result) == [reference(x, y) for x, y in zip(unsigned(a), unsigned(b))])
    values = signed if dtype == I32 else unsigned
    for op_class, pick in ((arith.MaxSIOp, max), (arith.MinSIOp, min)):
        assert values(run_op(binary(op_class), a, b)) == [pick(x, y) for x, y in zip(values(a), values(b))]
    assert unsigned(run_op(lambda x, t: xmath.AbsIOp(x), a)) == [abs(x) % 2**32 for x in signed(a)]  # abs.s32
    relations = {"lt": int.__lt__, "le": int.__le__, "gt": int.__gt__, "ge": int.__ge__, "eq": int.__eq__,
                 "ne": int.__ne__}
    for comparison in Comparison:
        result = run_op(compare(comparison), a, b, result=BOOL)
        assert (result.reshape(-1).tolist()
                == [relations[comparison.value](x, y) for x, y in zip(values(a), values(b))])


def test_bool_tiles_combine_bitwise_and_select_any_dtype():
    m, n = RNG.integers(0, 2, (8, 16)).astype(bool), RNG.integers(0, 2, (8, 16)).astype(bool)
    for op_class, reference in ((arith.AndIOp, np.logical_and), (arith.OrIOp, np.logical_or),
                                (arith.XOrIOp, np.logical_xor)):
        result = run_op(binary(op_class), m, n)
        assert result.dtype == BOOL and np.array_equal(result, reference(m, n))
    for dtype in (*ref.FLOATS, I32, U32, BOOL, ref.E4M3, np.dtype(np.int8)):
        a = ints(np.int8).astype(dtype) if dtype != BOOL else n
        b = a[::-1].copy()
        result = run_op(lambda c, x, y, t: ir.SelectOp(c, x, y), m, a, b)
        assert ref.same_bits(result, np.where(m, a, b))


CONVERSION_DTYPES = (*ref.FLOATS, ref.E4M3, ref.E5M2, I32, U32,
                     *(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16)))


def converted(x, source: np.dtype, target: np.dtype):
    """The contract's conversion of one (non-NaN) element, as a Python number; integers read by
    their dtype, bools as 0 or 1."""
    if source not in ref.FORMATS:
        if target in ref.FORMATS:
            return ref.round_fraction(Fraction(int(x)), target)
        return int(x) % 2 ** (8 * target.itemsize)
    x = float(x)
    if target not in ref.FORMATS:
        info = np.iinfo(target)
        return (min(max(math.trunc(x) if math.isfinite(x) else x, int(info.min)), int(info.max))
                % 2 ** (8 * target.itemsize))
    if math.isinf(x):  # overflow: inf, or float8's largest finite value
        return ref.round_fraction(ref.FORMATS[target][2] * 2, target) * (1 if x > 0 else -1)
    return ref.round_fraction(Fraction(x), target, negative_zero=math.copysign(1.0, x) < 0)


@pytest.mark.parametrize("source", (*CONVERSION_DTYPES, BOOL), ids=str)
def test_conversions(source):
    if source in ref.FORMATS:
        values = floats(source)
    else:
        values = RNG.integers(0, 2, (8, 16)).astype(bool) if source == BOOL else ints(source)
    nan = np.isnan(values.astype(np.float32))
    for target in CONVERSION_DTYPES:
        if target == source:
            continue
        result = run_op(lambda x, t: ir.ConvertOp(x, t), values, result=target)
        expected = [converted(x, source, target) for x in values[~nan]]
        if target in ref.FORMATS:
            assert ref.same_bits(result[~nan], ref.to_array(expected, target)), target
        else:
            assert result.dtype == target, target
            assert result[~nan].view(f"uint{8 * target.itemsize}").tolist() == expected, target
            assert (result[nan] == 0).all()
        if target in ref.FORMATS and target.itemsize <= source.itemsize:
            assert (ref.bits(result[nan]) == ref.CANONICAL_NAN[target]).all()


@pytest.mark.parametrize("approx", [False, True])
def test_approximate_functions(approx):
    x = np.array([[-2.5, -1.0, -0.0, 0.0, 0.5, 3.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 100.0, -150.0,
                   2.0, 7.0, 9.5]],
                 np.float32)
    flags = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC] if approx else "none")
    functions = [(xmath.Exp2Op, np.exp2), (xmath.Log2Op, np.log2), (xmath.RsqrtOp, lambda v: 1 / np.sqrt(v))]
    if approx:
        functions += [(xmath.TanhOp, np.tanh), (xmath.SinOp, np.sin), (xmath.CosOp, np.cos)]
    tiny = np.finfo(np.float32).tiny
    for op_class, function in functions:
        result = run_op(lambda v, t: op_class(v, flags), x)
        # The .ftz forms flush subnormals; tanh.approx.f32, the only tanh, keeps them (H200).
        flushes = approx and op_class is not xmath.TanhOp
        source = np.where(np.abs(x) < tiny, np.copysign(0, x), x) if flushes else x
        with np.errstate(all="ignore"):
            expected = function(source.astype(np.float64)).astype(np.float32)
        if flushes:
            expected = np.where(np.abs(expected) < tiny, np.copysign(0, expected),
                                expected).astype(np.float32)
        expected = np.where(np.isnan(expected), np.uint32(0x7FFFFFFF).view(np.float32), expected)
        assert ref.same_bits(result, expected), op_class.name


def test_arithmetic_the_contract_does_not_define_is_an_error_at_the_op():
    a = np.zeros((8, 16), ml_dtypes.float8_e4m3fn)
    with pytest.raises(ad.InterpretError) as caught:
        run_op(binary(arith.AddfOp), a, a)
    assert caught.value.location.line == LINE
    assert "arith.addf on float8_e4m3fn values" in str(caught.value) and "warpgroup 0" in str(caught.value)
    with pytest.raises(ad.InterpretError, match="register tiles hold the dtypes"):
        run_op(binary(arith.AddfOp), a.astype(np.float64), a.astype(np.float64))


def test_integer_division_floors_and_shifts_clamp_their_amount():
    # Python's floor division, wrapped at the int32 ends (-2**31 // -1 is -2**31); shift amounts
    # read unsigned, 32 and more shifting every bit out (PTX shl/shr).  `%` is built on `//`
    # (tests/interpret/test_tile_kernels.py checks it against Python's).
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (-2**31, -1), (-2**31, 1), (2**31 - 1, -1), (0, -5),
             (5, 2**31 - 1), (-5, 2**31 - 1), (-2**31, 2**31 - 1), (2**31 - 1, -2**31), (1, 31), (1, 32),
             (-1, 33), (-8, -1), (3, -2**31), (12345, 40)]
    pairs += [tuple(v) for v in RNG.integers(-2**31, 2**31, (128 - len(pairs), 2))]
    a, b = (np.array(column, np.int64).astype(np.int32).reshape(8, 16) for column in zip(*pairs))

    def wrap(v):
        return (v + 2**31) % 2**32 - 2**31

    def quotient(x, y):
        return wrap(x // y)

    def shift(x, amount, left):
        amount %= 2**32
        if left:
            return wrap(x << amount) if amount < 32 else 0
        return x >> min(amount, 31)

    lists = [int(x) for x in a.reshape(-1)], [int(y) for y in b.reshape(-1)]
    assert (run_op(binary(arith.FloorDivSIOp), a, b).reshape(-1).tolist()
            == [quotient(*p) for p in zip(*lists)])
    assert run_op(binary(arith.ShLIOp), a, b).reshape(-1).tolist() == [shift(*p, True) for p in zip(*lists)]
    assert run_op(binary(arith.ShRSIOp), a, b).reshape(-1).tolist() == [shift(*p, False) for p in zip(*lists)]


def test_a_zero_divisor_is_an_error_at_the_op():
    a = np.arange(128, dtype=np.int32).reshape(8, 16)
    with pytest.raises(ad.InterpretError) as caught:
        run_op(binary(arith.FloorDivSIOp), a, a)  # a's first element is 0
    assert caught.value.location.line == LINE and "division by zero" in str(caught.value)
    assert "load a divisor with other=1" in str(caught.value)  # padding a load filled with 0s


INT32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(INT32, INT32.filter(bool)), min_size=128, max_size=128))
def test_floor_division_leaves_a_remainder_smaller_than_the_divisor_with_its_sign(pairs):
    # The law of floor division: a = q·b + r with 0 <= r < b or b < r <= 0; the only quotient
    # that does not fit int32 (-2**31 // -1) wraps to itself.
    a, b = (np.array(column, np.int64).astype(np.int32).reshape(8, 16) for column in zip(*pairs))
    quotient = run_op(binary(arith.FloorDivSIOp), a, b).astype(np.int64).reshape(-1)
    for x, y, q in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist(), quotient.tolist()):
        if (x, y) == (-(2**31), -1):
            assert q == -(2**31)
            continue
        r = x - q * y
        assert (0 <= r < y) if y > 0 else (y < r <= 0), (x, y, q)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(INT32, st.integers(0, 31)), min_size=128, max_size=128))
def test_shifts_by_less_than_32_multiply_and_floor_divide_by_powers_of_two(pairs):
    a, k = (np.array(column, np.int64).astype(np.int32).reshape(8, 16) for column in zip(*pairs))
    left = run_op(binary(arith.ShLIOp), a, k).reshape(-1).tolist()
    right = run_op(binary(arith.ShRSIOp), a, k).reshape(-1).tolist()
    for x, n, shifted_left, shifted_right in zip(a.reshape(-1).tolist(), k.reshape(-1).tolist(), left, right):
        assert shifted_left == (x * 2**n + 2**31) % 2**32 - 2**31
        assert shifted_right == x // 2**n
