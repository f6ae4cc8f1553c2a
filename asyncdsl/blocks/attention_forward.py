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
`AttentionLoads` of 2 parts of BQ query rows and ring slots of BK keys, and a `QueryTile` of
2·BQ rows and BK keys a block (or slots of BK / P keys, P slots a block: a paged cache's pages
of 16 in blocks of 64, each slot its own wgmma, the block one online-softmax update):
`asyncdsl.kernels.attention` and `attention_varlen` differ only in how they address a head's
rows (`HeadRows`) and store the output (`finish`). Where the tile's lengths are traced (a
variable-length batch) the CTAs whose tile lies past the sequence's end do nothing
(`QueryTile.live`).

For block j a consumer issues s = q @ k_jᵀ (one wgmma), then o += p_{j-1} @ v_{j-1} (p straight
from registers as wgmma's A operand); once s is done, the online softmax of s runs while that
second wgmma does, and o is scaled by α after it.  A warpgroup barrier before the wait for p @ v
keeps ptxas from hoisting that wait above the exponentials (docs/hardware.md §14.6).  The
producer keeps 40 registers a thread and hands the rest to the consumers (232 each).  With
`turns` (an `asyncdsl.turns((0, 1))`) the consumers take turns to issue their wgmmas.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import QueryTile
from asyncdsl.blocks.online_softmax import OnlineSoftmax
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad


@dataclass(frozen=True)
class HeadRows:
    """Where this CTA's head lies: each of `query`, `keys` and `values` maps (start, count) to
    rows start.. of that head of q, k or v, a (count, D) GMEM view.  With `locate`, keys and
    values take a third argument, `locate(start)` for the slot at key `start`: what the slot's
    copies must first read from global memory (a paged cache's page number), read for a whole
    key block before the producer waits for its slots, so that the latency of those reads is
    spent once a block, behind the waits, not once a slot after each."""

    query: Callable
    keys: Callable
    values: Callable
    locate: Callable | None = None


def attend(tile: QueryTile, loads: AttentionLoads, head: HeadRows, *, scale: float, finish: Callable,
           turns=None, empty_rows: bool = False) -> None:
    """The CTA's producer and consumers (see the module's docstring); `finish(me, first_row,
    state, acc)` stores consumer `me`'s rows from `first_row`: its `OnlineSoftmax` and its
    output accumulator (not yet divided by the rows' sums)."""
    BQ, SLOT, D = loads.q.shape[1], loads.k.shape[1], loads.q.shape[2]
    P = tile.BK // SLOT  # slots a key block: the ring's slots may hold a piece of a block each
    if loads.stages < 2 * P - 1:
        # The keys of block j + 1 land while block j - 1's values are still read (p @ v runs a
        # block behind the scores): a smaller ring would never free a slot for them.
        raise ad.TraceError(f"a ring of {loads.stages} slots cannot stream blocks of {P} slots: the keys "
                            f"of a block land while the values of the block two before are still read, "
                            f"so the ring needs at least {2 * P - 1} slots", user_location())
    q_s, p_dtype = loads.q, loads.v.dtype  # q_s: [consumer]

    def slot(j, i=0):
        """The ring slot of piece i of key block j."""
        return loads.slot(j) if P == 1 else loads.slot(j * P + i)

    def slots(j):
        return [slot(j, i) for i in range(P)]

    with ad.warpgroup_role(2, registers=40), _live(tile):
        for half in range(2):
            loads.load_query(half, head.query(tile.first_row + half * BQ, BQ))
        if head.locate is None:
            for j in ad.range(tile.blocks if P == 1 else tile.blocks * P):
                loads.load(j, lambda i: head.keys(i * SLOT, SLOT), lambda i: head.values(i * SLOT, SLOT))
        else:
            for j in ad.range(tile.blocks):
                loads.load_located(j, [(j * P + i) * SLOT for i in range(P)], head.locate,
                                   lambda at, w: head.keys(at, SLOT, w),
                                   lambda at, w: head.values(at, SLOT, w))

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        my_first_row = tile.first_row + me * BQ
        s = [ad.registers((BQ, SLOT), ad.float32, layout=ad.WGMMA) for _ in range(P)]  # q @ kᵀ of a block
        p = [ad.registers((BQ, SLOT), p_dtype, layout=ad.WGMMA) for _ in range(P)]  # its probabilities
        acc = ad.registers((BQ, D), ad.float32, layout=ad.WGMMA)
        state = OnlineSoftmax(BQ, scale, empty_rows)

        def turn():
            """Taking turns to issue the wgmmas: one consumer's run while the other's softmax does."""
            return turns.turn() if turns is not None else contextlib.nullcontext()

        def scores(j):
            """Issue s = q @ k_jᵀ (a wgmma a slot)."""
            for i, piece in enumerate(s):
                loads.wait_keys(slot(j, i))
                ad.wgmma(piece, q_s.at[me], loads.keys(slot(j, i)), accumulate=False)

        def softmax(j, masked: bool):
            """Block j's probabilities (bf16, a tile a slot) and the factor the output so far is
            scaled by."""
            pieces = [tile.mask(piece[...], j, my_first_row, i * SLOT) if masked else piece[...]
                      for i, piece in enumerate(s)]
            return state.update(pieces, p_dtype)

        def keep(probabilities):
            for piece, kept in zip(p, probabilities):
                piece[...] = kept

        def step(j, masked: bool):
            """Block j while block j - 1's p @ v runs: issue s_j, then o += p_{j-1} @ v_{j-1};
            the softmax of s_j overlaps that wgmma, whose end it waits for to scale o."""
            with ad.region("block"):
                with turn():
                    with ad.region("issue s"):
                        scores(j)
                    with ad.region("issue pv"):
                        for i, piece in enumerate(p):
                            loads.wait_values(slot(j - 1, i))
                            ad.wgmma(acc, piece[...], loads.values(slot(j - 1, i)))
                with ad.region("wait s"):
                    ad.wgmma_wait(P)  # s_j is done (its wgmmas went first), p_{j-1} @ v_{j-1} may still run
                loads.release_keys(*slots(j))
                with ad.region("softmax"):
                    probabilities, alpha = softmax(j, masked)
                with ad.region("wait pv"):
                    # ptxas moves a wgmma wait up to where its scheduler likes it, above most
                    # exponentials, which then no longer overlap p @ v; it moves nothing across
                    # a barrier (docs/hardware.md §14.6).
                    ad.warpgroup_barrier()
                    ad.wgmma_wait(0)
                loads.release_values(*slots(j - 1))
                with ad.region("rescale"):
                    keep(probabilities)
                    acc[...] = acc[...] * alpha[:, None]

        with _live(tile):  # registers are the kernel's: allocated outside the condition
            acc[...] = ad.zeros((BQ, D), ad.float32)
            state.start()
            loads.query_landed.wait()
            with turn():
                scores(0)
            ad.wgmma_wait(0)
            loads.release_keys(*slots(0))
            keep(softmax(0, masked=tile.first_block_masked())[0])
            tile.walk_after_first(step)
            last = slots(tile.blocks - 1)
            for last_slot in last:
                loads.wait_values(last_slot)
            with turn():
                for piece, last_slot in zip(p, last):
                    ad.wgmma(acc, piece[...], loads.values(last_slot))
            ad.wgmma_wait(0)
            loads.release_values(*last)
            finish(me, my_first_row, state, acc)


def sequence_rows_finish(loads: AttentionLoads, o, lse, h, q_start, S) -> Callable:
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
