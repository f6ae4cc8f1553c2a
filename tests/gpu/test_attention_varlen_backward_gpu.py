"""The variable-length attention backward (`asyncdsl.kernels.attention_varlen_backward`) on the
GPU against the interpreter from the same inputs (the forward's o and lse computed once, in the
interpreter): sequences of length 0, 1 and longer than a block of keys, causal and not, grouped
k/v heads, more and fewer keys than queries, head dims 64 and 128; one sequence alone with its
neighbours' rows poisoned (its gradients within the approximation of the interpreter's, every
other row of dq, dk, dv as it was allocated, bit for bit); the deterministic mode's bits over 5
runs; and the host function on torch tensors at a benchmark's size against float64 gradients.
Small shapes but the last: they run under compute-sanitizer."""

from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np
import pytest
from gpu_support import hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.kernels.attention_varlen_backward import reference
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

BF16 = ml_dtypes.bfloat16
module = importlib.import_module("asyncdsl.kernels.attention_varlen_backward")


def _offsets(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def _inputs(lengths_q, lengths_k, heads, kv_heads, d, causal, seed=0):
    """q, k, v, o, lse, do, cu_q, cu_k (o and lse from the interpreter's forward)."""
    rng = np.random.default_rng(seed)
    q, do = (rng.standard_normal((sum(lengths_q), heads, d)).astype(BF16) for _ in range(2))
    k, v = (rng.standard_normal((sum(lengths_k), kv_heads, d)).astype(BF16) for _ in range(2))
    cu_q, cu_k = _offsets(lengths_q), _offsets(lengths_k)
    o, lse = K.attention_varlen(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal)
    return q, k, v, o, lse, do, cu_q, cu_k


def _on_gpu(arrays, *args, **kwargs):
    return [to_host(x) for x in K.attention_varlen_backward(*(to_device(x) for x in arrays), *args, **kwargs)]


def _close(got, expected, rows=(slice(None),) * 3):
    # ex2.approx on the GPU, exact exp2 in the interpreter; p and ds are bf16 for the tensor cores.
    for name, a, b, mine in zip(("dq", "dk", "dv"), got, expected, rows):
        np.testing.assert_allclose(a[mine].astype(np.float64), b[mine].astype(np.float64), atol=2e-2,
                                   rtol=2e-2, err_msg=name)


@pytest.mark.parametrize("lengths_q,lengths_k,heads,kv_heads,d,causal", [
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 4, 2, 64, False),
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 4, 2, 64, True),
    ((3, 200, 40), (70, 260, 10), 2, 2, 128, True),
    ((129, 64), (0, 333), 2, 1, 128, False),
])
@pytest.mark.parametrize("deterministic", [False, True])
def test_attention_varlen_backward_on_the_gpu_is_the_interpreters(lengths_q, lengths_k, heads, kv_heads, d,
                                                                  causal, deterministic):
    arrays = _inputs(lengths_q, lengths_k, heads, kv_heads, d, causal)
    args = (max(lengths_q), max(lengths_k))
    got = _on_gpu(arrays, *args, causal=causal, deterministic=deterministic)
    _close(got, K.attention_varlen_backward(*arrays, *args, causal=causal, deterministic=deterministic))


@pytest.mark.parametrize("causal", [False, True])
def test_one_sequence_with_poisoned_neighbours_writes_only_its_rows(causal, monkeypatch):
    allocate = module.empty

    def filled(like, shape, dtype):  # outputs, workspace and flags start as 7s, not zeros
        return to_device(np.full(shape, 7, to_host(allocate(like, shape, dtype)).dtype))

    q, k, v, _, _, do, _, _ = _inputs((400,), (420,), 2, 1, 64, causal, seed=5)
    (q0, q1), (k0, k1) = (37, 237), (50, 330)  # 200 queries after 80 cached keys
    one = np.array([q0, q1], np.int32), np.array([k0, k1], np.int32)
    o, lse = K.attention_varlen(q, k, v, *one, q1 - q0, k1 - k0, causal=causal)
    poisoned = [x.copy() for x in (q, k, v, o, do)]
    for x, (start, end) in zip(poisoned, ((q0, q1), (k0, k1), (k0, k1), (q0, q1), (q0, q1))):
        x[:start], x[end:] = 1000.0, -1000.0  # finite: their weights are exactly 0
    lse[:, :q0], lse[:, q1:] = -1000.0, 1000.0
    expected = K.attention_varlen_backward(*poisoned[:4], lse, poisoned[4], *one, q1 - q0, k1 - k0,
                                           causal=causal)
    monkeypatch.setattr(module, "empty", filled)
    got = _on_gpu([*poisoned[:4], lse, poisoned[4], *one], q1 - q0, k1 - k0, causal=causal)
    mine_q, mine_k = np.zeros(400, bool), np.zeros(420, bool)
    mine_q[q0:q1], mine_k[k0:k1] = True, True
    _close(got, expected, (mine_q, mine_k, mine_k))
    for gradient, mine in zip(got, (mine_q, mine_k, mine_k)):
        assert (gradient[~mine].astype(np.float32) == 7.0).all()


@pytest.mark.parametrize("causal", [False, True])
def test_the_deterministic_mode_gives_the_same_bits_over_5_runs(causal):
    """Several key blocks of several query heads add into each query block."""
    arrays = [to_device(x) for x in _inputs((700, 1, 450), (700, 1, 450), 8, 2, 128, causal, seed=7)]
    runs = [[to_host(x) for x in K.attention_varlen_backward(*arrays, 700, 700, causal=causal,
                                                             deterministic=True)] for _ in range(5)]
    for run in runs[1:]:
        for a, b in zip(run, runs[0]):
            assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("causal", [False, True])
def test_the_host_function_on_torch_tensors_matches_float64(causal):
    """8 sequences of 1 to 1,500 tokens, 16 query heads over 4, D = 128."""
    torch = pytest.importorskip("torch")
    lengths = (1, 1500, 700, 64, 129, 1000, 3, 600)
    cu = torch.tensor(_offsets(lengths), dtype=torch.int32, device="cuda")
    q, do = (torch.randn(sum(lengths), 16, 128, device="cuda").to(torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(sum(lengths), 4, 128, device="cuda").to(torch.bfloat16) for _ in range(2))
    o, lse = K.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths), causal=causal)
    got = K.attention_varlen_backward(q, k, v, o, lse, do, cu, cu, max(lengths), max(lengths), causal=causal)
    assert [x.shape for x in got] == [q.shape, k.shape, v.shape]
    assert all(x.dtype == torch.bfloat16 for x in got)
    host = [t.float().cpu().numpy().astype(BF16) for t in (q, k, v, do)]
    expected = reference(*host, _offsets(lengths), _offsets(lengths), causal)
    for name, a, b in zip(("dq", "dk", "dv"), got, expected):
        np.testing.assert_allclose(a.float().cpu().numpy(), b, atol=3e-2, rtol=3e-2, err_msg=name)
