"""Attention over a batch of sequences of different lengths packed end to end, as a differentiable
torch operator: `o = asyncdsl.ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k,
max_seqlen_q, max_seqlen_k, causal=True)`, FlashAttention's varlen interface.

The forward pass is `asyncdsl.kernels.attention_varlen`, which also returns the rows'
log-sum-exp; the backward pass is `asyncdsl.kernels.attention_varlen_backward`.  Both are
`torch.library` operators (`asyncdsl::attention_varlen`, `asyncdsl::attention_varlen_backward`)
with fake implementations: the sequence boundaries stay on the device and the maximum lengths are
plain integers, so nothing is read back to the host, `torch.compile(fullgraph=True)` traces
through them and CUDA graphs capture them.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.kernels.dispatch import flag
from asyncdsl.torch import library_call, library_op


def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, *,
                     causal: bool = False, deterministic: bool = False) -> torch.Tensor:
    """Attention of each sequence's queries over its own keys, for bf16 q (total_q, H, D) and k, v
    (total_k, H_kv, D) holding the sequences one after the other, sequence i in rows
    cu_seqlens_q[i]:cu_seqlens_q[i+1] of q (int32 cumulative lengths from 0, on the device) and
    likewise of k and v; max_seqlen_q/k bound the lengths.  Returns o like q, differentiable in q,
    k and v; `deterministic=True` as `asyncdsl.ops.attention`'s."""
    o, _ = attention_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                                    int(max_seqlen_k), flag(causal, "causal"),
                                    flag(deterministic, "deterministic"))
    return o


def _forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, deterministic):
    return library_call(kernels.attention_varlen, q.contiguous(), k.contiguous(), v.contiguous(),
                        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal)


def _forward_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, deterministic):
    return q.new_empty(q.shape), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


attention_varlen_forward = library_op(
    "asyncdsl::attention_varlen", _forward, fake=_forward_fake,
    schema="(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
           "int max_seqlen_k, bool causal, bool deterministic) -> (Tensor, Tensor)")


def _backward(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
              deterministic):
    dq, dk, dv = library_call(
        kernels.attention_varlen_backward, q.contiguous(), k.contiguous(), v.contiguous(), o, lse,
        do.contiguous(), cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
        deterministic=deterministic)
    return dq, dk, dv


def _backward_fake(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                   deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


attention_varlen_backward = library_op(
    "asyncdsl::attention_varlen_backward", _backward, fake=_backward_fake,
    schema="(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor do, Tensor cu_seqlens_q, "
           "Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, bool causal, bool deterministic) -> "
           "(Tensor, Tensor, Tensor)")


def _save(ctx, inputs, output):
    q, k, v, cu_seqlens_q, cu_seqlens_k, *ctx.constants = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k)
    ctx.mark_non_differentiable(lse)


def _differentiate(ctx, do, _lse_grad):
    q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    dq, dk, dv = attention_varlen_backward(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, *ctx.constants)
    return dq, dk, dv, None, None, None, None, None, None


attention_varlen_forward.register_autograd(_differentiate, setup_context=_save)
