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
once for the group. A producer warpgroup copies each block's keys and values by TMA page by
page into one slot of a ring (`blocks.paged_loads`), the page numbers from the table traced
coordinates (`blocks.paged_kv`) read together before the waits for the slot (one latency of
global memory a block); the slot holds them so that the tensor cores take the whole block at
once whatever the page size: q kᵀ is a wgmma a 64-column chunk, then one online-softmax update
and one wgmma p v a block. fp8 pages are gathered by the producer's threads and written as
bf16 (wgmma takes fp8 only with fp8 q and K-major values). The scores hide positions past a
row's last key and on pages outside the cache, whose copies read the nearest page: nothing
outside the cache is read, and a bad table is reported.

The splits balance the batch's work (`blocks.balanced_splits`): a first small launch reads the
lengths and plans pieces of about equal blocks over a budget of `ctas_per_sm` CTAs a
multiprocessor, so the few long sequences of a skewed batch take many CTAs and the short ones
one each; the decode's grid is (units + B) slots × H_kv CTAs, each reading its sequence and blocks
from the plan (an idle slot walks no block and stores nothing).  A plan for one CTA a
multiprocessor runs on the build of one (all its registers and shared memory), one for two or
more on the paired build, two CTAs a multiprocessor at once (`paged_decode_config`; more than two
run in waves).  A sequence of one split
writes o itself; the pieces of the others go to a float32 workspace and a merge launch folds
each sequence's in split order (`blocks.split_kv_merge`), so results do not depend on which CTA
finished first.  Launch shapes depend only on the arrays' shapes: a call captures in a CUDA graph.

Page sizes 16 and 64, head dims 64 and 128, Q·G at most 64.
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.balanced_splits import SplitBudget, SplitWork
from asyncdsl.blocks.online_softmax import LOG2E, OnlineSoftmax
from asyncdsl.blocks.paged_kv import PagedSequence
from asyncdsl.blocks.paged_loads import FILL_ROWS, PagedLoads
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.outputs import empty
from asyncdsl.kernels.paged_decode_checks import ROWS, check_arguments, check_shapes, scales_of
from asyncdsl.kernels.paged_decode_config import (CTAS_PER_SM, HOST_SMS, PAIRED_REGISTERS, resident,
                                                  ring_stages)
from asyncdsl.kernels.paged_decode_splits import HIDDEN, merge_kernel, plan_kernel, workspace



@on_stream
def paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, *, k_scale=None, v_scale=None,
                           splits: int | None = None, ctas_per_sm: int | None = None, block: int = 64,
                           stages: int | None = None, gather: str = "tma", stream=None):
    """Attention of q (B, H, D) or (B, Q, H, D) over the paged caches (see the module's
    docstring); returns o like q.  `ctas_per_sm`: the CTAs a multiprocessor the splits are
    planned for, 1 to 4 (`CTAS_PER_SM` where None; more than fit at once run in waves of smaller
    pieces); `splits`: at most this many splits a sequence (1: none); `block`: positions a step
    (32 or 64); `stages`: blocks in flight, from 2 to what shared memory holds (`ring_stages`
    where None, for the CTAs that fit a multiprocessor at once); `gather`: how bf16 pages reach
    shared memory, "tma" (a copy a page) or "cp_async" (the producer's threads, 16 bytes each)."""
    check_arguments(q, k_cache, block_table, splits, ctas_per_sm, gather)
    q4 = q.reshape(q.shape[0], 1, *q.shape[1:]) if len(q.shape) == 3 else q
    batch, queries, heads, d = q4.shape
    ctas_per_sm = CTAS_PER_SM if ctas_per_sm is None else ctas_per_sm
    sms = HOST_SMS if on_host(q) else multiprocessors(q)
    budget = SplitBudget.make(batch, k_cache.shape[2], ctas_per_sm * sms)
    scaled = k_scale is not None or v_scale is not None
    scales = scales_of(q, k_scale, v_scale) if scaled else empty(q, (2,), np.float32)  # unread unscaled
    o = empty(q, q4.shape, q.dtype)
    plan, part, lse = workspace(q, budget, queries * heads, d, splits != 1, stream)
    launch(plan_kernel, seq_lens, plan, stream=stream, CAPACITY=block_table.shape[1] * k_cache.shape[1],
           BK=block, MAX_SPLITS=splits)
    stages = ring_stages(block, d, resident(ctas_per_sm)) if stages is None else stages
    decode = paired_decode_kernel if resident(ctas_per_sm) == 2 else paged_decode_kernel
    launch(decode, q4, k_cache, v_cache, block_table, seq_lens, scales, plan, o, part, lse, stream=stream,
           SCALED=scaled, BK=block, STAGES=stages, GATHER=gather)
    if splits != 1:
        launch(merge_kernel, plan, part, lse, o.reshape(batch, queries * heads, d), stream=stream)
    return o.reshape(q.shape)


def _grid(q, k_cache, v_cache, block_table, seq_lens, scales, plan, *_, **__):
    # The KV heads of a slot are neighbours in the grid, so the CTAs of a sequence's heads, which
    # read the same pages, run at once; one dimension of slots x heads, so any batch launches.
    return (k_cache.shape[2] * plan.shape[1],)


@kernel(grid=_grid, block=256, name="paged_decode", profile_events=2048)
def paged_decode_kernel(q, k_cache, v_cache, block_table, seq_lens, scales, plan, o, part, lse,
                        SCALED: constexpr = False, BK: constexpr = 64, STAGES: constexpr = None,
                        GATHER: constexpr = "tma"):
    """For the work `plan` gives each slot (`blocks.balanced_splits`), o of a sequence of one
    split, else the split's part and lse; `STAGES` blocks in flight (`ring_stages` where None)."""
    _decode(1, q, k_cache, v_cache, block_table, seq_lens, scales, plan, o, part, lse, SCALED, BK, STAGES,
            GATHER)


@kernel(grid=_grid, block=256, name="paired_decode", profile_events=2048, ctas_per_sm=2)
def paired_decode_kernel(q, k_cache, v_cache, block_table, seq_lens, scales, plan, o, part, lse,
                         SCALED: constexpr = False, BK: constexpr = 64, STAGES: constexpr = None,
                         GATHER: constexpr = "tma"):
    """`paged_decode_kernel` built for two CTAs a multiprocessor (`PAIRED_REGISTERS`)."""
    _decode(2, q, k_cache, v_cache, block_table, seq_lens, scales, plan, o, part, lse, SCALED, BK, STAGES,
            GATHER)


def _decode(ctas_per_sm, q, k_cache, v_cache, block_table, seq_lens, scales, plan, o, part, lse, SCALED, BK,
            STAGES, GATHER):
    _, Q, H, D = q.shape
    PAGES, PAGE, H_KV, _ = k_cache.shape
    check_shapes(q, k_cache, v_cache, block_table, seq_lens, plan, o, part, lse, BK, STAGES, ctas_per_sm)
    G, PIECE = H // H_KV, min(BK, PAGE)  # a piece of a block: one page's positions, one copy
    h_kv, slot = ad.program_id(0) % H_KV, ad.program_id(0) // H_KV
    work = SplitWork(plan, slot,
                     lambda b: PagedSequence(block_table, seq_lens, b, PAGES, PAGE).blocks(BK))
    b, first_block, count = work.b, work.first, work.count
    seq = PagedSequence(block_table, seq_lens, b, PAGES, PAGE)
    STAGES = ring_stages(BK, D, ctas_per_sm) if STAGES is None else STAGES
    bf16 = k_cache.dtype == ad.bfloat16
    loads = PagedLoads(ROWS, BK, PAGE, D, STAGES, filled=not bf16, gather=GATHER)

    producer, consumer = PAIRED_REGISTERS if ctas_per_sm == 2 else (None, None)
    with ad.warpgroup_role(1, registers=producer):  # the producer, a block at a time
        if bf16:
            last = seq.last_entry()
            for j in ad.range(count):
                first = (first_block + j) * BK
                starts = [first + i * PIECE for i in range(BK // PIECE)]
                pages = [seq.page(at, last) for at in starts]  # read from the table before the waits
                loads.load(j, pages, lambda i, page, c: seq.box(k_cache, page, starts[i], PIECE, h_kv, c),
                           lambda i, page: seq.box(v_cache, page, starts[i], PIECE, h_kv))
        else:  # fp8 pages become the tensor cores' bf16 through the threads (see the module)
            length = seq.length(FILL_ROWS)
            for j in ad.range(count):
                def rows(cache, r, c=None, first=(first_block + j) * BK):
                    return seq.block(first + r, FILL_ROWS, length).rows(cache, h_kv, c).astype(ad.bfloat16)

                loads.fill(j, lambda r, c: rows(k_cache, r, c), lambda r: rows(v_cache, r))

    with ad.warpgroup_role(0, registers=consumer):  # the consumer
        row = ad.iota((ROWS,), ad.int32, 0, layout=ad.WGMMA_ROW)  # row = query * G + head in the group
        query, head, live = row // G, h_kv * G + row % G, row < Q * G
        columns, chunk = ad.iota((1, D), ad.int32, 1), ad.iota((1, 64), ad.int32, 1)
        s = ad.registers((ROWS, BK), ad.float32, layout=ad.WGMMA)  # a block's scores
        p = ad.registers((ROWS, BK), ad.bfloat16, layout=ad.WGMMA)  # block j - 1's probabilities
        acc = ad.registers((ROWS, D), ad.float32, layout=ad.WGMMA)
        state = OnlineSoftmax(ROWS, 1.0, empty_rows=True)  # a split may see no key of a row
        with ad.when(work.live):  # an idle slot reads nothing more
            loads.write_query(lambda c: ad.load(q.at[b, query[:, None], head[:, None], chunk + 64 * c],
                                                layout=ad.WGMMA, mask=live[:, None]))
            last_key = seq.length(ROWS, ad.WGMMA_ROW) - Q + query  # the last key each row sees
            scored_length = seq.length(BK, ad.WGMMA_COL)
            scale = LOG2E / math.sqrt(D)  # the scores are scaled before the softmax, which takes 2^x
            if SCALED:  # the keys' scale multiplies the scores, the values' the output
                k_scale, v_scale = (ad.load(scales.at[ad.zeros((ROWS,), ad.int32, layout=ad.WGMMA_ROW) + i],
                                            layout=ad.WGMMA_ROW) for i in range(2))
                scale = (k_scale * scale)[:, None]
            state.start()
            acc[...] = ad.zeros((ROWS, D), ad.float32)

            def scores(j):
                """Issue s = q k_jᵀ; the keys that exist (the table's entries) are read meanwhile."""
                first = (first_block + j) * BK
                scored = seq.block(first, BK, scored_length, ad.WGMMA_COL)
                loads.wait_keys(loads.slot(j))
                loads.scores(s, loads.slot(j))
                return first, scored

            def softmax(first, scored):
                scored.check()
                key = first + ad.iota((ROWS, BK), ad.int32, 1, layout=ad.WGMMA)
                hidden = (key > last_key[:, None]) | ~scored.present[None, :]
                return state.update(ad.where(hidden, -math.inf, s[...] * scale), ad.bfloat16)

            def values(j):
                """Issue acc += p_j v_j."""
                loads.wait_values(loads.slot(j))
                ad.wgmma(acc, p[...], loads.values(loads.slot(j)))

            with ad.when(count > 0):  # as `blocks.attention_forward`: s_j runs beside p_{j-1} v_{j-1}
                block = scores(0)
                ad.wgmma_wait(0)
                loads.release_keys(loads.slot(0))
                p[...] = softmax(*block)[0]
                for j in ad.range(1, count):
                    with ad.region("issue"):
                        block = scores(j)
                        values(j - 1)
                    with ad.region("wait s"):
                        ad.wgmma_wait(1)  # s_j is done (its groups went first), p v may still run
                    loads.release_keys(loads.slot(j))
                    with ad.region("softmax"):
                        probabilities, alpha = softmax(*block)
                    with ad.region("wait pv"):
                        ad.warpgroup_barrier()  # keeps ptxas from hoisting the wait above the softmax
                        ad.wgmma_wait(0)
                    loads.release_values(loads.slot(j - 1))
                    p[...] = probabilities
                    acc[...] = acc[...] * alpha[:, None]
                values(count - 1)
                ad.wgmma_wait(0)
                loads.release_values(loads.slot(count - 1))
            out = state.normalize(acc[...]) * v_scale[:, None] if SCALED else state.normalize(acc[...])
            with ad.when(work.direct):
                ad.store(o.at[b, query[:, None], head[:, None], columns], out.astype(o.dtype),
                         mask=live[:, None])
            with ad.when(work.partial):
                flat = query * H + head  # the row of (query, head) among the sequence's Q·H
                ad.store(part.at[work.part, flat[:, None], columns], out, mask=live[:, None])
                # A row this split saw no key of: an lse that weighs nothing, never -inf (a NaN).
                ad.store(lse.at[work.part, flat], ad.maximum(state.log_sum_exp(), HIDDEN), mask=live)


# Arguments `asyncdsl dump` traces the kernel with.
_EXAMPLE = ((ArraySpec((2, 1, 8, 128), ad.bfloat16), *(ArraySpec((16, 16, 2, 128), ad.bfloat16),) * 2,
             ArraySpec((2, 8), ad.int32), ArraySpec((2,), ad.int32), ArraySpec((2,), ad.float32),
             ArraySpec((5, 6), ad.int32), ArraySpec((2, 1, 8, 128), ad.bfloat16),
             ArraySpec((8, 8, 128), ad.float32), ArraySpec((8, 8), ad.float32)), {"BK": 64})
EXAMPLE_ARGS = {"paged_decode_kernel": _EXAMPLE, "paired_decode_kernel": _EXAMPLE}
