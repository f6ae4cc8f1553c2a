"""Chunked prefill over a paged KV cache, bf16 in and out:
`o, lse = asyncdsl.kernels.paged_prefill(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, max_q)`.

A serving engine's prefill of a chunk of new tokens of each of B sequences: q is packed
(total_q, H, D) as in `attention_varlen` (sequence b's chunk is rows cu_seqlens_q[b] ..
cu_seqlens_q[b + 1]); the keys and values of each sequence's whole context, the chunk's own
included (written into the cache before this call), lie in pages of a cache (pages, page_size,
H_KV, D), page j of sequence b being block_table[b, j], and seq_lens[b] counts them.  Causal,
aligned to the end: query i of a chunk of q_len tokens sees the keys up to seq_len - q_len + i
(the cache before the chunk, then the chunk up to itself).  H_KV may divide H (grouped-query
attention).  `lse` (H, total_q) float32 holds the rows' natural log-sum-exp.  Page sizes 16 and
64; others are refused at trace time.

Nothing goes through the host: offsets, lengths and page numbers are read on the device
(`asyncdsl.load_index`), the grid is (⌈max_q / 128⌉, B·H).  It is the varlen kernel's work
(`asyncdsl.blocks.attention_forward`) with key blocks of 64 keys gathered page by page
(`asyncdsl.blocks.paged_loads`): a page's rows are contiguous, those of neighbouring pages are
not, so each page is copied on its own into its rows of the block's slot, laid out so that the
tensor cores take the whole block at once (q kᵀ a wgmma a 64-column chunk, p v one) whatever
the page size.  A bad table never makes the kernel read outside the cache: a page number past
the cache (or negative) reads zeros, and a length past the table's pages is cut to them (the
pages the table names).
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.attention_forward import HeadRows, attend, sequence_rows_finish
from asyncdsl.blocks.attention_tiles import QueryTile
from asyncdsl.blocks.online_softmax import LOG2E
from asyncdsl.blocks.paged_loads import PagedLoads
from asyncdsl.blocks.shapes import check_head_groups
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.attention_varlen import check_offsets
from asyncdsl.kernels.attention_varlen import reference as varlen_reference
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty

PAGE_SIZES = (16, 64)


@on_stream
def paged_prefill(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, max_seqlen_q: int, *, out=None,
                  lse=None, stream=None):
    """Causal attention of each sequence's new queries (q packed (total_q, H, D) bf16, offsets
    cu_seqlens_q (B + 1,) int32) over its paged context (caches (pages, page_size, H_kv, D),
    block_table (B, max_pages) and seq_lens (B,) int32, all on the device); max_seqlen_q at
    least the longest chunk.  Returns o (like q, or `out`) and lse (H, total_q) float32."""
    if len(q.shape) != 3 or int(max_seqlen_q) < 0:
        raise ad.ArgumentError(f"paged_prefill takes packed q (total, heads, head dim) and max_seqlen_q "
                               f">= 0, got q of shape {tuple(q.shape)} and {max_seqlen_q}", user_location())
    total, h, _ = q.shape
    check_offsets(cu_seqlens_q, int(max_seqlen_q), total, "q")
    o = empty(q, q.shape, q.dtype) if out is None else out
    lse = empty(q, (h, total), np.float32) if lse is None else lse
    launch(paged_prefill_kernel, q, k_cache, v_cache, o, lse, block_table, seq_lens, cu_seqlens_q,
           int(max_seqlen_q), stream=stream)
    return o, lse


def _grid(q, k_cache, v_cache, o, lse, block_table, seq_lens, cu_seqlens_q, max_seqlen_q, BQ, **_):
    return (max(ad.cdiv(max_seqlen_q, 2 * BQ), 1), seq_lens.shape[0] * q.shape[1])


@kernel(grid=_grid, block=384, name="paged_prefill", profile_events=1536)
def paged_prefill_kernel(q, k_cache, v_cache, o, lse, block_table, seq_lens, cu_seqlens_q, max_seqlen_q: int,
                         BQ: constexpr = 64, STAGES: constexpr = None):
    """Chunked prefill (see the module's docstring); `max_seqlen_q` sizes the grid only;
    `STAGES` key blocks in flight (`ring_stages` where None)."""
    _, H, D = q.shape
    _, PAGE, H_KV, _ = k_cache.shape
    _check(q, k_cache, v_cache, o, lse, block_table, seq_lens, cu_seqlens_q)
    head = ad.program_id(1)
    b, h = head // H, head % H
    h_kv = h // (H // H_KV)  # grouped-query attention: H / H_KV query heads share a k, v head
    q_start = ad.load_index(cu_seqlens_q.at[b])
    S = ad.load_index(cu_seqlens_q.at[b + 1]) - q_start
    # A length past the table's pages is cut to them: no page number is read past the table.
    S_KV = ad.load_index(seq_lens.at[b]).min(block_table.shape[1] * PAGE)
    # Key blocks of BK = 64 keys, four pages of 16 or one of 64: the consumers take 64 keys a
    # step whatever the page size.
    BK = 64
    tile = QueryTile(S, S_KV, 2 * BQ, BK, causal=True)
    # The entry of the sequence's last page, where a block is several pages.
    last = (S_KV.max(1) - 1) // PAGE if BK != PAGE else None

    def page(start):
        """The page holding keys start..: a number read from the table; the last block's pages
        past the sequence's last page read that page again (their keys are masked), never the
        padding entries after it."""
        entry = start // PAGE if last is None else (start // PAGE).min(last)
        return ad.load_index(block_table.at[b, entry])

    loads = PagedLoads(BQ, BK, PAGE, D, ring_stages(BK, D, BQ) if STAGES is None else STAGES, parts=2,
                       query_copied=True)
    head_of = HeadRows(lambda start, count: q.at[ad.ds(q_start + start, count), h, :],
                       lambda start, count, page, c: k_cache.at[page, :, h_kv, ad.ds(64 * c, 64)],
                       lambda start, count, page: v_cache.at[page, :, h_kv, :], locate=page)
    finish = sequence_rows_finish(loads, o, lse, h, q_start, S)  # only the sequence's rows
    attend(tile, loads, head_of, scale=LOG2E / math.sqrt(D), finish=finish, empty_rows=True)


def ring_stages(block: int, d: int, BQ: int) -> int:
    """Key blocks in flight: as many as 200 KiB of shared memory holds beside the query tile,
    up to 8, at least 2."""
    block_bytes, query_bytes = 2 * block * d * 2, 2 * BQ * d * 2  # k and v of a block; q, bf16
    return max(2, min(8, (200 * 1024 - query_bytes) // block_bytes))


def _check(q, k_cache, v_cache, o, lse, block_table, seq_lens, cu_seqlens_q) -> None:
    """Refuse at trace time what the kernel does not compute."""
    if len(q.shape) != 3 or len(k_cache.shape) != 4:
        raise ad.TraceError(f"q must be packed (total, heads, head dim) and the caches (pages, page_size, "
                            f"heads, head dim), got {tuple(q.shape)} and {tuple(k_cache.shape)}",
                            user_location())
    (total, H, D), (_, page, H_KV, D_KV) = q.shape, k_cache.shape
    expected = {"v_cache": k_cache.shape, "o": q.shape, "lse": (H, total)}
    for name, array in (("v_cache", v_cache), ("o", o), ("lse", lse)):
        if array.shape != expected[name]:
            raise ad.TraceError(f"{name} has shape {array.shape}, expected {expected[name]}", user_location())
    if page not in PAGE_SIZES:
        sizes = " or ".join(map(str, PAGE_SIZES))
        raise ad.TraceError(f"page size {page}: this kernel takes pages of {sizes} tokens", user_location())
    if (q.dtype, k_cache.dtype, v_cache.dtype, o.dtype) != (ad.bfloat16,) * 4:
        raise ad.TraceError(f"q, the caches and o must be bfloat16, got {q.dtype}, {k_cache.dtype}, "
                            f"{v_cache.dtype} and {o.dtype}", user_location())
    if D_KV != D or D % 64 or not 64 <= D <= 256:
        raise ad.TraceError(f"head dim {D} (caches: {D_KV}): this kernel takes 64, 128, 192 or 256 for both",
                            user_location())
    check_head_groups(H, H_KV)
    batch = seq_lens.shape[0] if len(seq_lens.shape) == 1 else None
    if batch is None or cu_seqlens_q.shape != (batch + 1,) or len(block_table.shape) != 2 \
            or block_table.shape[0] != batch:
        raise ad.TraceError(f"seq_lens must be (B,), cu_seqlens_q (B + 1,) and block_table (B, max_pages), "
                            f"got {seq_lens.shape}, {cu_seqlens_q.shape} and {block_table.shape}",
                            user_location())


def reference(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q) -> tuple[np.ndarray, np.ndarray]:
    """Chunked prefill in float64: each sequence's context gathered from its pages, then
    `attention_varlen`'s reference, causal aligned to the end."""
    page = k_cache.shape[1]
    gathered = [np.concatenate([cache[block_table[b, j]] for j in range(-(-int(n) // page))])[:n]
                if n else cache[:0, 0] for b, n in enumerate(seq_lens) for cache in (k_cache, v_cache)]
    k, v = np.concatenate(gathered[0::2]), np.concatenate(gathered[1::2])
    cu_k = np.concatenate([[0], np.cumsum(seq_lens)]).astype(np.int32)
    return varlen_reference(q, k, v, cu_seqlens_q, cu_k, causal=True)


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS: dict[str, tuple[tuple, dict]] = {"paged_prefill_kernel": (
    (ArraySpec((300, 4, 128), ad.bfloat16), *(ArraySpec((64, 16, 2, 128), ad.bfloat16) for _ in range(2)),
     ArraySpec((300, 4, 128), ad.bfloat16), ArraySpec((4, 300), ad.float32), ArraySpec((3, 32), ad.int32),
     ArraySpec((3,), ad.int32), ArraySpec((4,), ad.int32), 200), {})}
