"""The row kernels of training (the norms' statistics and backwards, SwiGLU's backward,
cross-entropy with its gradient) on the GPU: against the interpreter from the same random inputs
on every path their plans take (the same CTAs, so the same order of every sum; within the
approximate functions' error), then through the host functions on torch tensors against float64
autograd, each gradient's error no worse than twice that of torch's own bfloat16 path, and the
weight gradients the same bits on every run."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_support import assert_within_approximation, gpu_and_interpreter, hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.kernels.cross_entropy import config as cross_entropy_config
from asyncdsl.kernels.cross_entropy import cross_entropy_rows
from asyncdsl.kernels.layer_norm_backward import layer_norm_backward_rows, layer_norm_stats
from asyncdsl.kernels.layer_norm_backward import stats_config as layer_norm_stats_config
from asyncdsl.kernels.linear_cross_entropy import matmul_transposed
from asyncdsl.kernels.rms_norm_backward import backward_config, rms_norm_backward_rows, rms_norm_stats
from asyncdsl.kernels.rms_norm_backward import stats_config as rms_norm_stats_config
from asyncdsl.kernels.swiglu_backward import swiglu_backward_kernel

hopper_or_skip()
pytestmark = pytest.mark.gpu

SMS = 132  # an H200's multiprocessors: the CTAs the host functions launch there
NORM_LENGTHS = [2048, 4096, 5000, 8192, 1000]
VOCABULARIES = [32000, 128256, 50257, 100]


def _rows(rows: int, n: int, seed: int, scale: float = 3.0, offset: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, n)) * scale + offset).astype(ml_dtypes.bfloat16)


def _stats(kernel, inputs, outputs, constexprs, what):
    """GPU against interpreter for a statistics kernel: y within an ulp, the statistics too."""
    gpu, host = gpu_and_interpreter(kernel, inputs, outputs, **constexprs)
    for got, expected in zip(gpu, host):
        assert np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=2 ** -7, atol=1e-6,
                           equal_nan=True), what


@pytest.mark.parametrize("n", NORM_LENGTHS)
def test_rms_norm_statistics_and_backward_on_the_gpu_are_the_interpreters(n):
    m = 300  # more blocks than CTAs for the shorter rows
    x, w, dy = _rows(m, n, 1), _rows(1, n, 2)[0], _rows(m, n, 3, scale=1.0)
    y, rstd = np.full_like(x, np.nan), np.full(m, np.nan, np.float32)
    _stats(rms_norm_stats, [x, w], [y, rstd], rms_norm_stats_config(n), f"rms_norm_stats {n}")
    rstd = K.rms_norm_forward(x, w)[1]
    constexprs = backward_config(n, m, SMS)
    outputs = [np.full_like(x, np.nan), np.full((constexprs["CTAS"], n), np.nan, np.float32)]
    (dx, partial), (host_dx, host_partial) = gpu_and_interpreter(rms_norm_backward_rows, [dy, x, w, rstd],
                                                                 outputs, **constexprs)
    assert_within_approximation(dx, host_dx, f"rms_norm dx {n} {constexprs}")
    assert np.allclose(partial, host_partial, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("n", NORM_LENGTHS)
def test_layer_norm_statistics_and_backward_on_the_gpu_are_the_interpreters(n):
    m = 300
    x, dy = _rows(m, n, 1, offset=20.0), _rows(m, n, 3, scale=1.0)
    w, b = _rows(1, n, 2)[0], _rows(1, n, 4)[0]
    outputs = [np.full_like(x, np.nan), *(np.full(m, np.nan, np.float32) for _ in range(2))]
    _stats(layer_norm_stats, [x, w, b], outputs, layer_norm_stats_config(n), f"layer_norm_stats {n}")
    _, mean, rstd = K.layer_norm_forward(x, w, b)
    constexprs = backward_config(n, m, SMS, sums=2)
    partials = [np.full((constexprs["CTAS"], n), np.nan, np.float32) for _ in range(2)]
    (dx, *gpu_partials), (host_dx, *host_partials) = gpu_and_interpreter(
        layer_norm_backward_rows, [dy, x, w, mean, rstd], [np.full_like(x, np.nan), *partials], **constexprs)
    assert_within_approximation(dx, host_dx, f"layer_norm dx {n} {constexprs}")
    for got, expected in zip(gpu_partials, host_partials):
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("shape", [(512, 14336), (5, 3000), (3, 7)], ids=str)
def test_swiglu_backward_on_the_gpu_is_the_interpreters(shape):
    dy, a, b = _rows(*shape, 1, scale=1.0), _rows(*shape, 2), _rows(*shape, 3)
    outputs = [np.full_like(a, np.nan) for _ in range(2)]
    (da, db), (host_da, host_db) = gpu_and_interpreter(swiglu_backward_kernel, [dy, a, b], outputs,
                                                       CHUNK=2048)
    assert_within_approximation(da, host_da, f"swiglu da {shape}")
    assert_within_approximation(db, host_db, f"swiglu db {shape}")


@pytest.mark.parametrize("v", VOCABULARIES)
def test_cross_entropy_on_the_gpu_is_the_interpreters(v):
    n = 8 if v > 50000 else 64
    logits = _rows(n, v, 1, scale=4.0)
    targets = np.random.default_rng(2).integers(0, v, n).astype(np.int32)
    targets[::5] = -100
    count = np.array([np.count_nonzero(targets != -100)], np.float32)
    outputs = [np.full(n, np.nan, np.float32), np.full_like(logits, np.nan)]
    (losses, dz), (host_losses, host_dz) = gpu_and_interpreter(
        cross_entropy_rows, [logits, targets, count], outputs, IGNORE=-100, MEAN=True,
        **cross_entropy_config(v))
    assert np.allclose(losses, host_losses, rtol=1e-5, atol=1e-6, equal_nan=True), f"losses {v}"
    assert_within_approximation(dz, host_dz, f"dlogits {v}")


def test_the_gemms_with_a_transposed_operand_on_the_gpu_are_the_interpreters():
    a, b = _rows(200, 136, 1, scale=1.0), _rows(136, 264, 2, scale=1.0)
    a_t, b_t = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    (c,), (host_c,) = gpu_and_interpreter(matmul_transposed, [a, b_t],
                                          [np.full((200, 264), np.nan, a.dtype)], CTAS=SMS, TRANSPOSED="b")
    assert np.allclose(c.astype(np.float64), host_c.astype(np.float64), rtol=2 ** -7, atol=1e-2,
                       equal_nan=True)
    (c,), (host_c,) = gpu_and_interpreter(matmul_transposed, [a_t, b], [np.zeros((200, 264), np.float32)],
                                          CTAS=SMS, TRANSPOSED="a", ADDS=True)
    assert np.allclose(c, host_c, rtol=1e-5, atol=1e-3, equal_nan=True)


# -- through the host functions, on torch tensors ------------------------------------------------------------

def _errors(got, expected) -> list[float]:
    """Each gradient's largest error relative to the largest float64 value."""
    return [float((g.double() - e).abs().max() / e.abs().max()) for g, e in zip(got, expected)]


def _float64_gradients(fn, inputs, dy):
    """The gradients of (fn(*inputs) · dy).sum() in float64 autograd."""
    import torch

    wide = [t.detach().double().requires_grad_() for t in inputs]
    return torch.autograd.grad((fn(*wide) * dy.double()).sum(), wide)


def _bf16_gradients(fn, inputs, dy):
    """torch's own bfloat16 path: autograd of fn on the bfloat16 tensors."""
    import torch

    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    return torch.autograd.grad((fn(*leaves) * dy).sum(), leaves)


@pytest.mark.parametrize("n", [2048, 4096, 8192])
def test_norm_gradients_are_within_twice_torchs_bf16_error_and_deterministic(n):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(n)
    x = (torch.randn(4096, n, device="cuda", generator=g) * 3).bfloat16()
    dy = torch.randn(4096, n, device="cuda", generator=g).bfloat16()
    w, b = (torch.randn(n, device="cuda", generator=g).bfloat16() for _ in range(2))

    def rms_norm(x, w):
        return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * w

    _, rstd = K.rms_norm_forward(x, w)
    ours = K.rms_norm_backward(dy, x, w, rstd)
    expected = _float64_gradients(rms_norm, (x, w), dy)
    torchs = _bf16_gradients(lambda x, w: F.rms_norm(x, (n,), w, 1e-6), (x, w), dy)
    for mine, theirs in zip(_errors(ours, expected), _errors(torchs, expected)):
        assert mine <= 2 * theirs + 1e-6, (mine, theirs)
    assert all(torch.equal(K.rms_norm_backward(dy, x, w, rstd)[1], ours[1]) for _ in range(3))

    _, mean, rstd = K.layer_norm_forward(x, w, b)
    ours = K.layer_norm_backward(dy, x, w, mean, rstd)
    layer_norm = lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5)  # noqa: E731
    expected = _float64_gradients(layer_norm, (x, w, b), dy)
    torchs = _bf16_gradients(layer_norm, (x, w, b), dy)
    for mine, theirs in zip(_errors(ours, expected), _errors(torchs, expected)):
        assert mine <= 2 * theirs + 1e-6, (mine, theirs)
    assert all(torch.equal(K.layer_norm_backward(dy, x, w, mean, rstd)[1], ours[1]) for _ in range(3))


def test_swiglu_gradients_are_within_twice_torchs_bf16_error():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(0)
    a, b, dy = (torch.randn(4096, 14336, device="cuda", generator=g).bfloat16() for _ in range(3))
    swiglu = lambda a, b: F.silu(a) * b  # noqa: E731
    expected = _float64_gradients(swiglu, (a, b), dy)
    theirs = _errors(_bf16_gradients(swiglu, (a, b), dy), expected)
    for mine, bound in zip(_errors(K.swiglu_backward(dy, a, b), expected), theirs):
        assert mine <= 2 * bound + 1e-6, (mine, bound)


@pytest.mark.parametrize("v", [32000, 128256])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_is_within_twice_torchs_bf16_error_and_deterministic(v, reduction):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(v)
    logits = (torch.randn(2048, v, device="cuda", generator=g) * 4).bfloat16()
    targets = torch.randint(0, v, (2048,), device="cuda", generator=g)
    targets[::7] = -100
    loss, dz = K.cross_entropy(logits, targets, reduction=reduction)
    wide = logits.double().requires_grad_()
    expected_loss = F.cross_entropy(wide, targets, reduction=reduction)
    (expected,) = torch.autograd.grad(expected_loss, wide)
    leaf = logits.clone().requires_grad_()
    theirs_loss = F.cross_entropy(leaf, targets, reduction=reduction)
    (theirs,) = torch.autograd.grad(theirs_loss, leaf)
    assert dz.dtype == torch.bfloat16 and loss.dtype == torch.float32 and loss.shape == ()
    assert _errors([dz], [expected])[0] <= 2 * _errors([theirs], [expected])[0] + 1e-6
    loss_error = abs(float(loss) - float(expected_loss))
    assert loss_error <= 2 * abs(float(theirs_loss) - float(expected_loss)) + 1e-4
    assert all(torch.equal(K.cross_entropy(logits, targets, reduction=reduction)[1], dz) for _ in range(3))
    mine = logits.clone()
    over = K.cross_entropy(mine, targets, reduction=reduction, inplace=True)[1]
    assert over.data_ptr() == mine.data_ptr()
    assert torch.equal(mine, dz)


def test_with_every_target_ignored_the_losses_and_gradients_are_torchs():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(3)
    h = torch.randn(300, 512, device="cuda", generator=g).bfloat16()
    weight = (torch.randn(32000, 512, device="cuda", generator=g) * 0.02).bfloat16()
    targets = torch.full((300,), -100, device="cuda")
    logits = (h @ weight.T).requires_grad_()
    for reduction in ("mean", "sum", "none"):
        theirs = F.cross_entropy(logits, targets, reduction=reduction)
        (their_grad,) = torch.autograd.grad(theirs.sum(), logits)
        loss, dz = K.cross_entropy(logits.detach(), targets, reduction=reduction)
        torch.testing.assert_close(loss, theirs.float(), rtol=0, atol=0, equal_nan=True)
        assert torch.equal(dz.float(), their_grad.float()), reduction
    loss, dh, dweight = K.linear_cross_entropy(h, weight, targets)  # "mean": torch's 0/0
    assert loss.isnan() and not dh.any() and not dweight.any()


def test_shifted_and_strided_torch_targets_give_what_a_dense_copy_gives():
    """labels[1:] starts 8 bytes off 16, a column of a table is strided: both are copied dense
    before the launch (`target_words`), the caller's tensor left as it was."""
    torch = pytest.importorskip("torch")

    g = torch.Generator(device="cuda").manual_seed(5)
    h = torch.randn(300, 512, device="cuda", generator=g).bfloat16()
    weight = (torch.randn(32000, 512, device="cuda", generator=g) * 0.02).bfloat16()
    labels = torch.randint(0, 32000, (301,), device="cuda", generator=g)
    table = torch.randint(0, 32000, (300, 3), device="cuda", generator=g)
    logits = h @ weight.T
    for targets in (labels[1:], table[:, 1], labels.int()[1:]):  # int32 4 bytes off
        before = targets.clone()
        dense = targets.clone(memory_format=torch.contiguous_format)
        for mine, theirs in ((K.cross_entropy(logits, targets), K.cross_entropy(logits, dense)),
                             (K.linear_cross_entropy(h, weight, targets),
                              K.linear_cross_entropy(h, weight, dense))):
            assert all(torch.equal(a, b) for a, b in zip(mine, theirs))
        assert torch.equal(targets, before)


@pytest.mark.parametrize("tokens,hidden,v", [(4096, 2048, 32000), (1000, 4096, 128256)])
def test_linear_cross_entropy_is_within_twice_torchs_bf16_error(tokens, hidden, v):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(v)
    h = torch.randn(tokens, hidden, device="cuda", generator=g).bfloat16()
    weight = (torch.randn(v, hidden, device="cuda", generator=g) * 0.02).bfloat16()
    targets = torch.randint(0, v, (tokens,), device="cuda", generator=g)
    targets[::7] = -100

    def loss_of(h, weight):
        return F.cross_entropy(h @ weight.T, targets)

    loss, dh, dweight = K.linear_cross_entropy(h, weight, targets)
    assert dh.dtype == torch.bfloat16 and dweight.dtype == torch.float32 and loss.shape == ()
    wide = [t.double().requires_grad_() for t in (h, weight)]
    expected_loss = loss_of(*wide)
    expected = torch.autograd.grad(expected_loss, wide)
    leaves = [t.clone().requires_grad_() for t in (h, weight)]
    theirs_loss = loss_of(*leaves)
    theirs = torch.autograd.grad(theirs_loss, leaves)
    for mine, bound in zip(_errors((dh, dweight), expected), _errors(theirs, expected)):
        assert mine <= 2 * bound + 1e-6, (mine, bound)
    loss_error = abs(float(loss) - float(expected_loss))
    assert loss_error <= 2 * abs(float(theirs_loss) - float(expected_loss)) + 1e-4
    again = K.linear_cross_entropy(h, weight, targets)
    assert torch.equal(again[1], dh) and torch.equal(again[2], dweight)
