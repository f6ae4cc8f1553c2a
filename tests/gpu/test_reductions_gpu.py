"""TMA reductions on the H200: every allowed (op, dtype) pair, with 8 CTAs reducing into the same
tile so that the order of accumulation varies from run to run.

Bit-exact against numpy and against the interpreter (same inputs) wherever the result cannot
depend on that order: min/max/and/or/xor and integer add on any inputs, float add on inputs whose
every partial sum is exact, inc/dec from one CTA or on inputs where no step wraps.  For float add
of arbitrary values the GPU and the interpreter (which sums in CTA order) may round differently;
both must lie within the bound of any summation order: for n terms (the initial value and one
tile per CTA) summed pairwise-rounded to nearest in any order,
|result - exact| <= (n - 1) * eps * sum(|terms|) elementwise, eps the dtype's machine epsilon
(the classic bound is (n - 1) * eps / 2 * sum(|terms|) to first order; the factor 2 covers the
second-order terms).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from gpu_support import hopper_or_skip
from reduction_kernels import (
    COLS,
    PAIRS,
    ROWS,
    exact_float_operands,
    random_operands,
    reduce_at_row,
    reduce_tiles,
    reference_fold,
    reference_step,
)

import asyncdsl as ad
from asyncdsl.hw.reduction import ALLOWED, PTX_OP
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(2027)
CTAS = 8
ORDER_FREE = [
    (op, dtype) for op, dtype in PAIRS
    if PTX_OP[op] in ("min", "max", "and", "or", "xor") or (op == "add" and not dtype.is_float)
]
FLOAT_ADDS = [dtype for dtype in ALLOWED["add"] if dtype.is_float]
INC_DEC = [(op, dtype) for op in ("inc", "dec") for dtype in ALLOWED[op]]


def on_gpu(kernel, x: np.ndarray, y: np.ndarray, **constexprs) -> np.ndarray:
    y_device = to_device(y)
    kernel(to_device(x), y_device, **constexprs)
    return to_host(y_device)


def interpreted(kernel, x: np.ndarray, y: np.ndarray, **constexprs) -> np.ndarray:
    result = y.copy()
    kernel.interpret(x, result, **constexprs)
    return result


def test_every_allowed_pair_is_run_here():
    covered = set(ORDER_FREE) | {("add", d) for d in FLOAT_ADDS} | set(INC_DEC)
    assert covered == set(PAIRS)


@pytest.mark.parametrize("op, dtype", ORDER_FREE, ids=[f"{op}-{d}" for op, d in ORDER_FREE])
def test_order_free_pairs_are_bit_exact(op, dtype):
    x = random_operands(op, dtype, (CTAS * ROWS, COLS), RNG)
    y = random_operands(op, dtype, (ROWS, COLS), RNG)
    expected = reference_fold(op, dtype, y, x).tobytes()
    assert on_gpu(reduce_tiles, x, y, OP=op).tobytes() == expected
    assert interpreted(reduce_tiles, x, y, OP=op).tobytes() == expected


@pytest.mark.parametrize("dtype", FLOAT_ADDS, ids=str)
def test_float_adds_with_exact_partial_sums_are_bit_exact(dtype):
    x = exact_float_operands(dtype, (CTAS * ROWS, COLS), RNG)
    y = exact_float_operands(dtype, (ROWS, COLS), RNG)
    expected = reference_fold("add", dtype, y, x).tobytes()
    assert on_gpu(reduce_tiles, x, y, OP="add").tobytes() == expected
    assert interpreted(reduce_tiles, x, y, OP="add").tobytes() == expected


@pytest.mark.parametrize("dtype", FLOAT_ADDS, ids=str)
def test_float_adds_of_any_values_are_within_the_reordering_bound(dtype):
    x = random_operands("add", dtype, (CTAS * ROWS, COLS), RNG)
    y = random_operands("add", dtype, (ROWS, COLS), RNG)
    terms = np.concatenate([y[None], x.reshape(CTAS, ROWS, COLS)]).astype(np.float64)
    exact = np.array([math.fsum(column) for column in terms.reshape(CTAS + 1, -1).T]).reshape(ROWS, COLS)
    bound = CTAS * float(ml_dtypes.finfo(dtype.numpy).eps) * np.abs(terms).sum(axis=0)
    for result in (on_gpu(reduce_tiles, x, y, OP="add"), interpreted(reduce_tiles, x, y, OP="add")):
        error = np.abs(result.astype(np.float64) - exact)
        assert (error <= bound).all(), float((error - bound).max())


@pytest.mark.parametrize("op, dtype", INC_DEC, ids=[f"{op}-{d}" for op, d in INC_DEC])
def test_inc_and_dec_from_one_cta_take_every_branch_bit_exactly(op, dtype):
    x = random_operands(op, dtype, (ROWS, COLS), RNG)  # small values: wraps, resets and steps
    y = random_operands(op, dtype, (ROWS, COLS), RNG)
    expected = reference_step(op, dtype, y, x).tobytes()
    assert on_gpu(reduce_tiles, x, y, OP=op).tobytes() == expected
    assert interpreted(reduce_tiles, x, y, OP=op).tobytes() == expected


@pytest.mark.parametrize("op, dtype", INC_DEC, ids=[f"{op}-{d}" for op, d in INC_DEC])
def test_inc_and_dec_from_many_ctas_count_every_step(op, dtype):
    # No step wraps (inc: d stays below s; dec: d stays between 1 and s), so every order gives
    # y + CTAS (inc) or y - CTAS (dec).
    x = RNG.integers(1000, 2**31 - 1, size=(CTAS * ROWS, COLS)).astype(dtype.numpy)
    low = 0 if op == "inc" else CTAS
    y = RNG.integers(low, 1000 - CTAS, size=(ROWS, COLS)).astype(dtype.numpy)
    expected = (y + CTAS if op == "inc" else y - CTAS).astype(dtype.numpy)
    assert reference_fold(op, dtype, y, x).tobytes() == expected.tobytes()
    assert on_gpu(reduce_tiles, x, y, OP=op).tobytes() == expected.tobytes()
    assert interpreted(reduce_tiles, x, y, OP=op).tobytes() == expected.tobytes()


@pytest.mark.parametrize("op, dtype", [("add", ad.float32), ("smax", ad.int64), ("inc", ad.uint32),
                                       ("xor", ad.uint64), ("min", ad.bfloat16)], ids=str)
def test_a_box_past_the_end_reduces_only_what_is_inside(op, dtype):
    x = random_operands(op, dtype, (ROWS, COLS), RNG)
    y = random_operands(op, dtype, (ROWS + 4, COLS), RNG)
    expected = y.copy()
    expected[ROWS:] = reference_step(op, dtype, y[ROWS:], x[:4])
    assert on_gpu(reduce_at_row, x, y, ROW=ROWS, OP=op).tobytes() == expected.tobytes()
    assert interpreted(reduce_at_row, x, y, ROW=ROWS, OP=op).tobytes() == expected.tobytes()

