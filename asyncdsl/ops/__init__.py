"""Differentiable torch operators built on `asyncdsl.kernels`, for training under
`torch.compile(fullgraph=True)` and CUDA graphs:

    import asyncdsl.ops as ops

    o = ops.attention(q, k, v, causal=True)        # bf16 (B, H, S, D); layout="BSHD", GQA
    o = ops.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)   # packed sequences
    y = ops.rms_norm(x, weight)                    # and layer_norm(x, weight, bias)
    h = ops.swiglu(gate, up)                       # silu(gate) · up
    q, k = ops.rotary(q, k, cos, sin)              # the rotary position embedding, (B, S, H, D)
    loss = ops.cross_entropy(logits, targets)      # or linear_cross_entropy(h, weight, targets)
    ops.llama.apply(model)                         # a transformers Llama-family model on them

    o = ops.paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens)   # serving
    c = ops.grouped_gemm(a, b, offsets)            # torch._grouped_mm's meaning

Each is a `torch.library` operator in the `asyncdsl` namespace with a fake implementation; the
training operators have a backward pass that is one too, their forward passes keeping what it
needs.  The serving operators (paged decode attention, grouped GEMM) have none.
Importing this package imports torch.

Modules: `attention`, `attention_varlen`, `rms_norm`, `layer_norm`, `swiglu`, `cross_entropy`,
`linear_cross_entropy`, `rotary`, `paged_decode_attention`, `grouped_gemm` (one operator each), `llama`
(transformers models on them).
"""

from asyncdsl.ops import llama
from asyncdsl.ops.attention import attention
from asyncdsl.ops.attention_varlen import attention_varlen
from asyncdsl.ops.cross_entropy import cross_entropy
from asyncdsl.ops.grouped_gemm import grouped_gemm
from asyncdsl.ops.layer_norm import layer_norm
from asyncdsl.ops.linear_cross_entropy import linear_cross_entropy
from asyncdsl.ops.paged_decode_attention import paged_decode_attention
from asyncdsl.ops.rms_norm import rms_norm
from asyncdsl.ops.rotary import rotary
from asyncdsl.ops.swiglu import swiglu

__all__ = ["attention", "attention_varlen", "cross_entropy", "grouped_gemm", "layer_norm",
           "linear_cross_entropy", "llama", "paged_decode_attention", "rms_norm", "rotary",
           "swiglu"]
