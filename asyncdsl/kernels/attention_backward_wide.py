"""Attention backward at head dims 192 and 256 (`asyncdsl.kernels.attention_backward` launches it
for those; see `attention_backward` for the schedule at 64 and 128).

dk and dv of 64 keys in float32 take 96 or 128 registers a thread each at these dims, so one
warpgroup cannot hold both: a CTA takes 64 keys, and its two consumers split the work of a query
block by what they accumulate.  Both compute sᵀ = k qᵀ and pᵀ (one product done twice, so that
no probabilities cross between them); then

- consumer 1: dpᵀ = v doᵀ, dsᵀ = pᵀ ∘ (dpᵀ - δ), dk += dsᵀ q, and dsᵀ into one of two SMEM
  slots;
- consumer 0: dv += pᵀ do, and once consumer 1 filled the slot, dq_part = ds k, 64 columns at a
  time, each piece handed to the producer through two SMEM slots in turn; the producer adds
  them into the workspace between its loads (`asyncdsl.blocks.attention_grads.DqAdder`), so
  that in deterministic mode the waits for the other key blocks' adds are not consumer 0's.

Each does three of the six products.  A pair of barriers a slot hands dsᵀ over (full: consumer
1 wrote it; empty: consumer 0's products that read it are done).  The producer loads k (A of
k qᵀ as rows, B of ds k as windows of 64 columns) and v once, and streams q and do through a
ring, with the rows' lse and δ staged beside q (`asyncdsl.blocks.query_row_stats`): two slots
of each at D = 192; at 256 two of q and one of do, which shared memory holds (q's second slot
matters more: consumer 1 frees q only after its last product, do after its first).
"""

from __future__ import annotations

import math

from asyncdsl.blocks.attention_grads import DqAdder, KeyTile, check_gradients, grid_position
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import head_rows, head_shapes
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.blocks.online_softmax import LOG2E
from asyncdsl.blocks.query_row_stats import QueryRowStats
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec

BN, BM = 64, 64  # keys a CTA, query rows a step


def _grid(q, k, v, do, lse, delta, workspace, dk, dv, flags, LAYOUT, **_):
    (b, _, _, _), (h_kv, s_kv) = head_shapes(q, k, LAYOUT)
    return (ad.cdiv(s_kv, BN), b * h_kv)


@kernel(grid=_grid, block=384, name="attention_backward_wide")
def attention_backward_wide_kernel(q, k, v, do, lse, delta, workspace, dk, dv, flags,
                                   CAUSAL: constexpr = False, DETERMINISTIC: constexpr = False,
                                   LAYOUT: constexpr = "BHSD"):
    """dk, dv of 64 keys and their shares of dq at head dims 192 and 256 (see the module's
    docstring)."""
    (_, H, S, D), (H_KV, S_KV) = head_shapes(q, k, LAYOUT)
    check_gradients(q, k, v, do, lse, delta, workspace, dk, dv, flags, BM, (192, 256), CAUSAL, LAYOUT)
    scale = LOG2E / math.sqrt(D)
    x, head = grid_position(DETERMINISTIC)
    b, h_kv = head // H_KV, head % H_KV
    tile = KeyTile(S, S_KV, BN, BM, CAUSAL, H // H_KV, h_kv, DETERMINISTIC, x)
    columns = D // 64

    # The ring's tile loaded once holds k (part 0) and v (part 1); its slots q and do.
    loads = AttentionLoads(k.dtype, BN, 2, BM, q.dtype, do.dtype, D, 2, value_stages=2 if D <= 192 else 1)
    ds_s = ad.smem((2, BN, BM), q.dtype, **tensor_core_layout(BN))  # dsᵀ, A of ds k as .T
    ds_full, ds_empty = ad.barrier(num=2), ad.barrier(num=2)
    adder = DqAdder()  # consumer 0's dq pieces to the producer, piece c through slot c % 2
    stats = QueryRowStats(loads.stages, BM)  # each slot's rows' lse·(-log2 e) and δ

    def writes(t, c):
        """How many pieces slot c % 2 held before step t's piece c."""
        return t * len(range(c % 2, columns, 2)) + c // 2

    def add_step(t):
        """For the producer: add step t's dq pieces, two at a time (deterministic: after those
        of the key blocks before this one)."""
        h, i = tile.locate(t)
        rows = ad.ds(i * BM, BM)
        pieces = [(c % 2, writes(t, c), workspace.at[b, h, rows, ad.ds(c * 64, 64)]) for c in range(columns)]
        adder.add([pieces[c:c + 2] for c in range(0, columns, 2)],
                  *((flags.at[b, h, i], tile.order(i)) if DETERMINISTIC else ()))

    with ad.warpgroup_role(2, registers=40):
        loads.load_query(0, head_rows(k, LAYOUT, b, h_kv, tile.first_key, BN))
        loads.load_query(1, head_rows(v, LAYOUT, b, h_kv, tile.first_key, BN))
        # Step t's q, do, lse and δ once the consumers are done with the ring's slot (the rows'
        # numbers read before the waits), then step t - 1's dq, which consumer 0 hands over as it
        # ends step t - 1.
        def load(t, h, i, masked: bool):
            rows = ad.ds(i * BM, BM)
            stats.load_step(loads, t, tile, i, lse.at[b, h, rows], delta.at[b, h, rows],
                            lambda _: head_rows(q, LAYOUT, b, h, i * BM, BM),
                            lambda _: head_rows(do, LAYOUT, b, h, i * BM, BM))

        tile.walk_trailing(load, add_step, lag=1)

    s_t = ad.registers((BN, BM), ad.float32, layout=ad.WGMMA)  # sᵀ; consumer 0: then dq's pieces
    dp_t = ad.registers((BN, BM), ad.float32, layout=ad.WGMMA)  # consumer 1's dpᵀ
    acc = ad.registers((BN, D), ad.float32, layout=ad.WGMMA)  # consumer 0: dv; 1: dk

    def probabilities(slot, h, i, masked: bool):
        """pᵀ of query block i (float32), from sᵀ issued on the slot's q."""
        loads.wait_keys(slot)
        ad.wgmma(s_t, loads.q.at[0], loads.keys(slot), accumulate=False)
        stats.wait(slot)
        lse_i = stats.lse(slot)
        ad.wgmma_wait(0)
        ad.warpgroup_barrier()  # every thread's reads of the lse are over: the releases after do not meet
        p_t = ad.exp2(ad.fma(s_t[...], scale, lse_i), approx=True)
        # Masked after the exponentials: the indices then need not live beside sᵀ and lse.
        return tile.mask(p_t, tile.first_key, i, hidden=0.0) if masked else p_t

    def values_and_dq(t, h, i, masked: bool):
        """Consumer 0: dv += pᵀ do, then dq_part = ds k from consumer 1's dsᵀ, handed to the
        producer a 64-column piece at a time."""
        slot, values, handed = loads.slot(t), loads.value_slot(t), t % 2
        p_t = probabilities(slot, h, i, masked)
        loads.release_keys(slot)
        loads.wait_values(values)
        ad.wgmma(acc, p_t.astype(do.dtype), loads.values(values))
        ad.wgmma_wait(0)
        loads.release_values(values)
        ds_full[handed].wait()
        for c in range(columns):  # 64 columns at a time, in sᵀ's registers
            ad.wgmma(s_t, ds_s.at[handed].T, loads.q.at[0, :, ad.ds(c * 64, 64)], accumulate=False)
            ad.wgmma_wait(0)
            if c == columns - 1:
                ds_empty[handed].arrive(sync=False)  # the tensor cores are done with the slot
            adder.hand(c % 2, writes(t, c), s_t)

    def keys_and_ds(t, h, i, masked: bool):
        """Consumer 1: dpᵀ, dsᵀ, dk += dsᵀ q, dsᵀ handed to consumer 0."""
        slot, values, handed = loads.slot(t), loads.value_slot(t), t % 2
        p_t = probabilities(slot, h, i, masked)
        loads.wait_values(values)
        ad.wgmma(dp_t, loads.q.at[1], loads.v.at[values].T, accumulate=False)
        ad.wgmma_wait(0)
        loads.release_values(values)
        ds_t = (p_t * (dp_t[...] - stats.delta(slot))).astype(q.dtype)
        ad.wgmma(acc, ds_t, loads.k.at[slot])
        with ad.when(t >= 2):
            ds_empty[handed].wait()
        ds_s.at[handed][...] = ds_t
        ad.fence_async_smem()
        ds_full[handed].arrive()
        ad.wgmma_wait(0)
        loads.release_keys(slot)

    # Consumer 1 holds dpᵀ besides what consumer 0 holds: it gets more of the registers.
    with ad.warpgroup_role(0, registers=224):
        acc[...] = ad.zeros((BN, D), ad.float32)
        loads.query_landed.wait()
        tile.walk(values_and_dq)
        # dv goes out through k's buffer: consumer 1's last read of it, the last step's sᵀ, was
        # complete before it handed that step's dsᵀ over.
        loads.q.at[0][...] = acc[...].astype(dv.dtype)
        ad.fence_async_smem()
        ad.async_copy(loads.q.at[0], head_rows(dv, LAYOUT, b, h_kv, tile.first_key, BN))
        ad.await_async_copy(0)
    with ad.warpgroup_role(1, registers=240):
        acc[...] = ad.zeros((BN, D), ad.float32)
        loads.query_landed.wait()
        tile.walk(keys_and_ds)
        loads.q.at[1][...] = (acc[...] * (1.0 / math.sqrt(D))).astype(dk.dtype)  # v: read by this one only
        ad.fence_async_smem()
        ad.async_copy(loads.q.at[1], head_rows(dk, LAYOUT, b, h_kv, tile.first_key, BN))
        ad.await_async_copy(0)


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"attention_backward_wide_kernel": (
    (*(ArraySpec((1, 2, 256, 192), ad.bfloat16) for _ in range(4)), ArraySpec((1, 2, 256), ad.float32),
     ArraySpec((1, 2, 256), ad.float32), ArraySpec((1, 2, 256, 192), ad.float32),
     *(ArraySpec((1, 2, 256, 192), ad.bfloat16) for _ in range(2)), ArraySpec((1, 2, 4), ad.int32)),
    {"CAUSAL": True})}
