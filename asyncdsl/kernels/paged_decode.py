"""Decode attention over a paged KV cache, the layout serving engines keep:
`o = asyncdsl.kernels.paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens)`.

q is (B, H, D), or (B, Q, H, D) for Q = 1 to 8 new tokens a sequence (speculative decoding);
k_cache and v_cache are (pages, page_size, H_kv, D), bfloat16 or float8_e4m3fn (dequantised by
`k_scale` and `v_scale`, float32 arrays of one element, read on the device); `block_table`
(B, max_pages) int32 names the pages of each sequence and `seq_lens` (B,) int32 their lengths,
new tokens included.  Query i of sequence b sees keys 0 .. len_b - Q + i (causal within the
query block).  o is like q.

A CTA takes one KV head of one sequence and one split of its blocks of BK = `block` positions,
bounded by the sequence's length read on the device (a short one costs little); the group's G =
H / H_kv heads times the Q queries are the rows of one 64-row wgmma tile, so each key is read
once for the group. A producer warpgroup copies the keys and values by TMA, a page (or a block
of a large page) a slot of the ring of `blocks.attention_loads`, the page number from the table
a traced coordinate (`blocks.paged_kv`), slots ahead of the consumer; a block's page numbers are
read together, before the waits for its slots, so that pages of 16 cost one latency of global
memory a block as pages of 64 do. The consumer takes a block
a step whatever the page size: q kᵀ as a wgmma a slot, one online-softmax update over the
block's pieces, p v a wgmma a slot, so pages of 16 cost no more steps than pages of 64. fp8
pages are gathered by the producer's threads and written as bf16 (wgmma takes fp8 only with fp8
q and K-major values). The scores hide positions past a row's last key and on pages outside the
cache, whose copies read the nearest page: nothing outside the cache is read, and a bad table is
reported. Splits write their rows' output and log-sum-exp to a float32 workspace, merged in
split order (`blocks.split_kv_merge`). Launch shapes depend only on the arrays' shapes, so a
call captures in a CUDA graph.

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
from asyncdsl.kernels.paged_decode_checks import ROWS, check_shapes

LOG2E = 1.4426950408889634
HIDDEN = -1.0e30  # the lse of a split that saw no key of a row: finite, so that the merge is no NaN
HOST_SMS = 132  # the multiprocessors `choose_splits` plans for in the interpreter (an H100's, H200's)


def paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, *, k_scale=None, v_scale=None,
                           splits: int | None = None, block: int = 64, stages: int | None = None,
                           stream=None):
    """Attention of q (B, H, D) or (B, Q, H, D) over the paged caches (see the module's
    docstring); returns o like q.  `block`: positions a step (32 or 64); `stages`: blocks in
    flight, from 2 to what shared memory holds (`ring_stages` where None)."""
    q4 = q.reshape(q.shape[0], 1, *q.shape[1:]) if len(q.shape) == 3 else q
    batch, queries, heads, d = q4.shape
    if len(k_cache.shape) != 4 or len(block_table.shape) != 2:
        raise ad.ArgumentError(f"the caches are (pages, page_size, H_kv, D) and the block table (B, "
                               f"max_pages), got {tuple(k_cache.shape)} and {tuple(block_table.shape)}",
                               user_location())
    if splits is None:
        sms = HOST_SMS if on_host(q) else _sms(q)
        splits = choose_splits(batch * k_cache.shape[2], block_table.shape[1] * k_cache.shape[1], block, sms)
    scaled = k_scale is not None or v_scale is not None
    scales = _scales(q, k_scale, v_scale) if scaled else empty(q, (2,), np.float32)  # unread unscaled
    o = empty(q, q4.shape, q.dtype)
    rows = batch * queries * heads if splits > 1 else 1  # one split writes o itself
    part, lse = empty(q, (splits, rows, d), np.float32), empty(q, (splits, rows), np.float32)
    launch(paged_decode_kernel, q4, k_cache, v_cache, block_table, seq_lens, scales, o, part, lse,
           stream=stream, SPLITS=splits, SCALED=scaled, BK=block, STAGES=stages)
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


# The (sequence, KV head) pairs go first in the grid: the CTAs of a sequence's heads, which read
# the same pages, run at once, and batches of more than 65,535 pairs launch.
@kernel(grid=lambda q, k_cache, *_, SPLITS, **__: (q.shape[0] * k_cache.shape[2], SPLITS), block=256,
        name="paged_decode")
def paged_decode_kernel(q, k_cache, v_cache, block_table, seq_lens, scales, o, part, lse,
                        SPLITS: constexpr = 1, SCALED: constexpr = False, BK: constexpr = 64,
                        STAGES: constexpr = None):
    """o (SPLITS = 1), else each split's part and lse, of the paged decode (see the module);
    `STAGES` blocks in flight (`ring_stages` where None)."""
    _, Q, H, D = q.shape
    PAGES, PAGE, H_KV, _ = k_cache.shape
    check_shapes(q, k_cache, v_cache, block_table, seq_lens, o, part, SPLITS, BK, STAGES)
    G, SLOT = H // H_KV, min(BK, PAGE)  # a slot of the ring holds positions of one page: one TMA box
    P = BK // SLOT  # slots a block: the consumer takes BK keys a step whatever the page size
    pair, split = ad.program_id(0), ad.program_id(1)
    b, h_kv = pair // H_KV, pair % H_KV
    seq = PagedSequence(block_table, seq_lens, b, PAGES, PAGE)
    first_block, count = seq.split_blocks(BK, split, SPLITS)  # the split's share of the sequence
    STAGES = ring_stages(BK, D) if STAGES is None else STAGES
    loads = AttentionLoads(ad.bfloat16, ROWS, 1, SLOT, ad.bfloat16, ad.bfloat16, D, P * STAGES)

    with ad.warpgroup_role(1):  # the producer, a slot at a time
        if k_cache.dtype == ad.bfloat16:
            last = seq.last_entry()
            for j in ad.range(count):  # a block's P pages read from the table before its waits
                first = (first_block + j) * BK
                loads.load_located(j, [first + i * SLOT for i in range(P)], lambda at: seq.page(at, last),
                                   *(lambda at, page, c=c: seq.box(c, page, at, SLOT, h_kv)
                                     for c in (k_cache, v_cache)))
        else:  # fp8 pages become the tensor cores' bf16 through the threads (see the module)
            length, first_slot = seq.length(SLOT), first_block * P
            for j in ad.range(count * P):
                block = seq.block((first_slot + j) * SLOT, SLOT, length)
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
        scored_length = seq.length(SLOT, ad.WGMMA_COL)
        # A block's scores and probabilities, a tile a slot (each slot's keys are one wgmma's).
        s = [ad.registers((ROWS, SLOT), ad.float32, layout=ad.WGMMA) for _ in range(P)]
        p = [ad.registers((ROWS, SLOT), ad.bfloat16, layout=ad.WGMMA) for _ in range(P)]  # block j - 1's
        acc = ad.registers((ROWS, D), ad.float32, layout=ad.WGMMA)
        scale = LOG2E / math.sqrt(D)  # the scores are scaled before the softmax, which takes 2^x
        if SCALED:  # the keys' scale multiplies the scores, the values' the output
            k_scale, v_scale = (ad.load(scales.at[ad.zeros((ROWS,), ad.int32, layout=ad.WGMMA_ROW) + i],
                                        layout=ad.WGMMA_ROW) for i in range(2))
            scale = (k_scale * scale)[:, None]
        state = OnlineSoftmax(ROWS, 1.0, empty_rows=True)  # a split may see no key of a row
        state.start()
        acc[...] = ad.zeros((ROWS, D), ad.float32)

        def slots(j):
            return [loads.slot(j * P + i) for i in range(P)]

        def scores(j):
            """Issue s = q k_jᵀ, a wgmma a slot; the keys that exist (the table's entries) are
            read meanwhile."""
            first = (first_block + j) * BK
            scored = [seq.block(first + i * SLOT, SLOT, scored_length, ad.WGMMA_COL) for i in range(P)]
            for piece, slot in zip(s, slots(j)):
                loads.wait_keys(slot)
                ad.wgmma(piece, q_s, loads.keys(slot), accumulate=False)
            return first, scored

        def softmax(first, scored):
            pieces = []
            for i, block in enumerate(scored):
                block.check()
                key = first + i * SLOT + ad.iota((ROWS, SLOT), ad.int32, 1, layout=ad.WGMMA)
                hidden = (key > last_key[:, None]) | ~block.present[None, :]
                pieces.append(ad.where(hidden, -math.inf, s[i][...] * scale))
            return state.update(pieces, ad.bfloat16)

        def keep(probabilities):
            for piece, kept in zip(p, probabilities):
                piece[...] = kept

        def values(j):
            """Issue acc += p_j v_j, a wgmma a slot."""
            for piece, slot in zip(p, slots(j)):
                loads.wait_values(slot)
                ad.wgmma(acc, piece[...], loads.values(slot))

        with ad.when(count > 0):  # as `blocks.attention_forward`: s_j runs beside p_{j-1} v_{j-1}
            block = scores(0)
            ad.wgmma_wait(0)
            loads.release_keys(*slots(0))
            keep(softmax(*block)[0])
            for j in ad.range(1, count):
                block = scores(j)
                values(j - 1)
                ad.wgmma_wait(P)  # s_j is done (its P wgmmas went first), p v may still run
                loads.release_keys(*slots(j))
                probabilities, alpha = softmax(*block)
                ad.warpgroup_barrier()  # keeps ptxas from hoisting the wait above the softmax
                ad.wgmma_wait(0)
                loads.release_values(*slots(j - 1))
                keep(probabilities)
                acc[...] = acc[...] * alpha[:, None]
            values(count - 1)
            ad.wgmma_wait(0)
            loads.release_values(*slots(count - 1))
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


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"paged_decode_kernel": ((ArraySpec((2, 1, 8, 128), ad.bfloat16),
                                         *(ArraySpec((16, 16, 2, 128), ad.bfloat16) for _ in range(2)),
                                         ArraySpec((2, 8), ad.int32), ArraySpec((2,), ad.int32),
                                         ArraySpec((2,), ad.float32), ArraySpec((2, 1, 8, 128), ad.bfloat16),
                                         ArraySpec((2, 16, 128), ad.float32), ArraySpec((2, 16), ad.float32)),
                                        {"SPLITS": 2})}
