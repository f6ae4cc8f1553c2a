"""The GEMM with a fused bias and activation (`asyncdsl.kernels.gemm_epilogue`) in the
interpreter, against numpy in float64."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K


def _reference(a, b, bias, name):
    x = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    if name == "gelu":  # the tanh form
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    if name == "silu":
        return x / (1 + np.exp(-x))
    return np.maximum(x, 0) if name == "relu" else x


@pytest.mark.parametrize("name", ["gelu", "silu", "relu", "none"])
@pytest.mark.parametrize("shape", [(256, 512, 192), (200, 264, 72)], ids=str)
def test_bias_and_activation_are_applied_to_the_product(shape, name):
    m, n, k = shape
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((m, k)) / 4).astype(ml_dtypes.bfloat16)
    b = (rng.standard_normal((k, n)) / 4).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    c = K.gemm_bias_activation(a, b, bias, name)
    assert c.dtype == ml_dtypes.bfloat16
    # one bf16 rounding of a result a few float32 ulps off, relative also near zero (x·sigmoid
    # has no cancellation); atol covers the float32 sums of the product
    np.testing.assert_allclose(c.astype(np.float64), _reference(a, b, bias, name), rtol=2 ** -7, atol=1e-5)


def test_an_activation_it_does_not_know_is_refused():
    a = np.zeros((128, 64), ml_dtypes.bfloat16)
    with pytest.raises(ad.ArgumentError, match="activation must be one of"):
        K.gemm_bias_activation(a, np.zeros((64, 256), ml_dtypes.bfloat16), np.zeros(256, ml_dtypes.bfloat16),
                               "tanh")


def test_a_bias_of_another_length_is_refused_at_the_callers_line():
    from asyncdsl.kernels.gemm_epilogue import matmul_bias_activation

    bf16 = ad.bfloat16
    message = r"bias must be one value a column of c: shape \(256,\)"
    with pytest.raises(ad.TraceError, match=message) as caught:
        matmul_bias_activation.compile(ad.ArraySpec((128, 64), bf16), ad.ArraySpec((64, 256), bf16),
                                       ad.ArraySpec((128,), bf16), ad.ArraySpec((128, 256), bf16), CTAS=2)
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (4096, 14336, 4096)], ids=str)
def test_the_benchmarks_kernels_assemble_without_spills(shape, ptxas):
    """What `benchmarks/gemm_epilogue.py` runs: the configuration `choose` picks on 132 CTAs."""
    import re

    from asyncdsl.kernels.gemm_choice import choose
    from asyncdsl.kernels.gemm_epilogue import matmul_bias_activation
    from asyncdsl.runtime.ptxas import assemble

    m, n, k = shape
    config = choose(m, n, k, 132)
    bf16 = ad.bfloat16
    ptx = matmul_bias_activation.ptx(ad.ArraySpec((m, k), bf16), ad.ArraySpec((k, n), bf16),
                                     ad.ArraySpec((n,), bf16), ad.ArraySpec((m, n), bf16), CTAS=132,
                                     BN=config.BN, STAGES=config.STAGES, ACTIVATION="gelu")
    ptxas(ptx)
    frames = re.findall(r"(\d+) bytes spill stores", assemble(ptx, verbose=True)[1])
    assert frames and set(frames) == {"0"}, frames


@pytest.mark.parametrize("shape", [(256, 512, 192), (128, 320, 64)], ids=str)
def test_the_fp8_product_with_row_scales_is_the_product_rounded_to_e4m3(shape):
    m, n, k = shape
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    q, scales = K.gemm_fp8_rows(a, b)
    assert q.dtype == ml_dtypes.float8_e4m3fn and scales.shape == (m, -(-n // 256))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    for t in range(scales.shape[1]):
        tile = exact[:, t * 256:(t + 1) * 256]
        np.testing.assert_allclose(scales[:, t], np.abs(tile).max(axis=1) / 448, rtol=1e-5)
    restored = q.astype(np.float64) * np.repeat(scales, 256, axis=1)[:, :n]
    # e4m3 keeps 3 mantissa bits: within half an ulp (2^-4 relative) of each element, or of the
    # smallest normal step of the row's scale
    bound = np.maximum(np.abs(exact) * 2.0 ** -4, np.repeat(scales, 256, axis=1)[:, :n] * 2.0 ** -9)
    assert (np.abs(restored - exact) <= bound * 1.01).all()
