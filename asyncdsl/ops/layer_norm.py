"""LayerNorm as a differentiable torch operator: `y = asyncdsl.ops.layer_norm(x, weight, bias, eps)`.

The forward pass is `asyncdsl.kernels.layer_norm_forward` over the rows of x (every axis but the
last flattened), which also returns each row's mean and reciprocal standard deviation; the
backward pass, `asyncdsl.kernels.layer_norm_backward`, gives dx from them and dw, db summed over
the rows.  Both are `torch.library` operators (`asyncdsl::layer_norm`,
`asyncdsl::layer_norm_backward`) with fake implementations, traced whole by
`torch.compile(fullgraph=True)` and captured by CUDA graphs.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.torch import check_not_0d, library_call, library_op


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
               eps: float = 1e-5) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) · weight + bias over the last axis, for bf16 x (..., N) and
    weight, bias (N,), differentiable in all three.  A weight or bias of None (torch's
    `LayerNorm(bias=False)` or `elementwise_affine=False`) scales by 1 or adds 0."""
    check_not_0d("layer_norm", x=x)
    # The kernels always take both: ones and zeros of x's type compute what None means.
    weight = x.new_ones(x.shape[-1:]) if weight is None else weight
    bias = x.new_zeros(x.shape[-1:]) if bias is None else bias
    y, _, _ = layer_norm_forward(x, weight, bias, float(eps))
    return y


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1]).contiguous()


def _forward(x, weight, bias, eps):
    y, mean, rstd = library_call(kernels.layer_norm_forward, _rows(x), weight.contiguous(), bias.contiguous(),
                                 eps)
    return y.view(x.shape), mean, rstd


def _forward_fake(x, weight, bias, eps):
    rows = x.shape[:-1].numel()
    return (x.new_empty(x.shape), x.new_empty(rows, dtype=torch.float32),
            x.new_empty(rows, dtype=torch.float32))


layer_norm_forward = library_op(
    "asyncdsl::layer_norm", _forward, fake=_forward_fake,
    schema="(Tensor x, Tensor weight, Tensor bias, float eps) -> (Tensor, Tensor, Tensor)")


def _backward(dy, x, weight, mean, rstd):
    dx, dw, db = library_call(kernels.layer_norm_backward, _rows(dy), _rows(x), weight.contiguous(), mean,
                              rstd)
    return dx.view(x.shape), dw.to(weight.dtype), db.to(weight.dtype)


def _backward_fake(dy, x, weight, mean, rstd):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)


layer_norm_backward = library_op(
    "asyncdsl::layer_norm_backward", _backward, fake=_backward_fake,
    schema="(Tensor dy, Tensor x, Tensor weight, Tensor mean, Tensor rstd) -> (Tensor, Tensor, Tensor)")


def _save(ctx, inputs, output):
    x, weight, _, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)


def _differentiate(ctx, dy, _mean_grad, _rstd_grad):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dw, db = layer_norm_backward(dy, x, weight, mean, rstd)
    return dx, dw, db, None


layer_norm_forward.register_autograd(_differentiate, setup_context=_save)
