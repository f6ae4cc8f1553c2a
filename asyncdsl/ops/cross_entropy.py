"""Cross-entropy over a vocabulary as a differentiable torch operator:
`loss = asyncdsl.ops.cross_entropy(logits, targets)`.

`asyncdsl.kernels.cross_entropy` computes the loss and its gradient with respect to the logits in
one pass over them (an online log-sum-exp a row); the operator keeps that gradient, and the
backward pass only scales it by the loss's incoming gradient (a device tensor: nothing is read
back to the host).  Rows whose target is `ignore_index` add nothing and get a zero gradient;
"mean" divides by the count of the other rows (none: nan, as torch's).  The forward pass is the
`torch.library` operator `asyncdsl::cross_entropy` with a fake implementation, traced whole by
`torch.compile(fullgraph=True)` and captured by CUDA graphs.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.torch import check_not_0d, library_call, library_op

REDUCTIONS = ("mean", "sum", "none")


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, *, ignore_index: int = -100,
                  reduction: str = "mean") -> torch.Tensor:
    """−log softmax(logits)[target] of each row of logits (..., V) with targets (...) of integer
    class indices, reduced by "mean" (over the rows not ignored), "sum" or "none"; float32,
    differentiable in the logits.  Rows whose target is `ignore_index` add 0 and get a zero
    gradient; with every row ignored, "mean" is nan (0/0) and the gradient 0, as
    `torch.nn.functional.cross_entropy` gives them.  Differentiable once: a backward pass under
    `create_graph=True` is an `ArgumentError`."""
    if reduction not in REDUCTIONS:
        raise ArgumentError(f"cross_entropy's reduction is one of {REDUCTIONS}, got {reduction!r}",
                            user_location())
    check_targets("cross_entropy", "logits", logits, targets)
    loss, _ = cross_entropy_forward(logits, targets, int(ignore_index), reduction)
    return loss


def check_targets(operator: str, name: str, rows: torch.Tensor, targets: torch.Tensor) -> None:
    """One target a row of `rows` (..., V), in its shape: the kernels flatten both, which would
    pair (2, 3) rows with (3, 2) or (6,) targets in memory order without a word."""
    check_not_0d(operator, **{name: rows})
    if targets.shape != rows.shape[:-1]:
        raise ArgumentError(f"{operator} takes targets of shape {tuple(rows.shape[:-1])}, one a row of "
                            f"{name} {tuple(rows.shape)}, got {tuple(targets.shape)}", user_location())


def _forward(logits, targets, ignore_index, reduction):
    loss, dlogits = library_call(kernels.cross_entropy, logits.reshape(-1, logits.shape[-1]).contiguous(),
                                 targets.reshape(-1).contiguous(), ignore_index=ignore_index,
                                 reduction=reduction)
    return loss.view(targets.shape if reduction == "none" else ()), dlogits.view(logits.shape)


def _forward_fake(logits, targets, ignore_index, reduction):
    loss = logits.new_empty(targets.shape if reduction == "none" else (), dtype=torch.float32)
    return loss, logits.new_empty(logits.shape)


cross_entropy_forward = library_op(
    "asyncdsl::cross_entropy", _forward, fake=_forward_fake,
    schema="(Tensor logits, Tensor targets, int ignore_index, str reduction) -> (Tensor, Tensor)")


def _save(ctx, inputs, output):
    ctx.per_row = inputs[3] == "none"
    _, dlogits = output
    ctx.save_for_backward(dlogits)
    ctx.mark_non_differentiable(dlogits)


def refuse_second_derivative(operator: str) -> None:
    """The gradient a loss's forward pass made is a constant to autograd: a backward pass run to
    be differentiated again (create_graph=True) would leave out the softmax's curvature, a wrong
    second derivative without an error, so it is refused."""
    if torch.is_grad_enabled():
        raise ArgumentError(f"{operator} has no second derivative: its backward pass scales the gradient "
                            "its forward pass made, which cannot be differentiated (create_graph=True)",
                            user_location())


def _differentiate(ctx, dloss, _dlogits_grad):
    refuse_second_derivative("cross_entropy")
    (dlogits,) = ctx.saved_tensors
    if ctx.per_row:
        return (dlogits * dloss.unsqueeze(-1)).to(dlogits.dtype), None, None, None
    return dlogits * dloss, None, None, None  # a 0-dim float32 factor keeps dlogits' dtype


cross_entropy_forward.register_autograd(_differentiate, setup_context=_save)
