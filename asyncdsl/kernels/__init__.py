"""asyncdsl's kernel library: host functions that allocate their outputs, pick a configuration
and launch kernels built from `asyncdsl.blocks`.  torch tensors run on the GPU; numpy arrays run
in the interpreter.

    import asyncdsl.kernels as K

    c = K.gemm(a, b)                  # bf16 (M, K) @ (K, N) on the tensor cores
    c = K.gemm_fp8(a, b, sa, sb)      # fp8 (M, K) @ (N, K)ᵀ with float32 scales a row
    c = K.gemm_fp8_blockscaled(a, sa, b, sb)   # scales a 1 x 128 group of a, a 128 x 128 block of b
    c = K.gemm_bias_activation(a, b, bias, "gelu")   # gelu(a @ b + bias), one kernel
    c = K.gemm_stream_k(a, b)         # stream-K: shapes whose tiles do not make whole waves
    c = K.grouped_gemm(a, b, offsets) # groups of rows of a, each times its own b[g]; the groups'
                                      # ends on the device, as torch._grouped_mm's offs
    c = K.grouped_gemm_fp8_blockscaled(a, sa, b, sb, offsets)   # and block-scaled fp8
    q, s = K.gemm_fp8_rows(a, b)      # the product in e4m3 with a scale per tile row
    o, lse = K.attention(q, k, v, causal=True)   # bf16 (B, H, S, D); also layout="BSHD", GQA
    dq, dk, dv = K.attention_backward(q, k, v, o, lse, do, causal=True)   # its gradients
    o, lse = K.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k)   # packed (total, H, D) sequences
    dq, dk, dv = K.attention_varlen_backward(q, k, v, o, lse, do, cu_q, cu_k, max_q, max_k)
    o, lse = K.paged_prefill(q, k_cache, v_cache, block_table, seq_lens, cu_q, max_q)  # paged KV
    o = K.paged_decode_attention(q, kc, vc, table, lens)   # decode over a paged KV cache
    y = K.softmax(x)                  # rows of a (M, N) bfloat16 matrix
    y = K.rms_norm(x, w)              # and layer_norm(x, w, b), swiglu(a, b)
    y, rstd = K.rms_norm_forward(x, w)              # for training, with the statistics kept:
    dx, dw = K.rms_norm_backward(dy, x, w, rstd)    # and layer_norm_forward / layer_norm_backward
    da, db = K.swiglu_backward(dy, a, b)            # the gradients of swiglu(a, b)
    loss, dz = K.cross_entropy(logits, targets)     # and its gradient, one pass over the logits
    loss, dh, dw = K.linear_cross_entropy(h, w, targets)   # of h @ wᵀ, the logits made in chunks
    q, scales = K.quantize_fp8(x)     # rows to float8_e4m3fn with one float32 scale a row
"""

from asyncdsl.kernels.attention import attention
from asyncdsl.kernels.attention_backward import attention_backward
from asyncdsl.kernels.attention_varlen import attention_varlen
from asyncdsl.kernels.attention_varlen_backward import attention_varlen_backward
from asyncdsl.kernels.collectives import all_gather, reduce_scatter
from asyncdsl.kernels.cross_entropy import cross_entropy
from asyncdsl.kernels.gemm_choice import gemm
from asyncdsl.kernels.gemm_epilogue import gemm_bias_activation, gemm_fp8_rows
from asyncdsl.kernels.gemm_fp8 import gemm_fp8
from asyncdsl.kernels.gemm_fp8_blockscaled import gemm_fp8_blockscaled
from asyncdsl.kernels.gemm_stream_k import gemm_stream_k
from asyncdsl.kernels.grouped_gemm import (
    grouped_gemm,
    grouped_gemm_fp8_blockscaled,
    grouped_gemm_fp8_blockscaled_masked,
    grouped_gemm_masked,
)
from asyncdsl.kernels.layer_norm import layer_norm
from asyncdsl.kernels.layer_norm_backward import layer_norm_backward, layer_norm_forward
from asyncdsl.kernels.linear_cross_entropy import linear_cross_entropy
from asyncdsl.kernels.paged_decode import paged_decode_attention
from asyncdsl.kernels.paged_prefill import paged_prefill
from asyncdsl.kernels.permute_bhsd import permute_bhsd
from asyncdsl.kernels.quantize_fp8 import quantize_fp8
from asyncdsl.kernels.rms_norm import rms_norm
from asyncdsl.kernels.rms_norm_backward import rms_norm_backward, rms_norm_forward
from asyncdsl.kernels.rotary import rotary
from asyncdsl.kernels.softmax import softmax
from asyncdsl.kernels.swiglu import swiglu
from asyncdsl.kernels.swiglu_backward import swiglu_backward

__all__ = ["all_gather", "attention", "attention_backward", "attention_varlen", "attention_varlen_backward",
           "cross_entropy", "gemm", "gemm_bias_activation", "gemm_fp8", "gemm_fp8_blockscaled",
           "gemm_fp8_rows", "gemm_stream_k", "grouped_gemm", "grouped_gemm_fp8_blockscaled",
           "grouped_gemm_fp8_blockscaled_masked", "grouped_gemm_masked", "layer_norm", "layer_norm_backward",
           "layer_norm_forward", "linear_cross_entropy", "paged_decode_attention", "paged_prefill",
           "permute_bhsd", "quantize_fp8", "reduce_scatter", "rms_norm", "rms_norm_backward",
           "rms_norm_forward", "rotary", "softmax", "swiglu", "swiglu_backward"]
