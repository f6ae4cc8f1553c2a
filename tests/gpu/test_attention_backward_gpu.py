"""The library's attention backward (`asyncdsl.kernels.attention_backward`) on the GPU: its
kernels (both main kernels: head dims up to 128 and above) against the interpreter from the same
inputs; on torch tensors, dq, dk, dv against float64 gradients no worse than twice the error of
torch's own bf16 backward (SDPA with cuDNN, else another of its backends) on the same inputs,
causal and not, grouped k/v heads, both layouts, head dims 64 to 256, sequences that are not
whole blocks; and the deterministic mode's bits the same over five runs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.kernels.attention_backward import attention_backward_kernel
from asyncdsl.kernels.attention_backward_rows import finish_dq, prepare
from asyncdsl.kernels.attention_backward_wide import attention_backward_wide_kernel

hopper_or_skip()
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("q_shape,kv_heads,causal,layout", [
    ((1, 2, 200, 64), 1, True, "BHSD"), ((1, 130, 2, 128), 2, False, "BSHD"),
    ((1, 2, 150, 192), 1, True, "BSHD"), ((1, 1, 130, 256), 1, True, "BHSD")])
def test_the_kernels_on_the_gpu_are_the_interpreters(q_shape, kv_heads, causal, layout):
    """Each kernel from the same inputs (the interpreter's outputs of the one before); the GPU's
    ex2.approx differs from the interpreter's exact exp2 in the last bits of p."""
    rng = np.random.default_rng(sum(q_shape))
    b, h, s, d = (q_shape[layout.index(axis)] for axis in "BHSD")
    kv_shape = list(q_shape)
    kv_shape[layout.index("H")] = kv_heads
    q, o, do = (rng.standard_normal(q_shape).astype(ml_dtypes.bfloat16) for _ in range(3))
    k, v = (rng.standard_normal(kv_shape).astype(ml_dtypes.bfloat16) for _ in range(2))
    lse = (rng.standard_normal((b, h, s)) + 4).astype(np.float32)
    flags = np.full((b, h, -(-s // 64)), 7, np.int32)
    prepared, prepared_host = gpu_and_interpreter(
        prepare, [o, do], [np.full((b, h, s), np.nan, np.float32), np.full((b, h, s, d), np.nan, np.float32),
                           flags], LAYOUT=layout)
    delta = prepared_host[0]
    sums = {}
    for deterministic in (False, True):
        outputs = [np.zeros((b, h, s, d), np.float32), np.full(kv_shape, np.nan, ml_dtypes.bfloat16),
                   np.full(kv_shape, np.nan, ml_dtypes.bfloat16), np.zeros_like(flags)]
        main = attention_backward_kernel if d <= 128 else attention_backward_wide_kernel
        sums[deterministic] = gpu_and_interpreter(
            main, [q, k, v, do, lse, delta], outputs, CAUSAL=causal,
            DETERMINISTIC=deterministic, LAYOUT=layout)
    (dq,), (host_dq,) = gpu_and_interpreter(finish_dq, [sums[True][1][0]],
                                            [np.full(q_shape, np.nan, ml_dtypes.bfloat16)], LAYOUT=layout)
    # Everything launched before the first check: `--compile-only` compiles every kernel.
    np.testing.assert_allclose(prepared[0], delta, rtol=1e-5, atol=1e-4)
    assert not prepared[1].any() and not prepared[2].any() and not prepared_host[1].any()
    for gpu, host in sums.values():
        for name, got, wanted in zip(("dq sum", "dk", "dv"), gpu, host):
            np.testing.assert_allclose(got.astype(np.float64), wanted.astype(np.float64), rtol=2e-2,
                                       atol=2e-2, err_msg=name)
    assert np.array_equal(dq.view(np.uint16), host_dq.view(np.uint16))


def _inputs(torch, q_shape, kv_heads, layout, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    kv_shape = list(q_shape)
    kv_shape[layout.index("H")] = kv_heads
    q, do = (torch.randn(q_shape, device="cuda", generator=generator).to(torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(kv_shape, device="cuda", generator=generator).to(torch.bfloat16) for _ in range(2))
    return q, k, v, do


def _to_bhsd(x, layout):
    return x if layout == "BHSD" else x.transpose(1, 2)


def _torch_gradients(torch, q, k, v, do, causal, layout, dtype):
    """dq, dk, dv (in `layout`) of attention on q, k, v converted to `dtype`: float64 through
    plain operations, bf16 through SDPA (cuDNN where it takes the shape)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    group = q.shape[layout.index("H")] // k.shape[layout.index("H")]
    leaves = [_to_bhsd(x, layout).to(dtype).detach().requires_grad_() for x in (q, k, v)]
    qb, kb, vb = leaves[0], *(x.repeat_interleave(group, dim=1) for x in leaves[1:])
    if dtype == torch.float64:
        logits = qb @ kb.transpose(-1, -2) / qb.shape[-1] ** 0.5
        if causal:
            logits = logits.masked_fill(torch.ones_like(logits, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.softmax(logits, dim=-1) @ vb
    else:
        backends = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
        with sdpa_kernel(backends):
            o = F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal)
    o.backward(_to_bhsd(do, layout).to(dtype))
    return [_to_bhsd(x.grad, layout) for x in leaves]


@pytest.mark.parametrize("q_shape,kv_heads,causal,layout", [
    ((2, 4, 1000, 64), 4, False, "BHSD"), ((1, 8, 1000, 128), 2, True, "BHSD"),
    ((1, 777, 4, 128), 1, False, "BSHD"), ((2, 1024, 4, 64), 2, True, "BSHD"),
    ((1, 16, 2048, 128), 16, True, "BHSD"), ((1, 8, 1000, 192), 2, True, "BSHD"),
    ((2, 4, 777, 256), 4, False, "BHSD"), ((1, 8, 1024, 256), 8, True, "BHSD"),
])
def test_gradients_are_no_worse_than_twice_torchs_bf16_backward(q_shape, kv_heads, causal, layout):
    torch = pytest.importorskip("torch")
    q, k, v, do = _inputs(torch, q_shape, kv_heads, layout, seed=sum(q_shape))
    o, lse = K.attention(q, k, v, causal=causal, layout=layout)
    ours = K.attention_backward(q, k, v, o, lse, do, causal=causal, layout=layout)
    exact = _torch_gradients(torch, q, k, v, do, causal, layout, torch.float64)
    theirs = _torch_gradients(torch, q, k, v, do, causal, layout, torch.bfloat16)
    for name, got, peer, wanted in zip(("dq", "dk", "dv"), ours, theirs, exact):
        assert got.dtype == torch.bfloat16 and got.shape == wanted.shape, name
        error = float((got.double() - wanted).abs().max())
        peer_error = float((peer.double() - wanted).abs().max())
        assert error <= 2 * peer_error, f"{name}: {error:.3e} against torch's {peer_error:.3e}"


@pytest.mark.parametrize("causal,head_dim", [(False, 128), (True, 128), (True, 64), (False, 256)])
def test_the_deterministic_mode_gives_the_same_bits_five_times(causal, head_dim):
    torch = pytest.importorskip("torch")
    q, k, v, do = _inputs(torch, (2, 8, 2048, head_dim), 2, "BHSD", seed=5)
    o, lse = K.attention(q, k, v, causal=causal)
    runs = [K.attention_backward(q, k, v, o, lse, do, causal=causal, deterministic=True) for _ in range(5)]
    for run in runs[1:]:
        for first, again in zip(runs[0], run):
            assert torch.equal(first.view(torch.int16), again.view(torch.int16))
