"""The row kernels' host functions on a matrix of no rows (an empty batch), as torch's own
functions give it: outputs of no rows, weight gradients of zero (sums of none), the loss of no
rows nan for "mean" (0/0), 0 for "sum", none for "none"; nothing launched."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl.kernels as K
from asyncdsl.kernels.layer_norm_backward import layer_norm_backward, layer_norm_forward
from asyncdsl.kernels.rms_norm_backward import rms_norm_backward, rms_norm_forward

BF16 = ml_dtypes.bfloat16
N = 640
X, W = np.zeros((0, N), BF16), np.ones(N, BF16)
NONE = np.zeros(0, np.float32)


@pytest.mark.parametrize("call,shapes", [
    (lambda: K.rms_norm(X, W), [(0, N)]),
    (lambda: K.softmax(X), [(0, N)]),
    (lambda: K.layer_norm(X, W, W), [(0, N)]),
    (lambda: K.quantize_fp8(X), [(0, N), (0,)]),
    (lambda: rms_norm_forward(X, W), [(0, N), (0,)]),
    (lambda: layer_norm_forward(X, W, W), [(0, N), (0,), (0,)]),
], ids=["rms_norm", "softmax", "layer_norm", "quantize_fp8", "rms_norm_forward", "layer_norm_forward"])
def test_a_forward_of_no_rows_gives_outputs_of_no_rows(call, shapes):
    outputs = call()
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert [o.shape for o in outputs] == shapes


def test_a_norms_backward_of_no_rows_gives_zero_weight_gradients():
    dx, dw = rms_norm_backward(X, X, W, NONE)
    assert dx.shape == (0, N) and dw.dtype == W.dtype and not dw.astype(np.float32).any()
    dx, dw, db = layer_norm_backward(X, X, W, NONE, NONE)
    assert dx.shape == (0, N) and dw.shape == db.shape == (N,)
    assert not dw.astype(np.float32).any() and not db.astype(np.float32).any()


@pytest.mark.parametrize("reduction,loss", [("mean", np.nan), ("sum", 0.0), ("none", NONE)])
def test_the_loss_of_no_rows_is_torchs(reduction, loss):
    targets = np.zeros(0, np.int64)
    got, dlogits = K.cross_entropy(np.zeros((0, 1000), BF16), targets, reduction=reduction)
    np.testing.assert_array_equal(got, loss)
    assert dlogits.shape == (0, 1000)
    got, dh, dweight = K.linear_cross_entropy(np.zeros((0, 256), BF16), np.ones((512, 256), BF16), targets,
                                              reduction=reduction)
    np.testing.assert_array_equal(got, loss)
    assert dh.shape == (0, 256) and dweight.shape == (512, 256) and not dweight.any()
