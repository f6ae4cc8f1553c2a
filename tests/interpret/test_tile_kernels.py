"""The register-tile kernels the GPU suite compares bit for bit against the interpreter
(tests/tile_kernels.py), run in the interpreter against independent references: so that a GPU
difference points at the GPU side or the lowering, not at the interpreter.

Elementwise results are checked on the first rows (every op, every dtype; the references are
plain Python, one element at a time).  The interpreter's elementwise results do not depend on
the layout (a tile is its logical array), so one layout stands for all here; compiling these
kernels (PTX included) is most of what this module costs."""

from __future__ import annotations

import math

import ml_dtypes
import numerics_reference as ref
import numpy as np
import pytest
from tile_kernels import (
    APPROX_OPS,
    COMPOSED,
    arg_extrema,
    COMPUTE,
    C,
    R,
    accumulate,
    broadcast_back,
    index_on_the_left,
    mask_relayout,
    nested_totals,
    numpy_idioms,
    numpy_idioms_reference,
    op_matrix,
    ops_of,
    relayout,
    running_total,
    scaled_rows,
    small_tiles,
    special_values,
    unsigned_storage,
    unsigned_storage_reference,
    whole_tile_totals,
)

import asyncdsl as ad

CHECKED_ROWS = 2


def _float_reference(name: str, dtype):
    """One element of FLOAT_OPS[name] (Python floats in, a Python float out; NaN: canonical)."""
    def where(mask, x, y):
        return x if mask else y

    ops = {
        "add": lambda a, b, c: ref.add(a, b, dtype),
        "sub": lambda a, b, c: ref.subtract(a, b, dtype),
        "mul": lambda a, b, c: ref.multiply(a, b, dtype),
        "div": lambda a, b, c: ref.divide(a, b, dtype),
        "div_power_of_two": lambda a, b, c: ref.divide(a, 4.0, dtype),
        "div_small_power_of_two": lambda a, b, c: ref.divide(a, -0.125, dtype),
        "fma": lambda a, b, c: ref.fma(a, b, c, dtype),
        "sqrt": lambda a, b, c: ref.sqrt(a, dtype),
        "mul_add": lambda a, b, c: ref.add(ref.multiply(a, b, dtype), c, dtype),
        "maximum": lambda a, b, c: ref.maximum(a, b),
        "minimum": lambda a, b, c: ref.minimum(a, b),
        "abs_maximum": lambda a, b, c: ref.maximum(abs(a), b),
        "abs_sub": lambda a, b, c: ref.subtract(b, abs(a), dtype),
        "scalar": lambda a, b, c: ref.subtract(ref.multiply(2.5, a, dtype), 1.0, dtype),
        **{f"cmp_{name}": (lambda p: lambda a, b, c: float(ref.compare(p, a, b)))(predicate)
           for name, predicate in (("lt", "olt"), ("le", "ole"), ("gt", "ogt"), ("ge", "oge"),
                                   ("eq", "oeq"), ("ne", "une"))},
    }
    return ops.get(name)


def _int_reference(name: str):
    def wrap(v):
        return (v + 2**31) % 2**32 - 2**31

    def shift(a, amount, direction):
        # PTX reads the amount unsigned and shifts every bit out from 32 on (the sign's copies
        # coming in for >>), where Python refuses a negative amount.
        amount %= 2**32
        if direction == "<<":
            return wrap(a << amount) if amount < 32 else 0
        return a >> min(amount, 31)

    return {
        "add": lambda a, b, c: wrap(a + b), "sub": lambda a, b, c: wrap(a - b),
        "mul": lambda a, b, c: wrap(a * b),
        "neg": lambda a, b, c: wrap(-a), "abs": lambda a, b, c: wrap(abs(a)), "and": lambda a, b, c: a & b,
        "or": lambda a, b, c: a | b, "xor": lambda a, b, c: a ^ b, "maximum": lambda a, b, c: max(a, b),
        "minimum": lambda a, b, c: min(a, b), "scalar": lambda a, b, c: wrap(3 * a - 7),
        "where_less": lambda a, b, c: a if a < b else c, "invert": lambda a, b, c: ~a,
        "floordiv": lambda a, b, c: wrap(a // (b or 7)), "mod": lambda a, b, c: a % (b or -7),
        "floordiv_constant": lambda a, b, c: wrap(a // -3 + a // 8),
        "mod_constant": lambda a, b, c: wrap(a % 10 + (a % -16) * 3),
        "rfloordiv": lambda a, b, c: 1000 // (b or 3),
        "floordiv_positive": lambda a, b, c: wrap(a // 7 + a + a // 2**30 + a // 1000003),
        "mod_positive": lambda a, b, c: wrap(a % 7 - a % 64 + a % (2**31 - 1)),
        "floordiv_negative": lambda a, b, c: wrap(wrap(a // -7 + wrap(-a)) + a // -(2**31)
                                                  + a // -1000003 + a // -8),
        "mod_negative": lambda a, b, c: wrap(a % -7 - a % -64 + a % -(2**31 - 1)),
        "shl": lambda a, b, c: shift(a, b, "<<"), "shr": lambda a, b, c: shift(a, b, ">>"),
        "shl_small": lambda a, b, c: shift(a, b & 31, "<<"),
        "shr_small": lambda a, b, c: shift(a, b & 31, ">>"),
        **{f"cmp_{name}": (lambda op: lambda a, b, c: int(op(a, b)))(op) for name, op in (
            ("lt", int.__lt__), ("le", int.__le__), ("gt", int.__gt__), ("ge", int.__ge__),
            ("eq", int.__eq__), ("ne", int.__ne__))},
    }[name]


def _bit_moves(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray | None:
    """The float ops that move bits (NaN payloads included) rather than compute."""
    sign = np.array(1 << (8 * a.dtype.itemsize - 1)).astype(ref.unsigned(a.dtype))
    if name == "neg":
        return (ref.bits(a) ^ sign).view(a.dtype)
    if name == "abs":
        return (ref.bits(a) & (sign - 1)).view(a.dtype)
    if name in ("where_less", "abs_where"):
        less = a.astype(np.float64) < b.astype(np.float64)
        return np.where(less, a if name == "where_less" else (ref.bits(a) & (sign - 1)).view(a.dtype), c)
    if name == "where_not_less":
        return np.where(~(a.astype(np.float64) < b.astype(np.float64)), a, c)
    return None


@pytest.mark.parametrize("dtype", COMPUTE, ids=str)
def test_every_exact_op(dtype):
    ops = tuple(ops_of(dtype))
    a, b, c = (special_values(dtype, (R, C), seed) for seed in (1, 2, 3))
    out = np.zeros((len(ops), R, C), dtype.numpy)
    op_matrix.interpret(a, b, c, out, OPS=ops, LAYOUT="wgmma")
    rows = (slice(0, CHECKED_ROWS),)
    for position, name in enumerate(ops):
        got = out[position][rows]
        if dtype == ad.int32:
            reference = _int_reference(name)
            expected = [reference(*map(int, xs)) for xs in zip(a[rows].flat, b[rows].flat, c[rows].flat)]
            assert got.reshape(-1).tolist() == expected, name
            continue
        moved = _bit_moves(name, a[rows], b[rows], c[rows])
        if moved is not None:
            assert ref.same_bits(got, moved), name
            continue
        expected = ref.reference_array(_float_reference(name, dtype.numpy), dtype.numpy, a[rows],
                                       b[rows], c[rows])
        assert ref.same_bits(got, expected.reshape(got.shape)), name


def test_approximate_ops_are_the_float64_functions_rounded():
    a = np.random.default_rng(7).uniform(-30, 30, (R, C)).astype(np.float32)
    ops = tuple(name for name in APPROX_OPS if name not in COMPOSED)
    out = np.zeros((len(ops), R, C), np.float32)
    op_matrix.interpret(a, a, a, out, OPS=ops, LAYOUT="strided")
    functions = {"exp2": np.exp2, "log2": np.log2, "rsqrt": lambda v: 1 / np.sqrt(v), "sqrt": np.sqrt,
                 "tanh": np.tanh, "sin": np.sin, "cos": np.cos}
    with np.errstate(all="ignore"):
        for position, name in enumerate(ops):
            expected = functions[name.removesuffix("_approx")](a.astype(np.float64)).astype(np.float32)
            same = (out[position] == expected) | (np.isnan(out[position]) & np.isnan(expected))
            assert same.all(), name


# docs/register-tiles.md: the bounds of exp and log against the true functions (over results of
# at least 2^-126), here with exp2 and log2 correctly rounded; the GPU's add their own.
COMPOSED_BOUNDS = {"exp": 2, "log": 2, "log_approx": 2, "tanh_exact": 2, "sin_exact": 2.5, "cos_exact": 2.5}
TRUE_FUNCTIONS = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos}


def test_composed_functions_stay_within_their_bounds_of_the_true_functions():
    rng = np.random.default_rng(12)
    a = np.concatenate([rng.uniform(-87, 88.7, R * C // 2), np.exp2(rng.uniform(-126, 127, R * C // 2))])
    a = a.astype(np.float32).reshape(R, C)
    out = np.zeros((len(COMPOSED), R, C), np.float32)
    op_matrix.interpret(a, a, a, out, OPS=COMPOSED, LAYOUT="strided")
    with np.errstate(all="ignore"):
        for position, name in enumerate(COMPOSED):
            true = TRUE_FUNCTIONS[name.split("_")[0]](a.astype(np.float64))
            domain = np.isfinite(true) & (np.abs(true) >= 2.0 ** -126) & (np.abs(true) < 3.4e38)
            if name in ("sin_exact", "cos_exact"):
                domain &= np.abs(a) <= 2.0**23  # beyond, NaN (test_exact_functions.py)
            got, wanted = out[position][domain].astype(np.float64), true[domain]
            ulps = np.abs(got - wanted) / np.spacing(np.abs(wanted.astype(np.float32))).astype(np.float64)
            if name == "exp_approx":  # x·log2(e) rounded: relative error up to about 2^-24·|x·log2(e)|
                scale = np.abs(a[domain].astype(np.float64)) * 1.4426950408889634 + 1
                assert (ulps <= 2 * scale).all(), (name, (ulps / scale).max())
            else:
                assert ulps.max() <= COMPOSED_BOUNDS[name], (name, ulps.max())


# Arguments where e^x overflows, underflows or is special, and where x·log2(e) itself overflows.
EXP_EDGES = [np.inf, -np.inf, np.nan, 0.0, -0.0, 89.0, -110.0, 177.0, -177.0, 1e30, -1e30,
             2.3e38, -2.3e38, 2.4e38, -2.4e38, 3.4e38, -3.4e38]


def test_exp_overflows_to_inf_and_underflows_to_zero_as_numpy_does():
    a = np.resize(np.array(EXP_EDGES, np.float32), (R, C))
    out = np.zeros((2, R, C), np.float32)
    op_matrix.interpret(a, a, a, out, OPS=("exp", "exp_approx"), LAYOUT="strided")
    with np.errstate(all="ignore"):
        expected = np.exp(a.astype(np.float64)).astype(np.float32)
    for got in out:
        assert np.array_equal(got, expected, equal_nan=True)


@pytest.mark.parametrize("layout", ["wgmma", "row"])
def test_broadcasts_of_reductions(layout):
    a = special_values(ad.int32, (R, C), 5)  # integer sums: any order gives the same wrapped result
    out = np.zeros((R, C), np.int32)
    broadcast_back.interpret(a, out, LAYOUT=layout)
    wide = a.astype(np.int64)
    expected = (wide - wide.max(axis=1, keepdims=True)) * wide.sum(axis=0, keepdims=True)
    assert np.array_equal(out, ((expected + 2**31) % 2**32 - 2**31).astype(np.int32))


@pytest.mark.parametrize("dtype", [ad.float32, ad.int32], ids=str)
def test_whole_tile_totals_and_their_broadcasts(dtype):
    rng = np.random.default_rng(8)
    if dtype == ad.float32:  # magnitudes far apart, none near overflow (test_tiles.py: the sum's order)
        a = (rng.standard_normal((R, C)) * 2.0 ** rng.integers(-10, 10, (R, C))).astype(np.float32)
    else:
        a = special_values(dtype, (R, C), 5)
    totals, centred = np.zeros(8, dtype.numpy), np.zeros((R, C), dtype.numpy)
    whole_tile_totals.interpret(a, totals, centred, LAYOUT="wgmma")
    top, bottom = a.max(), a.min()
    with np.errstate(over="ignore"):
        spread, shifted = top - bottom, a - top  # numpy's own int32 wraparound and float32 rounding
        expected = shifted * spread + a[-1, -1]
    assert totals[1] == top and totals[2] == bottom and totals[3] == spread
    assert np.array_equal(centred, expected)
    if dtype == ad.int32:
        assert totals[0] == np.sum(a, dtype=np.int32)  # wrapped: any order gives these bits
    else:
        assert abs(totals[0] - a.astype(np.float64).sum()) <= 1e-6 * np.abs(a.astype(np.float64)).sum()


@pytest.mark.parametrize("source, target", [("wgmma", "strided"), ("strided", "row"), ("row", "wgmma")])
def test_relayouts_and_iota(source, target):
    a = np.random.default_rng(6).standard_normal((R, C)).astype(np.float32)
    out = np.zeros_like(a)
    relayout.interpret(a, out, SOURCE=source, TARGET=target)
    assert np.array_equal(out, a + np.arange(C, dtype=np.float32)[None, :])


@pytest.mark.parametrize("source, target", [("wgmma", "strided"), ("strided", "wgmma"), ("row", "strided")])
def test_mask_relayouts(source, target):
    a = np.random.default_rng(7).standard_normal((R, C)).astype(np.float32)
    out = np.zeros_like(a)
    mask_relayout.interpret(a, out, SOURCE=source, TARGET=target)
    assert np.array_equal(out, np.where(a > 0, a, np.arange(R, dtype=np.float32)[:, None]))


def test_a_register_accumulator_across_a_loop():
    x = np.random.default_rng(8).standard_normal((4, R, C)).astype(ml_dtypes.bfloat16)
    out = np.zeros((R, C), np.float32)
    accumulate.interpret(x, out)
    wide = x.astype(np.float32)
    assert np.array_equal(out, (((wide[0] + wide[1]) + wide[2]) + wide[3]) * np.float32(2))
    assert not math.isnan(float(out.sum()))


def test_a_traced_index_and_numbers_on_the_left_of_int32_tiles():
    a = special_values(ad.int32, (R, C), 8)
    out = np.zeros((2, 6, R // 2, C), np.int32)
    index_on_the_left.interpret(a, out)

    def wrap(v):
        return (v + 2**31) % 2**32 - 2**31

    divisors = [int(v) or 9 for v in a[: R // 2].flat]
    for program in range(2):
        i = program + 5
        expected = [[i // d for d in divisors], [i % d for d in divisors],
                    [wrap(i << d % 2**32) if d % 2**32 < 32 else 0 for d in divisors],
                    [i >> min(d % 2**32, 31) for d in divisors], [6 & d for d in divisors],
                    [i ^ d for d in divisors]]
        for position, values in enumerate(expected):
            assert out[program, position].reshape(-1).tolist() == values, position


@pytest.mark.parametrize("through_smem", [False, True])
def test_tiles_smaller_than_the_warpgroup_compute_what_numpy_does(through_smem, ptxas):
    x = np.random.default_rng(9).integers(-100, 100, (4, 8)).astype(np.float32)
    totals, y = np.full(4, np.nan, np.float32), np.full_like(x, np.nan)
    small_tiles.interpret(x, totals, y, THROUGH_SMEM=through_smem)
    rows = x.sum(axis=1) + np.arange(4)
    assert np.array_equal(totals, rows) and np.array_equal(y, x - rows[:, None] + x.max(axis=0)[None, :])
    ptxas(small_tiles.ptx(x, totals, y, THROUGH_SMEM=through_smem))


def test_a_reduction_of_a_reduction_computes_what_numpy_does(ptxas):
    x = np.random.default_rng(10).integers(-100, 100, (4, 8, 32)).astype(np.float32)
    totals, y = np.full(4, np.nan, np.float32), np.full_like(x, np.nan)
    nested_totals.interpret(x, totals, y)
    whole = x.sum(axis=(1, 2))  # small integers: exact in any order
    assert np.array_equal(totals, whole) and np.array_equal(y, x - whole[:, None, None])
    ptxas(nested_totals.ptx(x, totals, y))


def test_unsigned_tiles_and_bool_arrays_convert_as_numpy_does(ptxas):
    rng = np.random.default_rng(11)
    x, keep = rng.integers(0, 256, (8, 128)).astype(np.uint8), rng.random((8, 128)) < 0.5
    y, z = np.full((8, 128), np.nan, np.float32), np.zeros((2, 8, 128), np.uint16)
    unsigned_storage.interpret(x, keep, y, z)
    expected_y, expected_z = unsigned_storage_reference(x, keep)
    assert np.array_equal(y, expected_y) and np.array_equal(z, expected_z)
    ptx = unsigned_storage.ptx(x, keep, y, z)
    assert "cvt.u32.u8" in ptx and "cvt.rzi.u8.f32" in ptx and "cvt.s32.s8" not in ptx
    ptxas(ptx)


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32], ids=str)
@pytest.mark.parametrize("layout", ["wgmma", "row"])
def test_argmax_argmin_and_mean_are_numpys(dtype, layout, ptxas):
    x = np.random.default_rng(13).integers(-20, 20, (R, C)).astype(dtype.numpy)  # ties everywhere
    if dtype != ad.int32:
        x[3, 7] = x[3, 2] = x[9, 100] = np.nan  # the first NaN of a row or column wins
        x[5] = 0
        x[5, 9] = -0.0  # equal to +0: the first zero wins, whatever its sign
    rows_max, columns_min = np.full(R, -1, np.int32), np.full(C, -1, np.int32)
    means = np.zeros(R + C + 1, dtype.numpy)
    arg_extrema.interpret(x, rows_max, columns_min, means, LAYOUT=layout)
    wide = x.astype(np.float64)
    assert np.array_equal(rows_max, np.argmax(wide, axis=1))
    assert np.array_equal(columns_min, np.argmin(wide, axis=0))
    if dtype == ad.float32:  # integer sums: exact in any order, so numpy's mean divided once
        expected = np.concatenate([wide.mean(axis=1), wide.mean(axis=0), [wide.mean()]]).astype(np.float32)
        assert np.array_equal(means, expected, equal_nan=True)
    ptxas(arg_extrema.ptx(x, rows_max, columns_min, means, LAYOUT=layout))


@pytest.mark.parametrize("shape", [(128, 4), (128, 8), (256, 4), (128, 2), (32, 4), (16, 16), (8, 128)],
                         ids=str)
def test_vectors_broadcast_over_narrow_rows_and_reduced_too_compute_what_numpy_does(shape, ptxas):
    rng = np.random.default_rng(14)
    scale, x = (rng.integers(-50, 50, s).astype(np.float32) for s in (shape[:1], shape))
    y, z = np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)
    scaled_rows.interpret(scale, x, y, z)
    assert np.array_equal(y, x * scale[:, None]) and np.array_equal(z, x + x[0] + x[0].sum())
    ptxas(scaled_rows.ptx(scale, x, y, z))


def test_numpy_spellings_compute_what_numpy_does(ptxas):
    x = np.random.default_rng(15).integers(-20, 20, (8, 128)).astype(np.float32)
    y, flags = np.zeros((2, 8, 128), np.float32), np.zeros((3, 8), np.int32)
    z = np.full((8, 128), 9.0, np.float32)
    expected = numpy_idioms_reference(x, z)
    numpy_idioms.interpret(x, y, flags, z)
    for got, wanted in zip((y, flags, z), expected):
        assert np.array_equal(got, wanted)
    ptxas(numpy_idioms.ptx(x, y, flags, z))


def test_zero_d_registers_carry_a_total_across_a_loop(ptxas):
    x = np.random.default_rng(16).integers(-50, 50, (8, 256)).astype(np.float32)
    y = np.full(2, np.nan, np.float32)
    running_total.interpret(x, y)
    assert y.tolist() == [x.sum(), x.sum(axis=1).max()]
    ptxas(running_total.ptx(x, y))
