"""Variable-length attention (`asyncdsl.kernels.attention_varlen`) and chunked prefill over a paged
KV cache (`asyncdsl.kernels.paged_prefill`) on the GPU against the interpreter from the same
inputs: sequences of length 0, 1 and longer than a CTA's rows, causal and not, grouped k/v heads,
more and fewer keys than queries, pages of 16 and 64; one sequence alone with its neighbours'
rows poisoned (its output within the approximation of the interpreter's, every other row of o
and lse as it was, bit for bit); and the host functions on torch tensors at a benchmark's size
against float64 attention.  Small shapes: they run under compute-sanitizer."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_support import hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.kernels.attention_varlen import reference
from asyncdsl.kernels.paged_prefill import reference as paged_reference
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

BF16 = ml_dtypes.bfloat16


def _offsets(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def _close(o, lse, expected_o, expected_lse):
    # ex2.approx on the GPU, exact exp2 in the interpreter: p and o are bf16, values below 1
    # agree to a few bf16 ulps; rows without keys are 0 and -inf in both.
    np.testing.assert_allclose(o.astype(np.float64), expected_o.astype(np.float64), atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-3, rtol=0)


def _both(function, arrays, outputs, *args, **kwargs):
    """`function` on the GPU (device copies) and in the interpreter, from the same arrays and
    starting outputs; returns ((o, lse) from the GPU, (o, lse) from the interpreter)."""
    gpu_outputs = [to_device(x) for x in outputs]
    function(*(to_device(x) for x in arrays), *args, out=gpu_outputs[0], lse=gpu_outputs[1], **kwargs)
    host_outputs = [x.copy() for x in outputs]
    function(*arrays, *args, out=host_outputs[0], lse=host_outputs[1], **kwargs)
    return [to_host(x) for x in gpu_outputs], host_outputs


@pytest.mark.parametrize("lengths_q,lengths_k,heads,kv_heads,d,causal", [
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 4, 2, 64, False),
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 4, 2, 64, True),
    ((3, 200, 40), (70, 260, 10), 2, 2, 128, True),
    ((129, 64), (0, 333), 2, 1, 256, False),
    ((100,), (100,), 1, 1, 192, True),
])
def test_attention_varlen_on_the_gpu_is_the_interpreters(lengths_q, lengths_k, heads, kv_heads, d, causal):
    rng = np.random.default_rng(sum(lengths_q) + d)
    q = rng.standard_normal((sum(lengths_q), heads, d)).astype(BF16)
    k, v = (rng.standard_normal((sum(lengths_k), kv_heads, d)).astype(BF16) for _ in range(2))
    outputs = [np.full_like(q, np.nan), np.full((heads, len(q)), np.nan, np.float32)]
    arrays = [q, k, v, _offsets(lengths_q), _offsets(lengths_k)]
    (o, lse), (host_o, host_lse) = _both(K.attention_varlen, arrays, outputs, max(lengths_q), max(lengths_k),
                                         causal=causal)
    _close(o, lse, host_o, host_lse)


@pytest.mark.parametrize("causal", [False, True])
def test_one_sequence_with_poisoned_neighbours_writes_only_its_rows(causal):
    rng = np.random.default_rng(5)
    q = rng.standard_normal((400, 2, 64)).astype(BF16)
    k, v = (rng.standard_normal((420, 1, 64)).astype(BF16) for _ in range(2))
    (q0, q1), (k0, k1) = (37, 237), (50, 330)  # 200 queries after 80 cached keys
    q[:q0], q[q1:], k[:k0], k[k1:] = np.nan, np.nan, np.nan, np.nan
    v[:k0], v[k1:] = 3e30, -3e30  # finite: a neighbour's value weighted by exactly 0
    outputs = [np.full_like(q, 7.0), np.full((2, 400), -5.0, np.float32)]
    (o, lse), (host_o, host_lse) = _both(
        K.attention_varlen, [q, k, v, np.array([q0, q1], np.int32), np.array([k0, k1], np.int32)], outputs,
        q1 - q0, k1 - k0, causal=causal)
    _close(o[q0:q1], lse[:, q0:q1], host_o[q0:q1], host_lse[:, q0:q1])
    others = np.ones(400, bool)
    others[q0:q1] = False
    assert o[others].tobytes() == outputs[0][others].tobytes()
    assert lse[:, others].tobytes() == outputs[1][:, others].tobytes()


@pytest.mark.parametrize("page,d", [(16, 64), (64, 128), (16, 256)])
def test_paged_prefill_on_the_gpu_is_the_interpreters(page, d):
    rng = np.random.default_rng(page + d)
    chunks, contexts = (5, 0, 140, 1), (40, 0, 300, 1)
    q = rng.standard_normal((sum(chunks), 4, d)).astype(BF16)
    k_cache, v_cache = (rng.standard_normal((64, page, 2, d)).astype(BF16) for _ in range(2))
    # 19 entries: pages of 16 end inside a block of 64 keys (four pages), whose pieces past the
    # last page read that page again.
    table = np.stack([rng.permutation(64)[:19] for _ in chunks]).astype(np.int32)
    table[0, 3] = 10_000  # past the cache: zeros, never a read outside it
    outputs = [np.full_like(q, np.nan), np.full((4, len(q)), np.nan, np.float32)]
    arrays = [q, k_cache, v_cache, table, np.array(contexts, np.int32), _offsets(chunks)]
    (o, lse), (host_o, host_lse) = _both(K.paged_prefill, arrays, outputs, max(chunks))
    _close(o, lse, host_o, host_lse)


def _torch_lengths(torch, lengths):
    return torch.tensor(_offsets(lengths), dtype=torch.int32, device="cuda")


@pytest.mark.parametrize("causal", [False, True])
def test_the_host_functions_on_torch_tensors_match_float64(causal):
    """8 sequences of 1 to 1,500 tokens, 16 query heads over 4, D = 128: many CTAs a sequence,
    CTAs past short sequences' ends; the same batch as chunks of 64 after a paged context."""
    torch = pytest.importorskip("torch")
    lengths = (1, 1500, 700, 64, 129, 1000, 3, 600)
    q = torch.randn(sum(lengths), 16, 128, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(sum(lengths), 4, 128, device="cuda").to(torch.bfloat16) for _ in range(2))
    cu = _torch_lengths(torch, lengths)
    o, lse = K.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths), causal=causal)
    assert o.dtype == torch.bfloat16 and o.shape == q.shape and tuple(lse.shape) == (16, sum(lengths))
    host = [t.float().cpu().numpy().astype(BF16) for t in (q, k, v)]
    _close(o.float().cpu().numpy(), lse.cpu().numpy(), *reference(*host, _offsets(lengths), _offsets(lengths),
                                                               causal))

    chunks = tuple(min(n, 64) for n in lengths)
    pages = torch.randperm(512, device="cuda")[:8 * 32].reshape(8, 32).to(torch.int32)
    k_cache, v_cache = (torch.randn(512, 64, 4, 128, device="cuda").to(torch.bfloat16) for _ in range(2))
    q_chunks = q[:sum(chunks)].contiguous()
    seq_lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    o, lse = K.paged_prefill(q_chunks, k_cache, v_cache, pages, seq_lens, _torch_lengths(torch, chunks), 64)
    host = [t.float().cpu().numpy().astype(BF16) for t in (q_chunks, k_cache, v_cache)]
    expected = paged_reference(host[0], host[1], host[2], pages.cpu().numpy(), np.array(lengths, np.int32),
                               _offsets(chunks))
    _close(o.float().cpu().numpy(), lse.cpu().numpy(), *expected)
