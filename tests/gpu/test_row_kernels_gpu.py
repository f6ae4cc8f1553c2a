"""The row examples (softmax, RMSNorm, LayerNorm, fp8 quantisation) on every path their `choose`
takes, on the GPU against the interpreter from the same random rows: several rows a CTA, rows
held whole, rows split over warpgroups, rows in pieces, rows of any length read padded, and the
fp8 ring.  IEEE arithmetic (the fp8 quantisation) bit for bit; kernels using `ex2.approx` or
`rsqrt.approx` within one ulp of their bfloat16 output."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_support import assert_within_approximation, gpu_and_interpreter, hopper_or_skip

from asyncdsl.examples import layer_norm, rms_norm, rowwise_fp8_quant, softmax

hopper_or_skip()
pytestmark = pytest.mark.gpu

# Rows a CTA, halves, whole rows, pieces, padded lengths (odd ones: rows not 16-byte aligned).
LENGTHS = [512, 640, 1000, 1152, 2100, 4096, 5000, 5120, 6000, 6144, 7000, 8000, 8192, 8193, 12288, 12345,
           16384]


def _rows(rows: int, n: int, seed: int, offset: float = 0.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((rows, n)) * 3 + offset).astype(ml_dtypes.bfloat16)


def _vector(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("n", LENGTHS)
def test_softmax_on_the_gpu_is_the_interpreters_on_every_path(n):
    x = _rows(5, n, n)
    kernel, constexprs = softmax.choose(n)
    (gpu,), (host,) = gpu_and_interpreter(kernel, [x], [np.full_like(x, np.nan)], **constexprs)
    assert_within_approximation(gpu, host, f"{kernel.name} {constexprs}")


@pytest.mark.parametrize("n", LENGTHS)
def test_rms_norm_on_the_gpu_is_the_interpreters_on_every_path(n):
    x, w = _rows(5, n, n), _vector(n, n + 1)
    kernel, constexprs = rms_norm.choose(n)
    (gpu,), (host,) = gpu_and_interpreter(kernel, [x, w], [np.full_like(x, np.nan)], **constexprs)
    assert_within_approximation(gpu, host, f"{kernel.name} {constexprs}")


@pytest.mark.parametrize("n", LENGTHS)
def test_layer_norm_on_the_gpu_is_the_interpreters_on_every_path(n):
    x, w, b = _rows(5, n, n, offset=50.0), _vector(n, n + 1), _vector(n, n + 2)
    x[2] = 7  # a constant row: its output is the bias, on both
    kernel, constexprs = layer_norm.choose(n)
    (gpu,), (host,) = gpu_and_interpreter(kernel, [x, w, b], [np.full_like(x, np.nan)], **constexprs)
    assert_within_approximation(gpu, host, f"{kernel.name} {constexprs}")
    assert np.array_equal(gpu[2], b)


@pytest.mark.parametrize("n", [*LENGTHS, 2048, 20000, 32768])
def test_fp8_quantisation_on_the_gpu_is_the_interpreters_bit_for_bit_on_every_path(n):
    x = _rows(5, n, n)
    x[1] = 0  # an all-zero row: scale 0 and zeros
    kernel, constexprs = rowwise_fp8_quant.choose(n)
    q = np.zeros(x.shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(x.shape[0], np.nan, np.float32)
    (gpu_q, gpu_scales), (host_q, host_scales) = gpu_and_interpreter(kernel, [x], [q, scales], **constexprs)
    assert gpu_q.view(np.uint8).tobytes() == host_q.view(np.uint8).tobytes(), f"{kernel.name} {constexprs}"
    assert gpu_scales.tobytes() == host_scales.tobytes()
