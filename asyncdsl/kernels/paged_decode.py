"""Decode attention over a paged KV cache, the layout serving engines keep:
`o = asyncdsl.kernels.paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens)`.

q is (B, H, D), or (B, Q, H, D) for Q = 1 to 8 new tokens a sequence (speculative decoding);
k_cache and v_cache are (pages, page_size, H_kv, D), bfloat16 or float8_e4m3fn (dequantised by
`k_scale` and `v_scale`, float32 arrays of one element, read on the device); `block_table`
(B, max_pages) int32 names the pages of each sequence and `seq_lens` (B,) int32 their lengths,
new tokens included.  Query i of sequence b sees keys 0 .. len_b - Q + i (causal within the
query block).  o is like q.

A CTA takes one KV head of one sequence and one split of its blocks of BK = min(block,
page_size) positions, bounded by the sequence's length read on the device (a short one costs
little); the group's G = H / H_kv heads times the Q queries are the rows of one 64-row wgmma
tile, so each key is read once for the group.  A producer warpgroup copies each block's keys
and values by TMA, the page number from the table a traced coordinate (`blocks.paged_kv`), into
the ring of `blocks.attention_loads`, blocks ahead of the consumer's q kᵀ, online softmax and
p v.  fp8 pages are gathered by the producer's threads and written as bf16 (wgmma takes fp8
only with fp8 q and K-major values).  The scores hide positions past a row's last key and on
pages outside the cache, whose copies read the nearest page: nothing outside the cache is read,
and a bad table is reported.  Splits write their rows' output and log-sum-exp to a float32
workspace, merged in split order (`blocks.split_kv_merge`).  Launch shapes depend only on the
arrays' shapes, so a call captures in a CUDA graph.

Page sizes 16 and 64, head dims 64 and 128, Q·G at most 64.
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.online_softmax import OnlineSoftmax
from asyncdsl.blocks.paged_kv import PagedSequence
from asyncdsl.blocks.split_kv_merge import merge_splits
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_host
from asyncdsl.kernels.gemm_cooperative import _sms
from asyncdsl.kernels.outputs import empty

LOG2E = 1.4426950408889634
PAGE_SIZES = (16, 64)
ROWS = 64  # rows of the wgmma tile: query heads of a group times queries, padded
HIDDEN = -1.0e30  # the lse of a split that saw no key of a row: finite, so that the merge is no NaN
HOST_SMS = 132  # the multiprocessors `choose_splits` plans for in the interpreter (an H100's, H200's)


def paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, *, k_scale=None, v_scale=None,
                           splits: int | None = None, block: int = 64, stream=None):
    """Attention of q (B, H, D) or (B, Q, H, D) over the paged caches (see the module's
    docstring); returns o like q.  `block`: positions a step (32 or 64)."""
    q4 = q.reshape(q.shape[0], 1, *q.shape[1:]) if len(q.shape) == 3 else q
    batch, queries, heads, d = q4.shape
    if len(k_cache.shape) != 4 or len(block_table.shape) != 2:
        raise ad.ArgumentError(f"the caches are (pages, page_size, H_kv, D) and the block table (B, "
                               f"max_pages), got {tuple(k_cache.shape)} and {tuple(block_table.shape)}",
                               user_location())
    if splits is None:
        sms = HOST_SMS if on_host(q) else _sms(q)
        splits = choose_splits(batch * k_cache.shape[2], block_table.shape[1] * k_cache.shape[1],
                               min(block, k_cache.shape[1]), sms)
    scaled = k_scale is not None or v_scale is not None
    scales = _scales(q, k_scale, v_scale) if scaled else empty(q, (2,), np.float32)  # unread unscaled
    o = empty(q, q4.shape, q.dtype)
    rows = batch * queries * heads if splits > 1 else 1  # one split writes o itself
    part, lse = empty(q, (splits, rows, d), np.float32), empty(q, (splits, rows), np.float32)
    launch(paged_decode_kernel, q4, k_cache, v_cache, block_table, seq_lens, scales, o, part, lse,
           stream=stream, SPLITS=splits, SCALED=scaled, BK=block)
    if splits > 1:
        launch(merge_kernel, part, lse, o.reshape(rows, d), stream=stream)
    return o.reshape(q.shape)


def choose_splits(pairs: int, positions: int, block: int = 64, sms: int = HOST_SMS) -> int:
    """Splits of each (sequence, KV head) pair's `positions`: enough CTAs for two a multiprocessor
    where the pairs are few, but no split under four blocks (their fixed cost would dominate), and
    at most 64 (the merge reads each)."""
    blocks = -(-positions // block)
    return max(1, min(-(-2 * sms // pairs), blocks // 4, 64))


def _scales(q, k_scale, v_scale):
    """k_scale and v_scale (floats, or one-element float32 arrays: on the GPU, tensors keep a
    call free of host copies) as one (2,) float32 array beside q."""
    if on_host(q):
        return np.array([1.0 if s is None else np.asarray(s, np.float32).reshape(-1)[0]
                         for s in (k_scale, v_scale)], np.float32)
    import torch

    return torch.stack([torch.as_tensor(1.0 if s is None else s, dtype=torch.float32,
                                        device=q.device).reshape(()) for s in (k_scale, v_scale)])


@kernel(grid=lambda q, k_cache, *_, SPLITS, **__: (SPLITS, q.shape[0] * k_cache.shape[2]), block=256,
        name="paged_decode")
def paged_decode_kernel(q, k_cache, v_cache, block_table, seq_lens, scales, o, part, lse,
                        SPLITS: constexpr = 1, SCALED: constexpr = False, BK: constexpr = 64):
    """o (SPLITS = 1), else each split's part and lse, of the paged decode (see the module)."""
    _, Q, H, D = q.shape
    PAGES, PAGE, H_KV, _ = k_cache.shape
    _check(q, k_cache, v_cache, block_table, seq_lens, o, part, SPLITS, BK)
    BK, G = min(BK, PAGE), H // H_KV  # a block never spans pages: one TMA box
    split, pair = ad.program_id(0), ad.program_id(1)
    b, h_kv = pair // H_KV, pair % H_KV
    seq = PagedSequence(block_table, seq_lens, b, PAGES, PAGE)
    first_block, count = seq.split_blocks(BK, split, SPLITS)  # the split's share of the sequence
    loads = AttentionLoads(ad.bfloat16, ROWS, 1, BK, ad.bfloat16, ad.bfloat16, D, ring_stages(BK, D))

    with ad.warpgroup_role(1):  # the producer
        if k_cache.dtype == ad.bfloat16:
            for j in ad.range(count):
                loads.load(j, *(lambda i, c=c: seq.box(c, (first_block + i) * BK, BK, h_kv)
                                for c in (k_cache, v_cache)))
        else:  # fp8 pages become the tensor cores' bf16 through the threads (see the module)
            length = seq.length(BK)
            for j in ad.range(count):
                block = seq.block((first_block + j) * BK, BK, length)
                loads.fill(j, *(lambda i, c=c, block=block: block.rows(c, h_kv).astype(ad.bfloat16)
                                for c in (k_cache, v_cache)))

    with ad.warpgroup_role(0):  # the consumer
        row = ad.iota((ROWS,), ad.int32, 0, layout=ad.WGMMA_ROW)  # row = query * G + head in the group
        query, head, live = row // G, h_kv * G + row % G, row < Q * G
        columns = ad.iota((1, D), ad.int32, 1)
        q_s = loads.q.at[0]  # in SMEM: registers are scarce
        q_s[...] = ad.load(q.at[b, query[:, None], head[:, None], columns], layout=ad.WGMMA,
                           mask=live[:, None])
        ad.fence_async_smem()  # the tensor cores read what the threads wrote
        last_key = seq.length(ROWS, ad.WGMMA_ROW) - Q + query  # the last key each row sees
        scored_length = seq.length(BK, ad.WGMMA_COL)
        s = ad.registers((ROWS, BK), ad.float32, layout=ad.WGMMA)
        acc = ad.registers((ROWS, D), ad.float32, layout=ad.WGMMA)
        scale = LOG2E / math.sqrt(D)  # the scores are scaled before the softmax, which takes 2^x
        if SCALED:  # the keys' scale multiplies the scores, the values' the output
            k_scale, v_scale = (ad.load(scales.at[ad.zeros((ROWS,), ad.int32, layout=ad.WGMMA_ROW) + i],
                                        layout=ad.WGMMA_ROW) for i in range(2))
            scale = (k_scale * scale)[:, None]
        p = ad.registers((ROWS, BK), ad.bfloat16, layout=ad.WGMMA)  # block j - 1's probabilities
        state = OnlineSoftmax(ROWS, 1.0, empty_rows=True)  # a split may see no key of a row
        state.start()
        acc[...] = ad.zeros((ROWS, D), ad.float32)

        def scores(j):
            """Issue s = q k_jᵀ; the keys that exist (the table's entries) are read meanwhile."""
            first = (first_block + j) * BK
            scored = seq.block(first, BK, scored_length, ad.WGMMA_COL)
            loads.wait_keys(loads.slot(j))
            ad.wgmma(s, q_s, loads.keys(loads.slot(j)), accumulate=False)
            return first + ad.iota((ROWS, BK), ad.int32, 1, layout=ad.WGMMA), scored

        def softmax(key, scored):
            scored.check()
            hidden = (key > last_key[:, None]) | ~scored.present[None, :]
            return state.update(ad.where(hidden, -math.inf, s[...] * scale), ad.bfloat16)

        with ad.when(count > 0):  # as `blocks.attention_forward`: s_j runs beside p_{j-1} v_{j-1}
            block = scores(0)
            ad.wgmma_wait(0)
            loads.release_keys(loads.slot(0))
            p[...], _ = softmax(*block)
            for j in ad.range(1, count):
                block = scores(j)
                loads.wait_values(loads.slot(j - 1))
                ad.wgmma(acc, p[...], loads.values(loads.slot(j - 1)))
                ad.wgmma_wait(1)  # s_j is done, p v may still run
                loads.release_keys(loads.slot(j))
                probabilities, alpha = softmax(*block)
                ad.warpgroup_barrier()  # keeps ptxas from hoisting the wait above the softmax
                ad.wgmma_wait(0)
                loads.release_values(loads.slot(j - 1))
                p[...] = probabilities
                acc[...] = acc[...] * alpha[:, None]
            last = loads.slot(count - 1)
            loads.wait_values(last)
            ad.wgmma(acc, p[...], loads.values(last))
            ad.wgmma_wait(0)
            loads.release_values(last)
        out = state.normalize(acc[...]) * v_scale[:, None] if SCALED else state.normalize(acc[...])
        if SPLITS == 1:
            ad.store(o.at[b, query[:, None], head[:, None], columns], out.astype(o.dtype),
                     mask=live[:, None])
        else:
            flat = (b * Q + query) * H + head  # the row of (b, query, head) among B·Q·H
            ad.store(part.at[split, flat[:, None], columns], out, mask=live[:, None])
            # A row this split saw no key of: an lse that weighs nothing, never -inf (a NaN).
            ad.store(lse.at[split, flat], ad.maximum(state.log_sum_exp(), HIDDEN), mask=live)


def ring_stages(BK: int, d: int) -> int:
    """Blocks in flight, 2 to 8: what 200 KiB of SMEM holds beside q (one CTA a multiprocessor)."""
    return max(2, min(8, (200 * 1024 - ROWS * d * 2) // (2 * BK * d * 2)))


@kernel(grid=lambda part, lse, o: (ad.cdiv(part.shape[1], ROWS),), block=128, name="paged_decode_merge")
def merge_kernel(part, lse, o):
    """o's rows from the splits' parts and log-sum-exps, in split order."""
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)
    merged, _ = merge_splits(part.shape[0], lambda c: ad.load(part.at[c, rows, :], layout=ad.WGMMA),
                             lambda c: ad.load(lse.at[c, rows], layout=ad.WGMMA_ROW))
    ad.store(o.at[rows, :], merged.astype(o.dtype))


def _check(q, k_cache, v_cache, block_table, seq_lens, o, part, SPLITS, BK) -> None:
    """Refuse at trace time what the kernel does not compute."""
    (B, Q, H, D), (_, PAGE, H_KV, _) = q.shape, k_cache.shape
    if PAGE not in PAGE_SIZES:
        raise ad.TraceError(f"page size {PAGE}: the paged decode takes pages of "
                            f"{' or '.join(map(str, PAGE_SIZES))} positions", user_location())
    if v_cache.shape != k_cache.shape or k_cache.shape[3] != D:
        raise ad.TraceError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} must both "
                            f"be (pages, page_size, H_kv, {D}) for q of head dim {D}", user_location())
    caches = (ad.bfloat16, ad.float8_e4m3fn)
    if q.dtype != ad.bfloat16 or k_cache.dtype not in caches or v_cache.dtype != k_cache.dtype:
        raise ad.TraceError(f"q must be bfloat16 and the caches both bfloat16 or both float8_e4m3fn, got "
                            f"{q.dtype}, {k_cache.dtype} and {v_cache.dtype}", user_location())
    if D not in (64, 128):
        raise ad.TraceError(f"head dim {D}: the paged decode takes 64 or 128 (the output and a block's "
                            "scores share the consumer's registers)", user_location())
    if H % H_KV or Q * (H // H_KV) > ROWS:
        raise ad.TraceError(f"{H} query heads over {H_KV} KV heads with {Q} queries: the heads must group "
                            f"evenly and queries × group at most {ROWS} (one wgmma tile)", user_location())
    if block_table.shape[0] != B or tuple(seq_lens.shape) != (B,) or \
            (block_table.dtype, seq_lens.dtype) != (ad.int32, ad.int32):
        raise ad.TraceError(f"block_table must be ({B}, max_pages) int32 and seq_lens ({B},) int32, got "
                            f"{tuple(block_table.shape)} {block_table.dtype} and {tuple(seq_lens.shape)} "
                            f"{seq_lens.dtype}", user_location())
    if BK not in (32, 64):
        raise ad.TraceError(f"BK, the positions of a step, must be 32 or 64, got {BK!r}", user_location())
    if not isinstance(SPLITS, int) or isinstance(SPLITS, bool) or SPLITS < 1 or part.shape[0] != SPLITS:
        raise ad.TraceError(f"SPLITS must be a positive int, the workspace's first dim: {SPLITS!r}",
                            user_location())
    if o.shape != q.shape:
        raise ad.TraceError(f"o has shape {tuple(o.shape)}, expected {tuple(q.shape)}", user_location())


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"paged_decode_kernel": ((ArraySpec((2, 1, 8, 128), ad.bfloat16),
                                         *(ArraySpec((16, 16, 2, 128), ad.bfloat16) for _ in range(2)),
                                         ArraySpec((2, 8), ad.int32), ArraySpec((2,), ad.int32),
                                         ArraySpec((2,), ad.float32), ArraySpec((2, 1, 8, 128), ad.bfloat16),
                                         ArraySpec((2, 16, 128), ad.float32), ArraySpec((2, 16), ad.float32)),
                                        {"SPLITS": 2})}
