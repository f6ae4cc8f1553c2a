"""Differentiable torch operators built on `asyncdsl.kernels`, for training under
`torch.compile(fullgraph=True)` and CUDA graphs:

    import asyncdsl.ops as ops

    o = ops.attention(q, k, v, causal=True)        # bf16 (B, H, S, D); layout="BSHD", GQA
    y = ops.rms_norm(x, weight)                    # and layer_norm(x, weight, bias)
    h = ops.swiglu(gate, up)                       # silu(gate) · up
    loss = ops.cross_entropy(logits, targets)      # or linear_cross_entropy(h, weight, targets)
    ops.llama.apply(model)                         # a transformers Llama-family model on them

Each is a `torch.library` operator in the `asyncdsl` namespace with a fake implementation and a
backward pass that is one too; the forward passes keep what their backward passes need.
Importing this package imports torch.

Modules: `attention`, `rms_norm`, `layer_norm`, `swiglu`, `cross_entropy`,
`linear_cross_entropy` (one operator each), `llama` (transformers models on them).
"""

from asyncdsl.ops import llama
from asyncdsl.ops.attention import attention
from asyncdsl.ops.cross_entropy import cross_entropy
from asyncdsl.ops.layer_norm import layer_norm
from asyncdsl.ops.linear_cross_entropy import linear_cross_entropy
from asyncdsl.ops.rms_norm import rms_norm
from asyncdsl.ops.swiglu import swiglu

__all__ = ["attention", "cross_entropy", "layer_norm", "linear_cross_entropy", "llama", "rms_norm", "swiglu"]
