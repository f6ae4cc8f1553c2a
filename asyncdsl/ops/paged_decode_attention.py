"""Decode attention over a paged KV cache as a torch operator, for serving:
`o = asyncdsl.ops.paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens)`.

The operator is `asyncdsl.kernels.paged_decode_attention` registered with `torch.library`
(`asyncdsl::paged_decode_attention`) with a fake implementation: `torch.compile(fullgraph=True)`
traces a decode step through it, and a CUDA graph captures it, since the kernel plans on the
device from `seq_lens` and the block table (no host synchronisation, a launch shape fixed by the
tensors' shapes).  It has no backward pass: decoding does not train.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.torch import library_call, library_op


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_table: torch.Tensor, seq_lens: torch.Tensor, *,
                           k_scale: torch.Tensor | None = None,
                           v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of the new tokens' queries q (B, H, D) (or (B, L, H, D): L tokens a sequence)
    over each sequence's cached keys and values, k_cache and v_cache (pages, page_size, H_kv, D)
    in bf16 (or float8_e4m3fn with float32 `k_scale`, `v_scale`), found through block_table
    (B, max_pages) int32 for seq_lens (B,) int32 tokens; returns o like q."""
    return paged_decode_attention_op(q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale)


def _decode(q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale):
    return library_call(kernels.paged_decode_attention, q.contiguous(), k_cache, v_cache, block_table,
                        seq_lens, k_scale=k_scale, v_scale=v_scale)


def _decode_fake(q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale):
    return q.new_empty(q.shape)


paged_decode_attention_op = library_op(
    "asyncdsl::paged_decode_attention", _decode, fake=_decode_fake,
    schema="(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, Tensor? k_scale, "
           "Tensor? v_scale) -> Tensor")
