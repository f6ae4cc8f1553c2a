"""RMSNorm as a differentiable torch operator: `y = asyncdsl.ops.rms_norm(x, weight, eps)`.

The forward pass is `asyncdsl.kernels.rms_norm_forward` over the rows of x (every axis but the
last flattened), which also returns each row's reciprocal root mean square; the backward pass,
`asyncdsl.kernels.rms_norm_backward`, gives dx from it and dw summed over the rows.  Both are
`torch.library` operators (`asyncdsl::rms_norm`, `asyncdsl::rms_norm_backward`) with fake
implementations: no graph break under `torch.compile(fullgraph=True)`, nothing read back to the
host, outputs made by torch's allocator (CUDA graphs capture them).
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.torch import check_not_0d, library_call, library_op


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(mean(x², last axis) + eps) · weight, for bf16 x (..., N) and weight (N,),
    differentiable in both."""
    check_not_0d("rms_norm", x=x)
    y, _ = rms_norm_forward(x, weight, float(eps))
    return y


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1]).contiguous()


def _forward(x, weight, eps):
    y, rstd = library_call(kernels.rms_norm_forward, _rows(x), weight.contiguous(), eps)
    return y.view(x.shape), rstd


def _forward_fake(x, weight, eps):
    return x.new_empty(x.shape), x.new_empty(x.shape[:-1].numel(), dtype=torch.float32)


rms_norm_forward = library_op("asyncdsl::rms_norm", _forward, fake=_forward_fake,
                              schema="(Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)")


def _backward(dy, x, weight, rstd):
    dx, dw = library_call(kernels.rms_norm_backward, _rows(dy), _rows(x), weight.contiguous(), rstd)
    return dx.view(x.shape), dw.to(weight.dtype)


def _backward_fake(dy, x, weight, rstd):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


rms_norm_backward = library_op("asyncdsl::rms_norm_backward", _backward, fake=_backward_fake,
                               schema="(Tensor dy, Tensor x, Tensor weight, Tensor rstd) -> (Tensor, Tensor)")


def _save(ctx, inputs, output):
    x, weight, _ = inputs
    _, rstd = output
    ctx.save_for_backward(x, weight, rstd)
    ctx.mark_non_differentiable(rstd)


def _differentiate(ctx, dy, _rstd_grad):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = rms_norm_backward(dy, x, weight, rstd)
    return dx, dw, None


rms_norm_forward.register_autograd(_differentiate, setup_context=_save)
