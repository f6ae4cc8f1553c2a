"""The work of an attention CTA, forward: a producer warpgroup that loads a query tile and
streams key and value blocks, and two consumer warpgroups that each take half of the query rows
through the key blocks with the online softmax, then hand their output to an epilogue.

    import asyncdsl as ad
    from asyncdsl.blocks.attention_forward import HeadRows, attend
    from asyncdsl.blocks.attention_loads import AttentionLoads
    from asyncdsl.blocks.attention_tiles import QueryTile

    @ad.kernel(grid=lambda q, k, v, o, lse: (ad.cdiv(q.shape[0], 128),), block=384)
    def one_head(q, k, v, o, lse):                   # q, k, v, o (S, 64) bf16, lse (S,) float32
        S, D = q.shape
        tile = QueryTile(S, k.shape[0], rows=128, BK=128, causal=True)
        loads = AttentionLoads(q.dtype, 64, 2, 128, k.dtype, v.dtype, D, stages=2)
        rows = HeadRows(*(lambda start, count, x=x: x.at[ad.ds(start, count), :] for x in (q, k, v)))

        def finish(me, first_row, state, acc):       # each consumer's 64 rows
            ad.store(lse.at[ad.ds(first_row, 64)], state.log_sum_exp())
            ad.store(o.at[ad.ds(first_row, 64), :], state.normalize(acc[...]).astype(o.dtype))

        attend(tile, loads, rows, scale=1.4426950408889634 / 8, finish=finish)

`attend` must be called at the kernel's top level (it opens the warpgroup roles), with the
loads of 2 parts of BQ query rows and ring slots of BK keys and a `QueryTile` of 2·BQ rows and
BK keys a block: `AttentionLoads`, or for a paged cache `PagedLoads` (a block gathered page by
page, `query_copied`, with `HeadRows.locate`).  `asyncdsl.kernels.attention`,
`attention_varlen` and `paged_prefill` differ only in how they address a head's rows
(`HeadRows`) and store the output (`finish`). Where the tile's lengths are traced (a
variable-length batch) the CTAs whose tile lies past the sequence's end do nothing
(`QueryTile.live`).

For block j a consumer issues s = q @ k_jᵀ (`loads.scores`), then o += p_{j-1} @ v_{j-1} (p
straight from registers as wgmma's A operand); once s is done, the online softmax of s runs
while that second wgmma does, and o is scaled by α after it.  A warpgroup barrier before the
wait for p @ v keeps ptxas from hoisting that wait above the exponentials (docs/hardware.md
§14.6).  The producer keeps 40 registers a thread and hands the rest to the consumers (232
each).  With `turns` (an `asyncdsl.turns((0, 1))`) the consumers take turns to issue their
wgmmas.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import QueryTile
from asyncdsl.blocks.online_softmax import OnlineSoftmax
from asyncdsl.blocks.paged_loads import PagedLoads
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad


@dataclass(frozen=True)
class HeadRows:
    """Where this CTA's head lies: each of `query`, `keys` and `values` maps (start, count) to
    rows start.. of that head of q, k or v, a (count, D) GMEM view.  With `locate` (a paged
    cache, loaded by `PagedLoads`), `locate(start)` is the page holding key `start`, read from
    global memory for each of a block's pages before the producer waits for the block's slot
    (their latency spent once a block, behind the wait); keys then take (start, count, page,
    chunk), the 64 columns of `chunk`, and values (start, count, page)."""

    query: Callable
    keys: Callable
    values: Callable
    locate: Callable | None = None


def attend(tile: QueryTile, loads: AttentionLoads | PagedLoads, head: HeadRows, *, scale: float,
           finish: Callable, turns=None, empty_rows: bool = False) -> None:
    """The CTA's producer and consumers (see the module's docstring); `finish(me, first_row,
    state, acc)` stores consumer `me`'s rows from `first_row`: its `OnlineSoftmax` and its
    output accumulator (not yet divided by the rows' sums)."""
    BQ, BK, D = loads.q.shape[1], loads.block, loads.q.shape[2]
    if BK != tile.BK:
        raise ad.TraceError(f"the ring's slots hold {BK} keys and the tile's blocks {tile.BK}: a block is a "
                            f"slot", user_location())
    locate = head.locate
    if isinstance(loads, PagedLoads) != (locate is not None):
        raise ad.TraceError("a paged ring (PagedLoads) takes the page of each key from HeadRows.locate, and "
                            "only it does", user_location())
    p_dtype = loads.v.dtype

    with ad.warpgroup_role(2, registers=40), _live(tile):
        for half in range(2):
            loads.load_query(half, head.query(tile.first_row + half * BQ, BQ))
        for j in ad.range(tile.blocks):
            if isinstance(loads, PagedLoads) and locate is not None:  # each page's number read first
                starts = [j * BK + i * loads.piece for i in range(loads.pieces)]
                loads.load(j, [locate(start) for start in starts],
                           lambda i, page, c: head.keys(starts[i], loads.piece, page, c),
                           lambda i, page: head.values(starts[i], loads.piece, page))
            elif isinstance(loads, AttentionLoads):
                loads.load(j, lambda i: head.keys(i * BK, BK), lambda i: head.values(i * BK, BK))

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        my_first_row = tile.first_row + me * BQ
        s = ad.registers((BQ, BK), ad.float32, layout=ad.WGMMA)  # q @ kᵀ of a block
        p = ad.registers((BQ, BK), p_dtype, layout=ad.WGMMA)  # its probabilities
        acc = ad.registers((BQ, D), ad.float32, layout=ad.WGMMA)
        state = OnlineSoftmax(BQ, scale, empty_rows)

        def turn():
            """Taking turns to issue the wgmmas: one consumer's run while the other's softmax does."""
            return turns.turn() if turns is not None else contextlib.nullcontext()

        def scores(j):
            """Issue s = q @ k_jᵀ."""
            loads.wait_keys(loads.slot(j))
            loads.scores(s, loads.slot(j), me)

        def softmax(j, masked: bool):
            """Block j's probabilities (bf16) and the factor the output so far is scaled by."""
            return state.update(tile.mask(s[...], j, my_first_row) if masked else s[...], p_dtype)

        def step(j, masked: bool):
            """Block j while block j - 1's p @ v runs: issue s_j, then o += p_{j-1} @ v_{j-1};
            the softmax of s_j overlaps that wgmma, whose end it waits for to scale o."""
            with ad.region("block"):
                with turn():
                    with ad.region("issue s"):
                        scores(j)
                    with ad.region("issue pv"):
                        loads.wait_values(loads.slot(j - 1))
                        ad.wgmma(acc, p[...], loads.values(loads.slot(j - 1)))
                with ad.region("wait s"):
                    ad.wgmma_wait(1)  # s_j is done (its wgmmas went first), p_{j-1} @ v_{j-1} may still run
                loads.release_keys(loads.slot(j))
                with ad.region("softmax"):
                    probabilities, alpha = softmax(j, masked)
                with ad.region("wait pv"):
                    # ptxas moves a wgmma wait up to where its scheduler likes it, above most
                    # exponentials, which then no longer overlap p @ v; it moves nothing across
                    # a barrier (docs/hardware.md §14.6).
                    ad.warpgroup_barrier()
                    ad.wgmma_wait(0)
                loads.release_values(loads.slot(j - 1))
                with ad.region("rescale"):
                    p[...] = probabilities
                    acc[...] = acc[...] * alpha[:, None]

        with _live(tile):  # registers are the kernel's: allocated outside the condition
            acc[...] = ad.zeros((BQ, D), ad.float32)
            state.start()
            loads.query_landed.wait()
            with turn():
                scores(0)
            ad.wgmma_wait(0)
            loads.release_keys(loads.slot(0))
            p[...] = softmax(0, masked=tile.first_block_masked())[0]
            tile.walk_after_first(step)
            last = loads.slot(tile.blocks - 1)
            loads.wait_values(last)
            with turn():
                ad.wgmma(acc, p[...], loads.values(last))
            ad.wgmma_wait(0)
            loads.release_values(last)
            finish(me, my_first_row, state, acc)


def sequence_rows_finish(loads: AttentionLoads | PagedLoads, o, lse, h, q_start, S) -> Callable:
    """The `finish` of a packed batch's CTA: o (total, H, D) and lse (H, total) receive head h's
    rows of the sequence whose S rows start at row `q_start`, and no other row.  A consumer's
    rows wholly inside the sequence go out by TMA through its q buffer; a last, partial part
    (and lse always) by register stores masked to the sequence's rows."""
    BQ, D = loads.q.shape[1], loads.q.shape[2]

    def finish(me, first_row, state, acc):
        left = S - first_row  # of the BQ rows, those below `left` are the sequence's
        ad.store(lse.at[h, ad.ds(q_start + first_row, BQ)], state.log_sum_exp(),
                 mask=ad.iota((BQ,), ad.int32, 0) < left)
        rows = state.normalize(acc[...]).astype(o.dtype)
        window = o.at[ad.ds(q_start + first_row, BQ), h, :]
        with ad.when(left >= BQ):
            loads.q.at[me][...] = rows
            ad.fence_async_smem()
            ad.async_copy(loads.q.at[me], window)
            ad.await_async_copy(0)
        with ad.when(left < BQ):
            ad.store(window, rows, mask=ad.iota((BQ, D), ad.int32, 0) < left)

    return finish


def _live(tile: QueryTile):
    """Where the tile's lengths are traced, only the CTAs with rows of the sequence work."""
    return contextlib.nullcontext() if tile.live is None else ad.when(tile.live)
