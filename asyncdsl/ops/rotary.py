"""The rotary position embedding as a differentiable torch operator:
`q, k = asyncdsl.ops.rotary(q, k, cos, sin)`.

q (B, S, H, D) and k (B, S, H_kv, D) are rotated in one launch of `asyncdsl.kernels.rotary`,
as transformers' `apply_rotary_pos_emb` rotates them (`x · cos + rotate_half(x) · sin`, cos and
sin of shape (B, S, D) or (1, S, D)).  The map is linear in q and k, so the backward pass is the
same kernel applied with `inverse=True` (the map's transpose) to the outputs' gradients, and the
operator keeps only cos and sin.  One `torch.library` operator (`asyncdsl::rotary`, whose
`inverse` flag also serves as its own backward) with a fake implementation.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.torch import library_call, library_op


def rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
           sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k rotated by the angles whose cosines and sines are `cos` and `sin`,
    differentiable in q and k (the angles are constants, as transformers computes them)."""
    if cos.requires_grad or sin.requires_grad:
        raise ArgumentError("asyncdsl's rotary embedding is differentiable in q and k only; cos and sin must "
                            "not require gradients (detach them)", user_location())
    return rotary_forward(q, k, cos, sin, False)


def _forward(q, k, cos, sin, inverse):
    return library_call(kernels.rotary, q.contiguous(), k.contiguous(), cos.contiguous(), sin.contiguous(),
                        inverse=inverse)


def _fake(q, k, cos, sin, inverse):
    return q.new_empty(q.shape), k.new_empty(k.shape)


rotary_forward = library_op(
    "asyncdsl::rotary", _forward, fake=_fake,
    schema="(Tensor q, Tensor k, Tensor cos, Tensor sin, bool inverse) -> (Tensor, Tensor)")


def _save(ctx, inputs, output):
    _, _, cos, sin, inverse = inputs
    ctx.save_for_backward(cos, sin)
    ctx.inverse = inverse


def _differentiate(ctx, dq, dk):
    cos, sin = ctx.saved_tensors
    dq, dk = rotary_forward(dq, dk, cos, sin, not ctx.inverse)  # the transpose of the map
    return dq, dk, None, None, None


rotary_forward.register_autograd(_differentiate, setup_context=_save)
