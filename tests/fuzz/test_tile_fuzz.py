"""The tile fuzzer's CI slice and its model's own checks.  A few programs of a fixed seed run in
this process (each computes what the model allows and assembles, or is refused at its line);
`python -m asyncdsl.fuzz.tiles` runs any other slice.  The model is checked against numpy where
numpy is the reference (float32 and float16 rounding), and the comparison must catch a wrong bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.fuzz.copies.toolchain import have_ptxas
from asyncdsl.fuzz.tiles import numerics as nx
from asyncdsl.fuzz.tiles.generate import program_for
from asyncdsl.fuzz.tiles.run import FAILURES, compare, run_program

SEED = 11
PROGRAMS = (0, 1, 2, 3)
BUDGET = 60.0


@pytest.mark.skipif(not have_ptxas(), reason="ptxas not found (the test extra installs it)")
@pytest.mark.parametrize("index", PROGRAMS)
def test_a_program_of_the_fixed_slice_runs_as_the_model_says(index, tmp_path):
    result = run_program(program_for(SEED, index), str(tmp_path), BUDGET)
    assert result.outcome not in FAILURES, f"{result.outcome}: {result.detail}\n{result.source}"


def test_a_wrong_bit_in_any_output_is_a_mismatch(tmp_path):
    program = program_for(SEED, 0)
    arrays = program.arrays()
    first = len(program.inputs)
    for output, array in zip(program.outputs, arrays[first:]):
        array[...] = output.expected.reshape(array.shape)
    assert compare(program, arrays) == ""
    target = arrays[first].reshape(-1)
    bits = target.view(f"u{target.dtype.itemsize}")
    bits[0] ^= 1
    assert compare(program, arrays).startswith("y (t): 1 of")


def test_programs_are_the_same_every_time():
    first, second = program_for(3, 17), program_for(3, 17)
    assert first.lines == second.lines
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(first.inputs, second.inputs))


finite_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(finite_floats, min_size=1, max_size=8))
def test_rounding_is_numpys_where_numpy_rounds_once(values):
    x = np.array(values)
    with np.errstate(over="ignore"):
        for dtype, numpy in (("float32", np.float32), ("float16", np.float16)):
            assert np.array_equal(nx.round_to(x, dtype).view(f"u{np.dtype(numpy).itemsize}"),
                                  x.astype(numpy).view(f"u{np.dtype(numpy).itemsize}"))


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(finite_floats, min_size=1, max_size=8))
def test_rounding_is_idempotent_and_monotonic(values):
    x = np.sort(np.array(values))
    for dtype in ("bfloat16", "float16", "float8_e4m3fn"):
        once = nx.round_to(x, dtype)
        assert np.array_equal(nx.round_to(nx.wide(once), dtype), once)
        assert (nx.wide(once)[1:] >= nx.wide(once)[:-1]).all()


def test_bfloat16_rounds_once_from_the_exact_value():
    # 1 + 2**-8 + 2**-30 lies just above the tie between 1 and 1 + 2**-7: up, where rounding
    # through float32 first (to the tie) and then to even would give 1.
    assert float(nx.round_to(np.float64(1 + 2 ** -8 + 2 ** -30), "bfloat16")) == 1 + 2 ** -7
    assert float(np.float64(1 + 2 ** -8 + 2 ** -30).astype(np.float32).astype(ml_dtypes.bfloat16)) == 1


def test_fma_rounds_once():
    a = np.float32(1 + 2 ** -12)
    # a·a = 1 + 2**-11 + 2**-24 exactly; minus 1 it is 2**-11 + 2**-24: an fma keeps it, a product
    # rounded first would lose the 2**-24.
    assert float(nx.fma(a, a, np.float32(-1), "float32")) == 2 ** -11 + 2 ** -24


def test_float8_saturates_and_integers_truncate():
    assert float(nx.round_to(np.float64(1e6), "float8_e4m3fn")) == 448
    assert float(nx.round_to(np.float64(-np.inf), "float8_e5m2")) == -57344
    floats = np.array([np.nan, -2.7, 3e10], np.float32)
    assert nx.convert(floats, "float32", "int32").tolist() == [0, -2, 2 ** 31 - 1]
    assert nx.convert(np.array([300, -1], np.int32), "int32", "uint8").tolist() == [44, 255]


def test_a_sum_is_exact_in_any_order_only_where_the_grid_says_so():
    small = np.array([1.0, 2.0, -3.5, 0.25], np.float32)
    total, exact = nx.sum_any_order(small, None, "float32")
    assert exact and float(total) == -0.25
    _, exact = nx.sum_any_order(np.array([1.0, 2.0 ** -30, -1.0], np.float32), None, "float32")
    assert not exact
    _, exact = nx.sum_any_order(np.array([np.nan, 1.0], np.float32), None, "float32")
    assert exact
    # zeros: -0 only where every term is -0, also over a dim of one element
    signs, _ = nx.sum_any_order(np.array([[-0.0, 0.0]], np.float32), 0, "float32")
    assert np.signbit(signs).tolist() == [True, False]
    assert not np.signbit(nx.sum_any_order(np.array([-1.0, 1.0], np.float32), None, "float32")[0])


def test_maximum_and_minimum_order_the_zeros():
    zeros = np.array([-0.0, 0.0], np.float32)
    assert not np.signbit(nx.extreme("max", zeros, None, "float32"))
    assert np.signbit(nx.extreme("min", zeros[::-1], None, "float32"))
    assert np.signbit(nx.extremum("min", np.float32(0.0), np.float32(-0.0), "float32"))
    assert np.isnan(nx.extremum("max", np.float32(np.nan), np.float32(1.0), "float32"))
