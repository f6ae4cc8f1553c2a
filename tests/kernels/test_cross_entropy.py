"""Cross-entropy with its gradient in one kernel (`asyncdsl.kernels.cross_entropy`) in the
interpreter against numpy in float64, whose gradient is itself checked by finite differences:
every reduction, ignored rows, int32 and int64 targets, in place; ptxas at the vocabularies of
today's models."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from grad_support import assert_no_spills, numerical_gradient

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.cross_entropy import _specs, config, count_valid, cross_entropy_rows, reference


def _logits(shape, dtype, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 4).astype(dtype)


def _targets(n, v, dtype=np.int64, seed=1):
    targets = np.random.default_rng(seed).integers(0, v, n).astype(dtype)
    targets[1::3] = -100  # every third row ignored
    return targets


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_the_float64_reference_is_the_gradient_by_finite_differences(reduction):
    z, targets = np.random.default_rng(0).standard_normal((4, 6)), np.array([2, -100, 5, 0])

    def loss(v):  # "none": the gradient is that of the rows' losses summed
        value = reference(v, targets, reduction=reduction)[0]
        return value.sum() if reduction == "none" else value

    expected = numerical_gradient(loss, z)
    assert np.allclose(reference(z, targets, reduction=reduction)[1], expected, atol=1e-7)


@pytest.mark.parametrize("shape,dtype", [((5, 100), np.float32), ((7, 33), np.float32),
                                         ((4, 9000), ml_dtypes.bfloat16), ((3, 32000), ml_dtypes.bfloat16)],
                         ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_and_gradient_match_float64(shape, dtype, reduction):
    logits, targets = _logits(shape, dtype), _targets(shape[0], shape[1])
    loss, dlogits = K.cross_entropy(logits, targets, reduction=reduction)
    expected_loss, expected_grad = reference(logits, targets, reduction=reduction)
    assert loss.dtype == np.float32 and loss.shape == (() if reduction != "none" else shape[:1])
    assert dlogits.dtype == logits.dtype and dlogits.shape == shape
    assert np.allclose(loss, expected_loss, rtol=1e-5, atol=1e-5)
    # ex2.approx's relative error is about 2^-22; bfloat16 gradients round once
    rounding = 2 ** -8 if dtype == ml_dtypes.bfloat16 else 2 ** -20
    scale = np.abs(expected_grad).max()
    assert np.allclose(dlogits.astype(np.float64), expected_grad, rtol=rounding, atol=rounding * scale)
    assert not dlogits[1::3].astype(np.float32).any()  # ignored rows: no gradient


def test_int32_targets_in_place_and_a_different_ignore_index_give_the_same_results():
    logits = _logits((6, 300), ml_dtypes.bfloat16)
    targets = _targets(6, 300)
    targets[targets == -100] = 7
    loss, dlogits = K.cross_entropy(logits, targets, ignore_index=7)
    mine = logits.copy()
    loss32, over = K.cross_entropy(mine, targets.astype(np.int32), ignore_index=7, inplace=True)
    assert over is mine and np.array_equal(over, dlogits) and loss32 == loss
    assert np.isclose(loss, reference(logits, targets, ignore_index=7)[0], rtol=1e-5)


def test_labels_shifted_by_one_position_are_taken_though_they_start_off_16_bytes():
    """A causal LM's loss takes labels[1:]: an int64 view 8 bytes past its buffer's start."""
    logits = _logits((5, 300), ml_dtypes.bfloat16)
    labels = np.empty(8, np.int64)[2:]  # 16 bytes in, so that labels[1:] is 8 bytes off
    labels[:] = _targets(6, 300)
    shifted = labels[1:]
    assert shifted.ctypes.data % 16 == 8
    loss, dlogits = K.cross_entropy(logits, shifted)
    expected_loss, expected_grad = reference(logits, shifted)
    assert np.isclose(loss, expected_loss, rtol=1e-5)
    assert np.allclose(dlogits.astype(np.float64), expected_grad, rtol=2 ** -8, atol=2 ** -8)
    assert np.array_equal(shifted, labels[1:])  # the caller's labels are left as they were


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_strided_targets_are_copied_dense(dtype):
    """A column of a table of labels: every other integer of its buffer."""
    logits = _logits((5, 300), np.float32)
    table = np.stack([_targets(5, 300), np.arange(5)], axis=1).astype(dtype)
    column = table[:, 0]
    assert not column.flags.c_contiguous
    loss, dlogits = K.cross_entropy(logits, column, reduction="sum")
    expected_loss, expected_grad = reference(logits, column, reduction="sum")
    assert np.isclose(loss, expected_loss, rtol=1e-5)
    assert np.allclose(dlogits, expected_grad, rtol=1e-5, atol=1e-6)


def test_targets_of_other_gpu_arrays_are_passed_on_as_they_are():
    # A DeviceArray (or CuPy's) has no data_ptr(); the launch checks its address as any argument's.
    from asyncdsl.kernels.cross_entropy import target_words

    array = ad.runtime.DeviceArray(0x1008, (6,), (1,), ad.int32, 0)
    assert target_words(array) is array


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_with_every_row_ignored_the_loss_is_that_of_no_rows_and_the_gradient_zero(reduction):
    # torch's cross_entropy: the mean of no rows is 0/0 = nan, their sum 0, each ignored row's loss 0.
    logits, targets = _logits((3, 50), np.float32), np.full(3, -100)
    loss, dlogits = K.cross_entropy(logits, targets, reduction=reduction)
    expected_loss, expected_grad = reference(logits, targets, reduction=reduction)
    assert np.isnan(expected_loss).all() == (reduction == "mean") and not expected_grad.any()
    assert np.array_equal(loss, expected_loss, equal_nan=True) and np.array_equal(dlogits, expected_grad)


@pytest.mark.parametrize("bad", [300, -1])
def test_a_target_outside_the_vocabulary_is_reported_at_the_callers_line(bad):
    targets = _targets(4, 300)
    targets[2] = bad
    with pytest.raises(ad.AssumptionError, match=r"a target is outside \[0, 300\)") as caught:
        K.cross_entropy(_logits((4, 300), np.float32), targets)
    assert "test_cross_entropy.py" in str(caught.value)


def test_an_unknown_reduction_is_refused():
    with pytest.raises(ad.ArgumentError, match=r"reduction must be one of \(.*\), got 'avg'"):
        K.cross_entropy(np.zeros((2, 8), np.float32), np.zeros(2, np.int64), reduction="avg")


def test_targets_of_another_type_are_refused_by_name():
    specs = (ad.ArraySpec((4, 64), ad.float32), ad.ArraySpec((4,), ad.int16), ad.ArraySpec((1,), ad.float32),
             ad.ArraySpec((4,), ad.float32), ad.ArraySpec((4, 64), ad.float32))
    with pytest.raises(ad.TraceError, match="targets must be int32"):
        cross_entropy_rows.compile(*specs, IGNORE=-100, MEAN=True, **config(64))


@pytest.mark.parametrize("v,dtype", [(32000, ad.bfloat16), (128256, ad.bfloat16), (50257, ad.bfloat16),
                                     (32000, ad.float32), (100, ad.bfloat16)], ids=str)
def test_every_vocabulary_assembles_without_spills(v, dtype, ptxas):
    assert_no_spills(cross_entropy_rows.ptx(*_specs(16384, v, dtype), IGNORE=-100, MEAN=True, **config(v)))
    assert_no_spills(count_valid.ptx(ad.ArraySpec((16384, 2), ad.int32), ad.ArraySpec((1,), ad.float32),
                                     IGNORE=-100))
