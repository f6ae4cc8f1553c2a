"""Row-wise fp8 quantisation (`asyncdsl.kernels.quantize_fp8`) on every path its plan takes, in
the interpreter, bit for bit against numpy (IEEE arithmetic throughout), all-zero rows included;
the ring's refills; the host function; its refusals (tests/ir/test_ptx.py assembles its PTX at
the benchmarks' shapes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from row_support import assert_refused, random_rows
from support import examples

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.quantize_fp8 import (
    choose,
    reference,
    rowwise_fp8_quant,
    rowwise_fp8_quant_pairs,
    rowwise_fp8_quant_ring,
    rowwise_fp8_quant_split,
)


def _specs(rows: int, n: int) -> tuple:
    return (ad.ArraySpec((rows, n), ad.bfloat16), ad.ArraySpec((rows, n), ad.float8_e4m3fn),
            ad.ArraySpec((rows,), ad.float32))


def _assert_exact(q, scales, x) -> None:
    expected_q, expected_scales = reference(x)
    assert q.view(np.uint8).tobytes() == expected_q.view(np.uint8).tobytes()
    assert np.array_equal(scales, expected_scales)


@pytest.mark.parametrize("shape", [(3, 1000), (3, 4096), (2, 8192), (2, 12288), (2, 16384), (2, 20000)],
                         ids=str)
def test_quantisation_matches_numpy_bit_for_bit_on_every_path(shape):
    x = random_rows(shape, 4)
    x[1] = 0  # an all-zero row: scale 0, zeros
    q = np.zeros(shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(shape[0], np.nan, np.float32)
    kernel, constexprs = choose(shape[1])
    kernel.interpret(x, q, scales, **constexprs)
    _assert_exact(q, scales, x)


@settings(max_examples=examples(12))
@given(rows=st.integers(1, 4), n=st.integers(1, 40000), seed=st.integers(0, 2 ** 16))
def test_quantisation_matches_numpy_bit_for_bit_at_any_row_length(rows, n, seed):
    x = random_rows((rows, n), seed)
    x[0] = 0
    _assert_exact(*K.quantize_fp8(x), x)


def test_rows_longer_than_split_from_are_split_over_four_warpgroups_when_quarters_are_whole_steps():
    assert choose(8192)[0] is rowwise_fp8_quant_split  # past SPLIT_FROM: four warpgroups a row
    assert choose(4096)[0] is rowwise_fp8_quant_pairs  # two rows a CTA
    assert choose(3000)[0] is rowwise_fp8_quant_pairs
    assert choose(2048)[0] is rowwise_fp8_quant
    assert choose(12288)[0] is rowwise_fp8_quant_split
    assert choose(16384)[0] is rowwise_fp8_quant_split
    assert choose(20480)[0] is rowwise_fp8_quant_ring  # past RING_FROM: the next rows in flight
    assert choose(32768)[0] is rowwise_fp8_quant_ring
    assert choose(10000)[0] is rowwise_fp8_quant  # quarters of 2500: two sweeps instead
    assert choose(6144)[0] is rowwise_fp8_quant  # quarters of 1536: one warpgroup, one sweep
    assert choose(65536)[0] is rowwise_fp8_quant  # quarters past CHUNK


@pytest.mark.parametrize("shape,stages", [((1, 2048), 3), ((5, 2048), 2), ((9, 4096), 3), ((3, 16384), 2)],
                         ids=str)
def test_the_ring_matches_numpy_bit_for_bit_with_rows_refilled_into_freed_slots(shape, stages):
    """Persistent: two CTAs in the interpreter, so with 5 rows and 2 slots one CTA refills each
    slot, with 1 row the other CTA has none."""
    x = random_rows(shape, 6)
    x[0] = 0
    q = np.zeros(shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(shape[0], np.nan, np.float32)
    rowwise_fp8_quant_ring.interpret(x, q, scales, STAGES=stages)
    _assert_exact(q, scales, x)


def test_the_host_function_writes_the_outputs_given():
    x = random_rows((5, 2000), 7, scale=10)  # an odd number of rows, two a CTA
    out = np.zeros(x.shape, ml_dtypes.float8_e4m3fn), np.full(5, np.nan, np.float32)
    q, scales = K.quantize_fp8(x, out=out)
    assert q is out[0] and scales is out[1]
    _assert_exact(q, scales, x)


def test_an_out_that_is_not_a_pair_apart_from_x_is_refused():
    """out is (q, scales); scales written over x's first row (which is read while they are
    written) gave wrong scales without an error, and a lone q array an internal unpacking error."""
    x = random_rows((4, 1024), 3)
    with pytest.raises(ad.ArgumentError, match=r"out is the pair \(q, scales\), got ndarray") as error:
        K.quantize_fp8(x, out=np.zeros(x.shape, ml_dtypes.float8_e4m3fn))
    assert error.value.location.file == __file__
    with pytest.raises(ad.ArgumentError, match="out shares memory with x"):
        K.quantize_fp8(x, out=(np.zeros(x.shape, ml_dtypes.float8_e4m3fn), x[0, :8].view(np.float32)))


@pytest.mark.parametrize("kernel,specs,constexprs,message", [
    (rowwise_fp8_quant, (*_specs(64, 3000)[:1], ad.ArraySpec((64, 2000), ad.float8_e4m3fn), _specs(64, 1)[2]),
     {"CHUNK": 1024}, r"q must have shape \(64, 3000\)"),
    (rowwise_fp8_quant_split, (*_specs(5, 4096)[:2], ad.ArraySpec((4,), ad.float32)), {},
     r"scales must have shape \(5,\) \(one a row of x\)"),
    (rowwise_fp8_quant_ring, (*_specs(5, 2048)[:2], ad.ArraySpec((5,), ad.bfloat16)), {"STAGES": 2},
     "scales must be float32, got bfloat16"),
    (rowwise_fp8_quant_ring, _specs(4, 1000), {}, "rows of 1000 elements do not split into 4 shares"),
    (rowwise_fp8_quant, _specs(4, 3000), {"CHUNK": 1000}, "CHUNK must be a positive multiple of 1024"),
    (rowwise_fp8_quant, _specs(4, 3000), {"CHUNK": 3}, "CHUNK must be a positive multiple of 1024"),
    # rows converted to q's type: a uint8 q got rounded integers, an int16 x was read as integers
    (rowwise_fp8_quant_pairs, (*_specs(5, 2000)[:1], ad.ArraySpec((5, 2000), ad.uint8), _specs(5, 1)[2]), {},
     "q float8_e4m3fn, got bfloat16 and uint8"),
    (rowwise_fp8_quant_split, (ad.ArraySpec((5, 4096), ad.int16), *_specs(5, 4096)[1:]), {},
     "x must be bfloat16, float16 or float32"),
], ids=["q", "scales", "scales-dtype", "ring-rows", "chunk-1000", "chunk-3", "q-uint8", "x-int16"])
def test_arguments_the_kernels_cannot_take_are_refused(kernel, specs, constexprs, message):
    assert_refused(kernel, specs, constexprs, message)
