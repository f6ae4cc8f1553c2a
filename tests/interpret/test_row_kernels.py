"""The row kernels (softmax, RMSNorm, LayerNorm, fp8 quantisation) on every path their
configuration takes, in the interpreter against numpy: several rows a CTA with the last CTA past
the end of the array, a row split over two warpgroups (softmax), one row held whole, rows in
pieces, and rows of any length read from GMEM padded."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import line_of

import asyncdsl as ad
from asyncdsl.examples import layer_norm as layer
from asyncdsl.examples import rms_norm as norm
from asyncdsl.examples import row_plans
from asyncdsl.examples import rowwise_fp8_quant as fp8
from asyncdsl.examples import softmax as soft

SHAPES = [(7, 512), (5, 1024), (3, 4096), (3, 5120), (3, 6144), (3, 8192), (2, 12288), (2, 16384)]


def _rows(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 3).astype(ml_dtypes.bfloat16), rng


# Lengths no multiple of 128 divides (odd ones: rows not 16-byte aligned; 2100: 8-byte aligned),
# a multiple of 128 that softmax pads (1152: 9 elements a thread), windows of 6144 and 7168
# padded to whole vectors, one past a piece, and a multiple of 128 that only 128-wide pieces
# would divide.
ANY_LENGTH = [(5, 1), (5, 7), (3, 100), (3, 1000), (3, 1152), (3, 2100), (2, 3001), (2, 5000), (2, 6000),
              (2, 7000), (2, 8193), (2, 8320), (2, 12345)]


@pytest.mark.parametrize("shape", SHAPES + ANY_LENGTH, ids=str)
def test_softmax_rows_match_numpy_on_every_path(shape):
    x, _ = _rows(shape, 1)
    y = np.full_like(x, np.nan)
    kernel, constexprs = soft.choose(shape[1])
    kernel.interpret(x, y, **constexprs)
    expected = soft.reference(x).astype(np.float64)
    assert np.abs(y.astype(np.float64) - expected).max() <= 2 ** -8  # a bfloat16 ulp of 1


def test_softmax_takes_the_kernel_made_for_the_rows_length():
    assert soft.choose(8192)[0] is soft.softmax_halves
    assert soft.choose(6144)[0] is soft.softmax_halves
    assert soft.choose(4096)[0] is soft.softmax_rows
    assert soft.choose(16384)[0] is soft.softmax_rows
    assert soft.choose(8320)[0] is soft.softmax_padded  # 65 pieces of 128 otherwise
    assert soft.choose(16384 + 8192)[0] is soft.softmax_rows  # pieces of 8192
    assert soft.choose(1000)[0] is soft.softmax_padded
    assert soft.choose(1000)[1] == {"ROWS": 2, "WIDTH": 1024}
    # Halves only of whole 16-byte vectors a thread, padded windows too
    assert soft.choose(5120) == (soft.softmax_rows, {"ROWS": 1, "CHUNK": 5120})
    assert soft.choose(7168) == (soft.softmax_rows, {"ROWS": 1, "CHUNK": 7168})
    assert soft.choose(6000) == (soft.softmax_padded, {"ROWS": 1, "WIDTH": 6144})
    assert soft.choose(8000) == (soft.softmax_padded, {"ROWS": 1, "WIDTH": 8192})
    assert soft.choose(2100) == (soft.softmax_padded, {"ROWS": 1, "WIDTH": 2560})  # 8-byte vectors
    # Multiples of 128 whose rows kernel would move elements alone go padded; 8-byte vectors stay
    assert soft.choose(640) == (soft.softmax_padded, {"ROWS": 2, "WIDTH": 1024})
    assert soft.choose(1152) == (soft.softmax_padded, {"ROWS": 1, "WIDTH": 2048})
    assert soft.choose(768) == (soft.softmax_rows, {"ROWS": 2, "CHUNK": 768})
    assert soft.choose(3584) == (soft.softmax_rows, {"ROWS": 1, "CHUNK": 3584})


def test_the_widest_vector_of_a_row_tile():
    assert row_plans.widest_vector(1, 1024) == 8 and row_plans.widest_vector(4, 256) == 8
    assert row_plans.widest_vector(2, 768) == 4 and row_plans.widest_vector(1, 3584) == 4
    assert row_plans.widest_vector(1, 1152) == 1  # 9 elements a thread
    assert row_plans.widest_vector(3, 640) == 0  # three rows over four warps


@pytest.mark.parametrize("shape", SHAPES + ANY_LENGTH, ids=str)
def test_rms_norm_rows_match_numpy_on_every_path(shape):
    x, rng = _rows(shape, 2)
    w = rng.standard_normal(shape[1]).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    kernel, constexprs = norm.choose(shape[1])
    kernel.interpret(x, w, y, **constexprs)
    expected = norm.reference(x, w, 1e-6).astype(np.float64)
    # float32 sums in another order than numpy's float64: within a bfloat16 rounding of the result
    assert np.allclose(y.astype(np.float64), expected, rtol=2 ** -7, atol=2 ** -7)


def test_rms_norm_takes_the_kernel_made_for_the_rows_length():
    assert norm.choose(4096) == (norm.rms_norm_rows, {"EPS": 1e-6, "ROWS": 2, "CHUNK": 4096})
    assert norm.choose(8192) == (norm.rms_norm_rows, {"EPS": 1e-6, "ROWS": 1, "CHUNK": 8192})  # whole
    assert norm.choose(4224)[0] is norm.rms_norm_rows  # whole, 33 elements a thread
    assert norm.choose(12288) == (norm.rms_norm_rows, {"EPS": 1e-6, "ROWS": 1, "CHUNK": 4096})  # pieces
    assert norm.choose(8320)[0] is norm.rms_norm_padded  # 65 pieces of 128 otherwise
    assert norm.choose(1000, 1e-5) == (norm.rms_norm_padded, {"EPS": 1e-5, "ROWS": 8, "WIDTH": 1024})
    # Longer padded rows one a CTA (two ran 3x slower once compiled by the driver's JIT)
    assert norm.choose(12345) == (norm.rms_norm_padded, {"EPS": 1e-6, "ROWS": 1, "WIDTH": 4096})
    # Padded rows of up to 8192 in one window of whole 16-byte vectors a thread
    assert norm.choose(6000)[1] == {"EPS": 1e-6, "ROWS": 1, "WIDTH": 6144}
    assert norm.choose(8000)[1] == {"EPS": 1e-6, "ROWS": 1, "WIDTH": 8192}
    assert norm.choose(2100)[1] == {"EPS": 1e-6, "ROWS": 2, "WIDTH": 2304}  # 8-byte vectors


@pytest.mark.parametrize("shape", SHAPES + ANY_LENGTH, ids=str)
def test_layer_norm_rows_match_numpy_on_every_path(shape):
    x, rng = _rows(shape, 3)
    x = (x.astype(np.float32) + 100).astype(ml_dtypes.bfloat16)  # a mean far above the spread
    w, b = (rng.standard_normal(shape[1]).astype(ml_dtypes.bfloat16) for _ in range(2))
    y = np.full_like(x, np.nan)
    kernel, constexprs = layer.choose(shape[1])
    kernel.interpret(x, w, b, y, **constexprs)
    expected = layer.reference(x, w, b, 1e-5).astype(np.float64)
    # float32 sums in another order than numpy's float64: within a bfloat16 rounding of the result
    assert np.allclose(y.astype(np.float64), expected, rtol=2 ** -7, atol=2 ** -6)


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 4), n=st.integers(1, 40000), seed=st.integers(0, 2 ** 16))
def test_softmax_rms_norm_and_fp8_match_numpy_at_any_row_length(rows, n, seed):
    """Whichever kernel and configuration each `choose` takes for n (the fp8 quantisation bit
    for bit, with an all-zero row)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, n)) * 3).astype(ml_dtypes.bfloat16)
    kernel, constexprs = soft.choose(n)
    y = np.full_like(x, np.nan)
    kernel.interpret(x, y, **constexprs)
    assert np.abs(y.astype(np.float64) - soft.reference(x).astype(np.float64)).max() <= 2 ** -8
    w = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    kernel, constexprs = norm.choose(n)
    kernel.interpret(x, w, y, **constexprs)
    expected = norm.reference(x, w, 1e-6).astype(np.float64)
    assert np.allclose(y.astype(np.float64), expected, rtol=2 ** -7, atol=2 ** -7)
    x[0] = 0
    q, scales = np.zeros(x.shape, ml_dtypes.float8_e4m3fn), np.full(rows, np.nan, np.float32)
    kernel, constexprs = fp8.choose(n)
    kernel.interpret(x, q, scales, **constexprs)
    expected_q, expected_scales = fp8.reference(x)
    assert q.view(np.uint8).tobytes() == expected_q.view(np.uint8).tobytes()
    assert np.array_equal(scales, expected_scales)


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 4), n=st.integers(1, 9000), offset=st.sampled_from([0.0, 100.0, -1000.0]),
       spread=st.sampled_from([1e-2, 1.0, 30.0]), seed=st.integers(0, 2 ** 16))
def test_layer_norm_matches_numpy_at_any_row_length_mean_and_spread(rows, n, offset, spread, seed):
    """Whichever kernel and configuration `choose` takes for n: rows whose mean is up to 10^5
    spreads away from zero (bfloat16 rounds such rows coarsely, numpy sees the same values)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, n)) * spread + offset).astype(ml_dtypes.bfloat16)
    w, b = (rng.standard_normal(n).astype(ml_dtypes.bfloat16) for _ in range(2))
    y = np.full_like(x, np.nan)
    kernel, constexprs = layer.choose(n)
    kernel.interpret(x, w, b, y, **constexprs)
    expected = layer.reference(x, w, b, 1e-5).astype(np.float64)
    assert np.allclose(y.astype(np.float64), expected, rtol=2 ** -7, atol=2 ** -6)


def test_layer_norm_of_a_constant_row_is_its_bias():
    x = np.full((3, 1000), 7.0, ml_dtypes.bfloat16)
    w = np.full(1000, 2.0, ml_dtypes.bfloat16)
    b = np.linspace(-1, 1, 1000).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    kernel, constexprs = layer.choose(1000)
    kernel.interpret(x, w, b, y, **constexprs)
    # The mean is 7000 / 1000 rounded once, exactly 7: every x - mean is 0, the variance 0 with the
    # padding masked out, and y = 0 · rstd · w + b is b bit for bit.
    assert np.array_equal(y, np.broadcast_to(b, y.shape))


def test_layer_norm_takes_the_kernel_made_for_the_rows_length():
    assert layer.choose(4096) == (layer.layer_norm_rows, {"EPS": 1e-5, "ROWS": 2, "CHUNK": 4096})
    assert layer.choose(8192)[1] == {"EPS": 1e-5, "ROWS": 1, "CHUNK": 8192}  # held whole
    assert layer.choose(16384)[1] == {"EPS": 1e-5, "ROWS": 1, "CHUNK": 4096}  # pieces of 4096
    assert layer.choose(4224)[1] == {"EPS": 1e-5, "ROWS": 1, "CHUNK": 4224}  # held whole
    assert layer.choose(8320)[0] is layer.layer_norm_padded  # 65 pieces of 128 otherwise
    assert layer.choose(1000, 1e-6) == (layer.layer_norm_padded, {"EPS": 1e-6, "ROWS": 8, "WIDTH": 1024})
    assert layer.choose(12345)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 4096}
    # Padded rows in one window of whole 16-byte vectors up to 7168, longer ones in pieces of 4096
    assert layer.choose(6000)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 6144}
    assert layer.choose(7000)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 7168}
    assert layer.choose(8000)[1] == {"EPS": 1e-5, "ROWS": 1, "WIDTH": 4096}


@settings(deadline=None)
@given(n=st.integers(1, 20000), elements=st.sampled_from([2048, 8192]))
def test_padded_windows_are_the_narrowest_of_whole_vectors_a_thread(n, elements):
    """A padded plan covers the row, gives every thread whole vectors as wide as the rows'
    alignment allows, keeps to its budget of elements (or one row), and no narrower window would
    do: the layout rule (warps over rows, lanes over a row's vectors) checked by brute force."""
    rows, width = row_plans.padded_rows(n, elements)
    vector = min(8, n & -n)
    assert width >= n and rows * width <= max(elements, width)
    assert row_plans.whole_vectors(rows, width, vector)
    for narrower in range(n, width):
        counts = range(1, max(1, elements // narrower) + 1)
        assert not any(row_plans.whole_vectors(rows, narrower, vector) for rows in counts)


@pytest.mark.parametrize("shape",
                         [(3, 1000), (3, 4096), (2, 8192), (2, 12288), (2, 16384), (2, 20000)], ids=str)
def test_fp8_quantisation_matches_numpy_bit_for_bit_on_every_path(shape):
    x, _ = _rows(shape, 4)
    x[1] = 0  # an all-zero row: scale 0, zeros
    q = np.zeros(shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(shape[0], np.nan, np.float32)
    kernel, constexprs = fp8.choose(shape[1])
    kernel.interpret(x, q, scales, **constexprs)
    expected_q, expected_scales = fp8.reference(x)
    assert q.view(np.uint8).tobytes() == expected_q.view(np.uint8).tobytes()
    assert np.array_equal(scales, expected_scales)


def test_fp8_rows_longer_than_split_from_are_split_over_four_warpgroups_when_quarters_are_whole_steps():
    assert fp8.choose(8192)[0] is fp8.rowwise_fp8_quant_split  # past SPLIT_FROM: four warpgroups a row
    assert fp8.choose(4096)[0] is fp8.rowwise_fp8_quant_pairs  # two rows a CTA
    assert fp8.choose(3000)[0] is fp8.rowwise_fp8_quant_pairs
    assert fp8.choose(2048)[0] is fp8.rowwise_fp8_quant
    assert fp8.choose(12288)[0] is fp8.rowwise_fp8_quant_split
    assert fp8.choose(16384)[0] is fp8.rowwise_fp8_quant_split
    assert fp8.choose(20480)[0] is fp8.rowwise_fp8_quant_ring  # past RING_FROM: the next rows in flight
    assert fp8.choose(32768)[0] is fp8.rowwise_fp8_quant_ring
    assert fp8.choose(10000)[0] is fp8.rowwise_fp8_quant  # quarters of 2500: two sweeps instead
    assert fp8.choose(6144)[0] is fp8.rowwise_fp8_quant  # quarters of 1536: one warpgroup, one sweep
    assert fp8.choose(65536)[0] is fp8.rowwise_fp8_quant  # quarters past CHUNK


@pytest.mark.parametrize("shape,stages",
                         [((1, 2048), 3), ((5, 2048), 2), ((9, 4096), 3), ((3, 16384), 2)], ids=str)
def test_fp8_ring_matches_numpy_bit_for_bit_with_rows_refilled_into_freed_slots(shape, stages):
    """Persistent: two CTAs in the interpreter, so with 5 rows and 2 slots one CTA refills each
    slot, with 1 row the other CTA has none."""
    x, _ = _rows(shape, 6)
    x[0] = 0
    q = np.zeros(shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(shape[0], np.nan, np.float32)
    fp8.rowwise_fp8_quant_ring.interpret(x, q, scales, STAGES=stages)
    expected_q, expected_scales = fp8.reference(x)
    assert q.view(np.uint8).tobytes() == expected_q.view(np.uint8).tobytes()
    assert np.array_equal(scales, expected_scales)


def test_a_row_ring_refuses_rows_its_warpgroups_cannot_share_in_whole_vectors():
    shape = (4, 1000)
    with pytest.raises(ad.TraceError, match="1000 elements do not split into 4 shares") as caught:
        fp8.rowwise_fp8_quant_ring.compile(ad.ArraySpec(shape, ad.bfloat16),
                                           ad.ArraySpec(shape, ad.float8_e4m3fn),
                                           ad.ArraySpec((4,), ad.float32))
    assert caught.value.location.line == line_of(fp8.rowwise_fp8_quant_ring, "RowRing(x, STAGES, PARTS)")
