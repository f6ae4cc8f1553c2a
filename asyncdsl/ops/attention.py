"""Attention as a differentiable torch operator: `o = asyncdsl.ops.attention(q, k, v, causal=True)`.

The forward pass is `asyncdsl.kernels.attention`, which also returns the rows' log-sum-exp; the
operator keeps q, k, v, o and that log-sum-exp for the backward pass,
`asyncdsl.kernels.attention_backward`, which gives dq, dk and dv in the forward's layout (dk and
dv summed over the query heads of a group under grouped-query attention).  Both passes are
`torch.library` operators (`asyncdsl::attention`, `asyncdsl::attention_backward`) with fake
implementations, so `torch.compile(fullgraph=True)` traces through them and CUDA graphs capture
them: the kernels make their outputs with torch's allocator and nothing reads a value back to
the host.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.kernels.dispatch import flag
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.torch import library_call, library_op

LAYOUTS = ("BHSD", "BSHD")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              layout: str = "BHSD", deterministic: bool = False) -> torch.Tensor:
    """softmax(q kᵀ / √D) v of bf16 q (B, H, S, D) and k, v (B, H_kv, S_kv, D) (H_kv dividing H;
    `layout="BSHD"` for (B, S, H, D)), causal or not, differentiable in q, k and v.
    `deterministic=True` makes the backward pass sum dq in a fixed order: the same bits on every
    run."""
    if layout not in LAYOUTS:
        raise ArgumentError(f"attention takes layout 'BHSD' or 'BSHD', got {layout!r}", user_location())
    o, _ = attention_forward(q, k, v, flag(causal, "causal"), layout, flag(deterministic, "deterministic"))
    return o


def _forward(q, k, v, causal, layout, deterministic):
    return library_call(kernels.attention, q.contiguous(), k.contiguous(), v.contiguous(), causal=causal,
                        layout=layout)


def _forward_fake(q, k, v, causal, layout, deterministic):
    rows = tuple(q.shape[layout.index(axis)] for axis in "BHS")
    return q.new_empty(q.shape), q.new_empty(rows, dtype=torch.float32)


attention_forward = library_op(
    "asyncdsl::attention", _forward, fake=_forward_fake,
    schema="(Tensor q, Tensor k, Tensor v, bool causal, str layout, bool deterministic) -> (Tensor, Tensor)")


def _backward(q, k, v, o, lse, do, causal, layout, deterministic):
    dq, dk, dv = library_call(kernels.attention_backward, q.contiguous(), k.contiguous(), v.contiguous(), o,
                              lse, do.contiguous(), causal=causal, deterministic=deterministic,
                              layout=layout)
    return dq, dk, dv


def _backward_fake(q, k, v, o, lse, do, causal, layout, deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


attention_backward = library_op(
    "asyncdsl::attention_backward", _backward, fake=_backward_fake,
    schema="(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor do, bool causal, str layout, "
           "bool deterministic) -> (Tensor, Tensor, Tensor)")


def _save(ctx, inputs, output):
    q, k, v, ctx.causal, ctx.layout, ctx.deterministic = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.mark_non_differentiable(lse)


def _differentiate(ctx, do, _lse_grad):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(q, k, v, o, lse, do, ctx.causal, ctx.layout, ctx.deterministic)
    return dq, dk, dv, None, None, None


attention_forward.register_autograd(_differentiate, setup_context=_save)
