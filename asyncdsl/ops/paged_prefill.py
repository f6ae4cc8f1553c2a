"""Chunked prefill over a paged KV cache as a torch operator, for serving:
`o, lse = asyncdsl.ops.paged_prefill(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q,
max_seqlen_q)`.

The operator is `asyncdsl.kernels.paged_prefill` registered with `torch.library`
(`asyncdsl::paged_prefill`) with a fake implementation: `torch.compile(fullgraph=True)` traces a
prefill step through it, and a CUDA graph captures it, since the kernel reads the chunks' offsets,
the lengths and the block table on the device and its grid follows from the tensors' shapes and
`max_seqlen_q`, a plain integer (a graph serves the steps whose chunks are no longer).  It has no
backward pass: prefill does not train.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.torch import library_call, library_op


def paged_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                  seq_lens: torch.Tensor, cu_seqlens_q: torch.Tensor,
                  max_seqlen_q: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention of each sequence's new queries, packed in q (total_q, H, D) bf16 at the
    int32 offsets cu_seqlens_q (B + 1,), over its whole context in k_cache and v_cache (pages,
    page_size, H_kv, D), found through block_table (B, max_pages) int32 for seq_lens (B,) int32
    keys, the chunk's own included; max_seqlen_q at least the longest chunk.  Returns o like q and
    each row's natural log-sum-exp, lse (H, total_q) float32."""
    return paged_prefill_op(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, int(max_seqlen_q))


def _prefill(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, max_seqlen_q):
    return library_call(kernels.paged_prefill, q.contiguous(), k_cache, v_cache, block_table, seq_lens,
                        cu_seqlens_q, max_seqlen_q)


def _prefill_fake(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, max_seqlen_q):
    return q.new_empty(q.shape), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


paged_prefill_op = library_op(
    "asyncdsl::paged_prefill", _prefill, fake=_prefill_fake,
    schema="(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, "
           "Tensor cu_seqlens_q, int max_seqlen_q) -> (Tensor, Tensor)")
