"""The library's attention (`asyncdsl.kernels.attention`) on the GPU: against the interpreter
from the same random inputs (causal and not, every head dim, both layouts, grouped k/v heads,
sequences that are not whole blocks), against float64 attention at a benchmark's size, and the
host function on torch tensors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.kernels.attention import attention_kernel, reference

hopper_or_skip()
pytestmark = pytest.mark.gpu


def _inputs(q_shape, kv_heads, layout, seed):
    rng = np.random.default_rng(seed)
    kv_shape = list(q_shape)
    kv_shape[layout.index("H")] = kv_heads
    q = rng.standard_normal(q_shape).astype(ml_dtypes.bfloat16)
    k, v = (rng.standard_normal(kv_shape).astype(ml_dtypes.bfloat16) for _ in range(2))
    return q, k, v


def _check(o, lse, expected_o, expected_lse):
    # ex2.approx on the GPU, exact exp2 in the interpreter (and float64 in the reference): p and o
    # are bf16, values below 1 agree to a few bf16 ulps.
    np.testing.assert_allclose(o.astype(np.float64), expected_o.astype(np.float64), atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-3, rtol=0)


@pytest.mark.parametrize("q_shape,kv_heads,causal,layout", [
    ((1, 2, 256, 64), 2, True, "BHSD"), ((2, 4, 384, 128), 2, False, "BHSD"),
    ((1, 200, 4, 64), 2, True, "BSHD"), ((1, 1, 300, 256), 1, True, "BHSD"),
    ((1, 333, 2, 192), 1, False, "BSHD"), ((1, 2, 70, 128), 1, False, "BHSD"),
])
def test_attention_on_the_gpu_is_the_interpreters(q_shape, kv_heads, causal, layout):
    q, k, v = _inputs(q_shape, kv_heads, layout, sum(q_shape))
    b, s, h = (q_shape[layout.index(axis)] for axis in "BSH")
    outputs = [np.full(q_shape, np.nan, ml_dtypes.bfloat16), np.full((b, h, s), np.nan, np.float32)]
    (o, lse), (host_o, host_lse) = gpu_and_interpreter(attention_kernel, [q, k, v], outputs,
                                                       CAUSAL=causal, LAYOUT=layout)
    _check(o, lse, host_o, host_lse)


@pytest.mark.parametrize("causal", [False, True])
def test_the_host_function_on_torch_tensors_matches_float64(causal):
    """(1, 16, 2048, 128), as the benchmark's shapes are: many CTAs a head, causal CTAs of
    different lengths."""
    torch = pytest.importorskip("torch")
    q, k, v = (torch.randn(1, 16, 2048, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
    o, lse = K.attention(q, k, v, causal=causal)
    assert o.device == q.device and o.dtype == torch.bfloat16 and o.shape == q.shape
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (1, 16, 2048)
    host = [t.float().cpu().numpy().astype(ml_dtypes.bfloat16) for t in (q, k, v)]
    _check(o.float().cpu().numpy(), lse.cpu().numpy(), *reference(*host, causal))
