"""The work of an attention backward CTA at head dims 64 and 128: a producer warpgroup that
loads the CTA's BN = 128 keys and values once, streams q and do of every query block (of every
query head of the group) that meets them, with their rows' lse and δ (`asyncdsl.blocks.
query_row_stats`), and adds the CTA's shares of dq into a float32 workspace, and two consumer
warpgroups that each own 64 of the keys, keep their dk and dv in registers and make the shares
of dq.

    differentiate(tile, loads, head, scale=..., deterministic=False)

must be called at the kernel's top level (it opens the warpgroup roles), with a `KeyTile` of
128 keys a CTA and 64 query rows a step, the `AttentionLoads` of 2 parts of 64 keys (the roles of
queries and keys swapped: keys in its `q`, query rows in its "keys", do in its "values"), and the
`GradientRows` that say where the CTA's rows lie.  `asyncdsl.kernels.attention_backward` and
`attention_varlen_backward` differ only in those: a (batch, head) of a dense tensor, or a
sequence's rows of a packed one.  Where the tile's lengths are traced the CTAs past the
sequence's keys do nothing, and dk, dv go out only to the sequence's rows.

Per query block a consumer computes, transposed so that p and ds feed the tensor cores from
registers,
    sᵀ = k qᵀ,  dpᵀ = v doᵀ,  pᵀ = exp(sᵀ/√D - lse),  dsᵀ = pᵀ ∘ (dpᵀ - δ),
    dv += pᵀ do,  dk += dsᵀ q,
and writes its dsᵀ into SMEM.  The CTA's share of dq, ds k over all its 128 keys, is then made
from both consumers' dsᵀ (read transposed) and k's 64-column tiles (windows of the keys' own
buffer), dq's B operand: at D = 128 consumer c makes dq's columns c·64.., at D = 64, where dq
has one 64-column piece, the consumers take turns, consumer t % 2 at step t.  One piece a
consumer, not a piece of each consumer's own 64 keys, halves the bytes added.  The consumers
hand their pieces to the producer through SMEM (`asyncdsl.blocks.attention_grads.DqAdder`),
which adds step t's into the float32 workspace by TMA reduce-add after loading step t + 2's q
and do: in deterministic mode the waits for the adds of the key blocks before this one, and for
its own to land, are the producer's, off the consumers' path while they take less than a step.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

from asyncdsl.blocks.attention_grads import DqAdder, KeyTile
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.blocks.query_row_stats import QueryRowStats
from asyncdsl.frontend import language as ad


@dataclass(frozen=True)
class GradientRows:
    """Where this CTA's rows lie, as GMEM views: `query`, `grad_out` (h, start, count) rows of
    query head h of q and do; `keys`, `values`, `grad_keys`, `grad_values` (start, count) rows of
    the key/value head of k, v, dk, dv; `lse`, `delta` (h, rows) the float32 rows (an `ad.ds`) of
    head h; `workspace` (h, rows, c) columns c·64.. of the float32 dq sum; `flag` (h, i) query
    block i's order flag."""

    query: Callable
    grad_out: Callable
    keys: Callable
    values: Callable
    grad_keys: Callable
    grad_values: Callable
    lse: Callable
    delta: Callable
    workspace: Callable
    flag: Callable


def differentiate(tile: KeyTile, loads: AttentionLoads, head: GradientRows, *, scale: float,
                  deterministic: bool) -> None:
    """The CTA's producer and consumers (see the module's docstring); `scale` = log2(e) / √D."""
    BM, D = tile.BM, loads.q.shape[2]
    columns = D // 64
    values = ad.smem((2, 64, D), loads.v.dtype, **tensor_core_layout(64))  # [consumer], A of v doᵀ
    # [step % 2, consumer] dsᵀ, A of ds k as .T; two steps of them, so that a consumer writes
    # step t + 1's while the other may still read step t's.
    ds_s = ad.smem((2, 2, 64, BM), loads.k.dtype, **tensor_core_layout(64))
    ds_stored = ad.barrier(arrival_count=2, num=2)  # [step % 2] both consumers' dsᵀ are in ds_s
    adder = DqAdder()
    stats = QueryRowStats(loads.stages, BM)  # each slot's rows' lse·(-log2 e) and δ
    values_landed = ad.barrier(arrival_count=2)
    keys_read = ad.barrier(arrival_count=2)  # both consumers are done reading each other's keys

    def key_columns(part, column):
        """Columns column·64.. of the keys of consumer `part`: B of ds k."""
        return loads.q.at[part, :, ad.ds(column * 64, 64)]

    def dq_pieces(t):
        """The (slot, writes, workspace window) of step t's dq pieces, a slot a consumer: at
        D = 128 both consumers' (columns 0.. and 64..), each handing one a step; at D = 64
        consumer t % 2's, handing one every other step."""
        h, i = tile.locate(t)
        rows = ad.ds(i * BM, BM)
        if columns == 2:
            return [(c, t, head.workspace(h, rows, c)) for c in range(2)], h, i
        return [(t % 2, t // 2, head.workspace(h, rows, 0))], h, i

    def add_step(t):
        """For the producer: add step t's dq pieces (deterministic: after those of the key blocks
        before this one)."""
        pieces, h, i = dq_pieces(t)
        adder.add([pieces], *((head.flag(h, i), tile.order(i)) if deterministic else ()))

    with ad.warpgroup_role(2, registers=40), _live(tile):
        for part in range(2):
            rows = tile.first_key + part * 64
            loads.load_query(part, head.keys(rows, 64))
            ad.async_copy(head.values(rows, 64), values.at[part], barrier=values_landed)
        def load_step(t, h, i, masked: bool):
            """Step t's q, do, lse and δ, into the slot the consumers are done with at step
            t - STAGES."""
            rows = ad.ds(i * BM, BM)
            stats.load_step(loads, t, tile, i, head.lse(h, rows), head.delta(h, rows),
                            lambda _: head.query(h, i * BM, BM), lambda _: head.grad_out(h, i * BM, BM))

        # Step t's loads, then step t - 2's dq, which the consumers hand over as they end step t - 2.
        tile.walk_trailing(load_step, add_step, lag=2)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        first_key = tile.first_key + me * 64
        s_t = ad.registers((64, BM), ad.float32, layout=ad.WGMMA)  # sᵀ, then the consumer's dq piece
        dp_t = ad.registers((64, BM), ad.float32, layout=ad.WGMMA)  # dpᵀ
        dk_acc = ad.registers((64, D), ad.float32, layout=ad.WGMMA)
        dv_acc = ad.registers((64, D), ad.float32, layout=ad.WGMMA)

        def hand_share(t):
            """Step t's dq piece of this consumer (see the module's docstring), made from both
            consumers' dsᵀ and handed to the producer."""
            column = me if columns == 2 else 0
            buffer = t % 2
            ds_stored[buffer].wait(parity=(t // 2) % 2)  # a consumer not adding this step skips it
            for part in range(2):
                ad.wgmma(s_t, ds_s.at[buffer, part].T, key_columns(part, column), accumulate=part > 0)
            ad.wgmma_wait(0)
            adder.hand(me, t if columns == 2 else t // 2, s_t)

        def step(t, h, i, masked: bool):
            """Query block i of head h: p, ds, and their products with do, q and k."""
            slot = loads.slot(t)
            with ad.region("issue s, dp"):
                loads.wait_keys(slot)
                ad.wgmma(s_t, loads.q.at[me], loads.keys(slot), accumulate=False)
                loads.wait_values(slot)
                ad.wgmma(dp_t, values.at[me], loads.v.at[slot].T, accumulate=False)
            ad.wgmma_wait(1)  # sᵀ is done; dpᵀ runs while its exponentials are taken
            with ad.region("p"):
                stats.wait(slot)
                lse_i = stats.lse(slot)
                # Traced lengths mask after the exponentials, where the indices need not live
                # beside sᵀ and lse (ptxas spills more otherwise at D = 128).
                scores = tile.mask(s_t[...], first_key, i) if masked and tile.static else s_t[...]
                p_t = ad.exp2(ad.fma(scores, scale, lse_i), approx=True)
                s_t[...] = tile.mask(p_t, first_key, i, hidden=0.0) if masked and not tile.static else p_t
            with ad.region("wait dp"):
                ad.warpgroup_barrier()  # keeps ptxas from hoisting the wait above the exponentials
                ad.wgmma_wait(0)
            with ad.region("ds"):
                p_t = s_t[...]
                ds_t = (p_t * (dp_t[...] - stats.delta(slot))).astype(loads.k.dtype)
                ds_s.at[t % 2, me][...] = ds_t
                ad.fence_async_smem()  # (the warpgroup meets) for the tensor cores of both consumers
                ds_stored[t % 2].arrive(sync=False)
            with ad.region("issue dv, dk"):
                ad.wgmma(dv_acc, p_t.astype(loads.v.dtype), loads.values(slot))
                ad.wgmma(dk_acc, ds_t, loads.k.at[slot])
                ad.wgmma_wait(0)  # p and ds leave the registers before dq takes those of sᵀ
            # The slot's lse and δ were last read before the warpgroup met in fence_async_smem
            # ("ds"), so the arrivals without a meeting free them too.
            loads.release_keys(slot)
            loads.release_values(slot)
            with ad.region("dq"):
                if columns == 2:
                    hand_share(t)
                else:
                    with ad.when(t % 2 == me):
                        hand_share(t)

        with _live(tile):  # registers are the kernel's: allocated outside the condition
            dk_acc[...] = ad.zeros((64, D), ad.float32)
            dv_acc[...] = ad.zeros((64, D), ad.float32)
            loads.query_landed.wait()
            values_landed.wait()
            tile.walk(step)
            # dk / √D and dv go out through the consumer's k and v buffers, once the other
            # consumer has made its last share of dq from these keys.
            keys_read.arrive()
            keys_read.wait()
            _store(tile, me, first_key, (loads.q, values), (head.grad_keys, head.grad_values),
                   (lambda: dk_acc[...] * (1.0 / math.sqrt(D)), lambda: dv_acc[...]))


def _store(tile: KeyTile, me, first_key, buffers, windows, gradients) -> None:
    """dk and dv of the consumer's 64 keys from `first_key` out through its part `me` of the
    SMEM `buffers`; where the tile's lengths are traced, a last, partial part by register
    stores masked to the sequence's keys."""
    if tile.static:
        for buffer, gradient in zip(buffers, gradients):
            buffer.at[me][...] = gradient().astype(buffer.dtype)
        _copy_out(me, buffers, windows, first_key)
        return
    left = tile.S_KV - first_key  # of the 64 keys, those below `left` are the sequence's
    with ad.when(left >= 64):
        for buffer, gradient in zip(buffers, gradients):
            buffer.at[me][...] = gradient().astype(buffer.dtype)
        _copy_out(me, buffers, windows, first_key)
    with ad.when(left < 64):
        for buffer, window, gradient in zip(buffers, windows, gradients):
            value = gradient().astype(buffer.dtype)
            ad.store(window(first_key, 64), value, mask=ad.iota(value.shape, ad.int32, 0) < left)


def _copy_out(me, buffers, windows, first_key) -> None:
    ad.fence_async_smem()
    for buffer, window in zip(buffers, windows):
        ad.async_copy(buffer.at[me], window(first_key, 64))
    ad.await_async_copy(0)


def _live(tile: KeyTile):
    """Where the tile's lengths are traced, only the CTAs with keys of the sequence work."""
    return contextlib.nullcontext() if tile.live is None else ad.when(tile.live)
