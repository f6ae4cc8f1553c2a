"""Cross-entropy of a linear layer's logits as a differentiable torch operator, the logits never
made whole: `loss = asyncdsl.ops.linear_cross_entropy(h, weight, targets)` is
`cross_entropy(h @ weightᵀ, targets)`.

`asyncdsl.kernels.linear_cross_entropy` computes the loss and its gradients with respect to h and
the weight in one forward pass, the vocabulary's logits in chunks; the operator keeps the
gradients, and the backward pass only scales them by the loss's incoming gradient (a device
tensor: nothing is read back to the host).  The loss is reduced ("mean" over the rows whose
target is not `ignore_index`, or "sum"): per-row losses would need per-row factors on gradients
already summed over the rows.  The forward pass is the `torch.library` operator
`asyncdsl::linear_cross_entropy` with a fake implementation, traced whole by
`torch.compile(fullgraph=True)` and captured by CUDA graphs.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.ops.cross_entropy import check_targets, refuse_second_derivative
from asyncdsl.torch import library_call, library_op

REDUCTIONS = ("mean", "sum")


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *,
                         ignore_index: int = -100, reduction: str = "mean") -> torch.Tensor:
    """cross_entropy(h @ weightᵀ, targets) for bf16 h (..., H), weight (V, H) and targets (...)
    of class indices, reduced by "mean" (over the rows not ignored) or "sum"; float32,
    differentiable in h and weight.  With every target ignored, "mean" is nan (0/0) and the
    gradients 0, as torch's `cross_entropy` of the logits gives them.  Differentiable once: a
    backward pass under `create_graph=True` is an `ArgumentError`."""
    if reduction not in REDUCTIONS:
        raise ArgumentError(f"linear_cross_entropy's reduction is one of {REDUCTIONS}, got {reduction!r}",
                            user_location())
    check_targets("linear_cross_entropy", "h", h, targets)
    loss, _, _ = linear_cross_entropy_forward(h, weight, targets, int(ignore_index), reduction)
    return loss


def _forward(h, weight, targets, ignore_index, reduction):
    loss, dh, dweight = library_call(
        kernels.linear_cross_entropy, h.reshape(-1, h.shape[-1]).contiguous(), weight.contiguous(),
        targets.reshape(-1).contiguous(), ignore_index=ignore_index, reduction=reduction)
    return loss.view(()), dh.view(h.shape), dweight.to(weight.dtype)


def _forward_fake(h, weight, targets, ignore_index, reduction):
    return h.new_empty((), dtype=torch.float32), h.new_empty(h.shape), weight.new_empty(weight.shape)


linear_cross_entropy_forward = library_op(
    "asyncdsl::linear_cross_entropy", _forward, fake=_forward_fake,
    schema="(Tensor h, Tensor weight, Tensor targets, int ignore_index, str reduction) -> "
           "(Tensor, Tensor, Tensor)")


def _save(ctx, inputs, output):
    _, dh, dweight = output
    ctx.save_for_backward(dh, dweight)
    ctx.mark_non_differentiable(dh, dweight)


def _differentiate(ctx, dloss, _dh_grad, _dweight_grad):
    refuse_second_derivative("linear_cross_entropy")
    dh, dweight = ctx.saved_tensors
    return dh * dloss, dweight * dloss, None, None, None  # 0-dim float32 factors keep the dtypes


linear_cross_entropy_forward.register_autograd(_differentiate, setup_context=_save)
