"""SwiGLU as a differentiable torch operator: `h = asyncdsl.ops.swiglu(gate, up)`, silu(gate) · up.

The forward pass is `asyncdsl.kernels.swiglu` over the rows of its operands (every axis but the
last flattened); the operator keeps gate and up, and the backward pass,
`asyncdsl.kernels.swiglu_backward`, recomputes the sigmoid from them for dgate and dup.  Both are
`torch.library` operators (`asyncdsl::swiglu`, `asyncdsl::swiglu_backward`) with fake
implementations, traced whole by `torch.compile(fullgraph=True)` and captured by CUDA graphs.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.torch import check_not_0d, library_call, library_op


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) · up element by element, for bf16 tensors of one shape, differentiable in both."""
    check_not_0d("swiglu", gate=gate, up=up)
    if gate.shape != up.shape:  # the kernels take rows: (2, 3, N) and (3, 2, N) flatten alike
        raise ArgumentError(f"swiglu takes gate and up of one shape, got {tuple(gate.shape)} and "
                            f"{tuple(up.shape)}", user_location())
    return swiglu_forward(gate, up)


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1]).contiguous()


def _forward(gate, up):
    return library_call(kernels.swiglu, _rows(gate), _rows(up)).view(gate.shape)


swiglu_forward = library_op("asyncdsl::swiglu", _forward, fake=lambda gate, up: gate.new_empty(gate.shape),
                            schema="(Tensor gate, Tensor up) -> Tensor")


def _backward(dy, gate, up):
    dgate, dup = library_call(kernels.swiglu_backward, _rows(dy), _rows(gate), _rows(up))
    return dgate.view(gate.shape), dup.view(up.shape)


def _backward_fake(dy, gate, up):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


swiglu_backward = library_op("asyncdsl::swiglu_backward", _backward, fake=_backward_fake,
                             schema="(Tensor dy, Tensor gate, Tensor up) -> (Tensor, Tensor)")


def _save(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _differentiate(ctx, dy):
    gate, up = ctx.saved_tensors
    return swiglu_backward(dy, gate, up)


swiglu_forward.register_autograd(_differentiate, setup_context=_save)
