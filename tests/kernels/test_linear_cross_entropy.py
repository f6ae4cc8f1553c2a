"""The fused last layer and cross-entropy (`asyncdsl.kernels.linear_cross_entropy`) in the
interpreter against numpy in float64, whose gradients are themselves checked by finite
differences; the GEMMs with a transposed operand it is built on; ptxas at Llama's shapes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from grad_support import assert_no_spills, numerical_gradient, relative_error

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.cross_entropy import reference as cross_entropy_reference
from asyncdsl.kernels.linear_cross_entropy import chunk_rows, matmul_transposed

BF16 = ml_dtypes.bfloat16


def reference(h, weight, targets, reduction="mean"):
    """(loss, dh, dweight) in float64."""
    h, weight = h.astype(np.float64), weight.astype(np.float64)
    loss, dz = cross_entropy_reference(h @ weight.T, targets, reduction=reduction)
    return loss, dz @ weight, dz.T @ h


def _inputs(n, hidden, v, seed=0):
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((n, hidden)).astype(BF16)
    weight = (rng.standard_normal((v, hidden)) * 0.2).astype(BF16)
    targets = rng.integers(0, v, n)
    targets[::7] = -100
    return h, weight, targets


def test_the_float64_reference_is_the_gradient_by_finite_differences():
    rng = np.random.default_rng(1)
    h, weight, targets = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), np.array([1, -100, 4, 0])
    _, dh, dweight = reference(h, weight, targets)
    assert np.allclose(dh, numerical_gradient(lambda v: reference(v, weight, targets)[0], h), atol=1e-7)
    assert np.allclose(dweight, numerical_gradient(lambda v: reference(h, v, targets)[0], weight), atol=1e-7)


def test_the_gemm_reads_a_transposed_adding_into_float32_and_b_transposed_into_bfloat16():
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(shape).astype(BF16) for shape in ((72, 136), (136, 200)))
    expected = a.astype(np.float64) @ b.astype(np.float64)
    total = np.ones((72, 200), np.float32)  # the product is added into what c holds
    matmul_transposed.interpret(np.ascontiguousarray(a.T), b, total, CTAS=3, TRANSPOSED="a", ADDS=True)
    assert np.allclose(total, expected + 1, rtol=1e-5, atol=1e-3)
    c = np.full((72, 200), np.nan, BF16)
    matmul_transposed.interpret(a, np.ascontiguousarray(b.T), c, CTAS=3, TRANSPOSED="b")
    assert np.allclose(c.astype(np.float64), expected, rtol=2 ** -8, atol=1e-2)


@pytest.mark.parametrize("n,chunk,reduction,target_type",
                         [(200, 128, "mean", np.int64), (64, None, "sum", np.int32),
                          (130, np.int64(128), "none", np.int64)],  # a numpy integer chunk too
                         ids=str)
def test_loss_and_gradients_match_float64_over_chunks(n, chunk, reduction, target_type):
    h, weight, targets = _inputs(n, 64, 136)
    loss, dh, dweight = K.linear_cross_entropy(h, weight, targets.astype(target_type), reduction=reduction,
                                               chunk=chunk)
    expected_loss, expected_dh, expected_dweight = reference(h, weight, targets, reduction)
    assert dh.dtype == h.dtype and dweight.dtype == np.float32 and dweight.shape == weight.shape
    # the chunk's logits and their gradient are bfloat16 (as an unfused bf16 model's are): a row's
    # loss is within a few roundings of its logits
    assert np.allclose(loss, expected_loss, rtol=2 ** -7, atol=2 ** -6)
    assert relative_error(dh, expected_dh) < 2 ** -7
    assert relative_error(dweight, expected_dweight) < 2 ** -7
    assert not dh[::7].astype(np.float32).any()  # ignored rows


def test_with_every_target_ignored_the_mean_is_nan_and_the_gradients_zero():
    # as torch's cross_entropy(h @ weightᵀ, targets): the mean of no rows is 0/0
    h, weight, _ = _inputs(130, 64, 136)
    targets = np.full(130, -100)
    loss, dh, dweight = K.linear_cross_entropy(h, weight, targets, chunk=128)
    expected_loss, expected_dh, expected_dweight = reference(h, weight, targets)
    assert np.isnan(expected_loss) and np.isnan(loss) and loss.dtype == np.float32
    assert not expected_dh.any() and not dh.astype(np.float32).any()
    assert not expected_dweight.any() and not dweight.any()


def test_chunks_hold_logits_about_the_size_of_h():
    assert chunk_rows(16384, 32000, 4096) == 4096  # 16384 · 4096 / 32000 = 2097 rows, rounded up
    assert chunk_rows(8192, 128256, 4096) == 512
    assert chunk_rows(100, 128256, 4096) == 128  # one GEMM tile at least
    assert chunk_rows(300, 1000, 4096) == 512  # the power of two the rows need, no more


@pytest.mark.parametrize("h_shape,weight_shape", [((8, 64), (100, 72)), ((8, 60), (96, 60)),
                                                  ((8, 64), (100, 64))], ids=str)
def test_shapes_the_gemms_cannot_take_are_refused(h_shape, weight_shape):
    with pytest.raises(ad.ArgumentError, match="must share Hd, and V and Hd must be multiples of 8"):
        K.linear_cross_entropy(np.zeros(h_shape, BF16), np.zeros(weight_shape, BF16), np.zeros(8, np.int64))


@pytest.mark.parametrize("chunk", [6, 0, -4, 4.0, True])
def test_a_chunk_that_would_misalign_the_losses_is_refused_at_the_callers_line(chunk):
    with pytest.raises(ad.ArgumentError, match="chunk must be a positive multiple of 4") as caught:
        K.linear_cross_entropy(np.zeros((8, 64), BF16), np.zeros((64, 64), BF16), np.zeros(8, np.int64),
                               chunk=chunk)
    assert "test_linear_cross_entropy.py" in str(caught.value)


@pytest.mark.parametrize("v,hidden", [(32000, 2048), (128256, 4096)])
def test_the_chunk_gemms_at_llama_shapes_assemble_without_spills(v, hidden, ptxas):
    rows = chunk_rows(16384, v, hidden)
    h, weight = ad.ArraySpec((rows, hidden), ad.bfloat16), ad.ArraySpec((v, hidden), ad.bfloat16)
    logits = ad.ArraySpec((rows, v), ad.bfloat16)
    assert_no_spills(matmul_transposed.ptx(h, weight, logits, CTAS=132, TRANSPOSED="b"))
    dweight = ad.ArraySpec((v, hidden), ad.float32)
    assert_no_spills(matmul_transposed.ptx(logits, h, dweight, CTAS=132, TRANSPOSED="a", ADDS=True))
