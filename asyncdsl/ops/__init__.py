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
    o, lse = ops.paged_prefill(q, k_cache, v_cache, block_table, seq_lens, cu_q, max_q)   # chunked
    c = ops.gemm_fp8_blockscaled(a, a_scales, b, b_scales)   # DeepGEMM's block-scaled fp8
    c = ops.grouped_gemm(a, b, offsets)            # torch._grouped_mm's meaning
    c = ops.grouped_gemm_masked(a, b, counts)      # a (G, capacity, K): a fixed capacity a group
    c = ops.grouped_gemm_fp8_blockscaled(a, a_scales, b, b_scales, offsets)   # and ..._masked

Each is a `torch.library` operator in the `asyncdsl` namespace with a fake implementation; the
training operators have a backward pass that is one too, their forward passes keeping what it
needs.  The serving operators (paged attention, the fp8 and grouped GEMMs) have none.
Importing this package imports torch.

Modules: `attention`, `attention_varlen`, `rms_norm`, `layer_norm`, `swiglu`, `cross_entropy`,
`linear_cross_entropy`, `rotary`, `paged_decode_attention`, `paged_prefill`, `gemm_fp8_blockscaled`
(one operator each), `grouped_gemm`, `grouped_gemm_fp8_blockscaled` (the contiguous and masked
layouts of one kind each), `llama` (transformers models on them).
"""

from asyncdsl.ops import llama
from asyncdsl.ops.attention import attention
from asyncdsl.ops.attention_varlen import attention_varlen
from asyncdsl.ops.cross_entropy import cross_entropy
from asyncdsl.ops.gemm_fp8_blockscaled import gemm_fp8_blockscaled
from asyncdsl.ops.grouped_gemm import grouped_gemm, grouped_gemm_masked
from asyncdsl.ops.grouped_gemm_fp8_blockscaled import (grouped_gemm_fp8_blockscaled,
                                                       grouped_gemm_fp8_blockscaled_masked)
from asyncdsl.ops.layer_norm import layer_norm
from asyncdsl.ops.linear_cross_entropy import linear_cross_entropy
from asyncdsl.ops.paged_decode_attention import paged_decode_attention
from asyncdsl.ops.paged_prefill import paged_prefill
from asyncdsl.ops.rms_norm import rms_norm
from asyncdsl.ops.rotary import rotary
from asyncdsl.ops.swiglu import swiglu

__all__ = ["attention", "attention_varlen", "cross_entropy", "gemm_fp8_blockscaled", "grouped_gemm",
           "grouped_gemm_fp8_blockscaled", "grouped_gemm_fp8_blockscaled_masked", "grouped_gemm_masked",
           "layer_norm", "linear_cross_entropy", "llama", "paged_decode_attention", "paged_prefill",
           "rms_norm", "rotary", "swiglu"]
