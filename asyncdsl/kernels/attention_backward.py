"""Attention backward on the tensor cores (FlashAttention-3's schedule), bf16 in and out:
`dq, dk, dv = asyncdsl.kernels.attention_backward(q, k, v, o, lse, do, causal=True)`.

The gradients of o = softmax(q kᵀ / √D) v for the forward's shapes and layouts
(`asyncdsl.kernels.attention`): q, o, do (B, H, S, D), k, v (B, H_KV, S_KV, D), "BHSD" or "BSHD",
grouped-query heads (dk, dv summed over a group's query heads), causal or not, S and S_KV not
whole blocks.  Three launches:

1. `prepare` (`attention_backward_rows`): δ = rowsum(o ∘ do) in float32, and zeros into the
   float32 dq workspace and the order flags.
2. The main kernel, one CTA per block of BN = 128 keys of one (batch, key/value head): a producer
   warpgroup (2) loads the CTA's keys and values once, then streams q and do of every query
   block and query head that meets them through a ring (`asyncdsl.blocks.attention_loads`, the
   roles of queries and keys swapped).  Each consumer warpgroup (0, 1) owns 64 of the keys and
   keeps their dk and dv in registers; per query block it computes, transposed so that p and ds
   feed the tensor cores from registers,
       sᵀ = k qᵀ,  dpᵀ = v doᵀ,  pᵀ = exp(sᵀ/√D - lse),  dsᵀ = pᵀ ∘ (dpᵀ - δ),
       dv += pᵀ do,  dk += dsᵀ q,  dq_part = ds k   (dsᵀ through SMEM, read transposed),
   and adds dq_part into the workspace by TMA reduce-add (`asyncdsl.blocks.attention_grads`),
   in any order, or in a fixed one with `deterministic=True`.  dq_part reuses the registers of
   sᵀ and dpᵀ, 64 columns each, so k is also kept in 64-column tiles, dq's B operand.
3. `finish_dq`: dq = workspace / √D in the input dtype.

Head dims 64 and 128; at 192 and 256, where dk and dv of 64 keys take 192 or more of a
thread's 232 registers, the host function launches `attention_backward_wide` instead.
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.attention_grads import KeyTile, add_dq, check_gradients, head_window
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import head_rows, head_shapes
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.attention_backward_rows import finish_dq, prepare
from asyncdsl.kernels.attention_backward_wide import attention_backward_wide_kernel
from asyncdsl.kernels.dispatch import launch
from asyncdsl.kernels.outputs import empty

LOG2E = 1.4426950408889634
BN, BM = 128, 64  # keys a CTA (64 a consumer), query rows a step


def attention_backward(q, k, v, o, lse, do, *, causal: bool = False, deterministic: bool = False,
                       layout: str = "BHSD", stream=None):
    """dq, dk, dv of attention (`asyncdsl.kernels.attention`) from its inputs, its output o, its
    log-sum-exp `lse` (B, H, S) float32 and the output's gradient do (like o).  `deterministic`
    adds the key blocks' shares of dq in a fixed order: the same bits on every run."""
    if layout not in ("BHSD", "BSHD") or len(q.shape) != 4:
        raise ad.ArgumentError(f"attention_backward takes 4-dim q, k, v in layout 'BHSD' or 'BSHD', got "
                               f"layout {layout!r} and q of shape {tuple(q.shape)}", user_location())
    b, h, s, d = (q.shape[layout.index(axis)] for axis in "BHSD")
    delta = empty(q, (b, h, s), np.float32)
    workspace = empty(q, (b, h, s, d), np.float32)
    flags = empty(q, (b, h, -(-s // BM)), np.int32)
    dq, dk, dv = empty(q, q.shape, q.dtype), empty(k, k.shape, k.dtype), empty(v, v.shape, v.dtype)
    launch(prepare, o, do, delta, workspace, flags, stream=stream, LAYOUT=layout)
    main = attention_backward_kernel if d <= 128 else attention_backward_wide_kernel
    launch(main, q, k, v, do, lse, delta, workspace, dk, dv, flags, stream=stream, CAUSAL=bool(causal),
           DETERMINISTIC=bool(deterministic), LAYOUT=layout)
    launch(finish_dq, workspace, dq, stream=stream, LAYOUT=layout)
    return dq, dk, dv


def _grid(q, k, v, do, lse, delta, workspace, dk, dv, flags, LAYOUT, **_):
    (b, _, _, _), (h_kv, s_kv) = head_shapes(q, k, LAYOUT)
    return (ad.cdiv(s_kv, BN), b * h_kv)


@kernel(grid=_grid, block=384, name="attention_backward")
def attention_backward_kernel(q, k, v, do, lse, delta, workspace, dk, dv, flags, STAGES: constexpr = 2,
                              CAUSAL: constexpr = False, DETERMINISTIC: constexpr = False,
                              LAYOUT: constexpr = "BHSD"):
    """dk, dv of one block of keys, and its shares of dq added into `workspace` (see the
    module's docstring)."""
    (_, H, S, D), (H_KV, S_KV) = head_shapes(q, k, LAYOUT)
    check_gradients(q, k, v, do, lse, delta, workspace, dk, dv, flags, BM, (64, 128), CAUSAL, LAYOUT)
    scale = LOG2E / math.sqrt(D)  # e^(x / √D) = 2^(scale·x)
    head = ad.program_id(1)
    b, h_kv = head // H_KV, head % H_KV
    tile = KeyTile(S, S_KV, BN, BM, CAUSAL, H // H_KV, h_kv, DETERMINISTIC)
    columns = D // 64

    # Keys in the ring's `q` (A of k qᵀ), queries in its "keys" (B of k qᵀ as .T, of dk += dsᵀ q
    # as rows), do in its "values" (B of dv += pᵀ do as rows, of v doᵀ as .T).
    loads = AttentionLoads(k.dtype, 64, 2, BM, q.dtype, do.dtype, D, STAGES)
    values = ad.smem((2, 64, D), v.dtype, **tensor_core_layout(64))  # [consumer], A of v doᵀ
    key_columns = ad.smem((2, columns, 64, 64), k.dtype, **tensor_core_layout(64))  # B of ds k
    ds_s = ad.smem((2, 64, BM), q.dtype, **tensor_core_layout(64))  # [consumer] dsᵀ, A of ds k as .T
    dq_slot = ad.smem((2, 64, 64), ad.float32, **tensor_core_layout(64, 32))  # [consumer]
    values_landed = ad.barrier(arrival_count=2 * (1 + columns))

    with ad.warpgroup_role(2, registers=40):
        for part in range(2):
            rows = tile.first_key + part * 64
            loads.load_query(part, head_rows(k, LAYOUT, b, h_kv, rows, 64))
            ad.async_copy(head_rows(v, LAYOUT, b, h_kv, rows, 64), values.at[part], barrier=values_landed)
            for c in range(columns):
                ad.async_copy(head_window(k, LAYOUT, b, h_kv, rows, 64, c * 64, 64), key_columns.at[part, c],
                              barrier=values_landed)
        tile.walk(lambda t, h, i, masked: loads.load(t, lambda _: head_rows(q, LAYOUT, b, h, i * BM, BM),
                                                     lambda _: head_rows(do, LAYOUT, b, h, i * BM, BM)))

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        first_key = tile.first_key + me * 64
        s_t = ad.registers((64, BM), ad.float32, layout=ad.WGMMA)  # sᵀ, then dq's columns 0..63
        dp_t = ad.registers((64, BM), ad.float32, layout=ad.WGMMA)  # dpᵀ, then dq's columns 64..127
        dk_acc = ad.registers((64, D), ad.float32, layout=ad.WGMMA)
        dv_acc = ad.registers((64, D), ad.float32, layout=ad.WGMMA)
        dq_pieces = (s_t, dp_t)[:columns]
        dk_acc[...] = ad.zeros((64, D), ad.float32)
        dv_acc[...] = ad.zeros((64, D), ad.float32)
        loads.query_landed.wait()
        values_landed.wait()

        def step(t, h, i, masked: bool):
            """Query block i of head h: p, ds, and their products with do, q and k."""
            slot = loads.slot(t)
            rows = ad.ds(i * BM, BM)
            lse_i = ad.load(lse.at[b, h, rows], layout=ad.WGMMA_COL)[None, :] * -LOG2E
            with ad.region("issue s, dp"):
                loads.wait_keys(slot)
                ad.wgmma(s_t, loads.q.at[me], loads.keys(slot), accumulate=False)
                loads.wait_values(slot)
                ad.wgmma(dp_t, values.at[me], loads.v.at[slot].T, accumulate=False)
            ad.wgmma_wait(1)  # sᵀ is done; dpᵀ runs while its exponentials are taken
            with ad.region("p"):
                scores = tile.mask(s_t[...], first_key, i) if masked else s_t[...]
                s_t[...] = ad.exp2(ad.fma(scores, scale, lse_i), approx=True)
            with ad.region("wait dp"):
                ad.warpgroup_barrier()  # keeps ptxas from hoisting the wait above the exponentials
                ad.wgmma_wait(0)
            with ad.region("ds"):
                p_t = s_t[...]
                delta_i = ad.load(delta.at[b, h, rows], layout=ad.WGMMA_COL)[None, :]
                ds_t = (p_t * (dp_t[...] - delta_i)).astype(q.dtype)
                ds_s.at[me][...] = ds_t
                ad.fence_async_smem()
                ad.warpgroup_barrier()  # every thread's part of dsᵀ is in SMEM for the tensor cores
            with ad.region("issue dv, dk, dq"):
                ad.wgmma(dv_acc, p_t.astype(do.dtype), loads.values(slot))
                ad.wgmma(dk_acc, ds_t, loads.k.at[slot])
                ad.wgmma_wait(0)  # p and ds leave the registers before dq takes those of sᵀ, dpᵀ
                for c, piece in enumerate(dq_pieces):
                    ad.wgmma(piece, ds_s.at[me].T, key_columns.at[me, c], accumulate=False)
                ad.wgmma_wait(0)
            loads.release_keys(slot)
            loads.release_values(slot)
            with ad.region("add dq"):
                flag = flags.at[b, h, i] if DETERMINISTIC else None
                add_dq(dq_pieces, dq_slot.at[me], lambda c: workspace.at[b, h, rows, ad.ds(c * 64, 64)],
                       flag, tile.rank(i, me, adders=2) if DETERMINISTIC else None)

        tile.walk(step)
        # k and v are read by this consumer only: their buffers take dk / √D and dv out.
        loads.q.at[me][...] = (dk_acc[...] * (1.0 / math.sqrt(D))).astype(dk.dtype)
        values.at[me][...] = dv_acc[...].astype(dv.dtype)
        ad.fence_async_smem()
        ad.async_copy(loads.q.at[me], head_rows(dk, LAYOUT, b, h_kv, first_key, 64))
        ad.async_copy(values.at[me], head_rows(dv, LAYOUT, b, h_kv, first_key, 64))
        ad.await_async_copy(0)


def reference(q, k, v, do, causal: bool, layout: str = "BHSD") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dq, dk, dv in float64 from the bf16 inputs (in `layout`; dk, dv summed over each group of
    query heads)."""
    to_bhsd = (lambda x: x) if layout == "BHSD" else (lambda x: np.swapaxes(x, 1, 2))
    q64, k64, v64, do64 = (to_bhsd(x).astype(np.float64) for x in (q, k, v, do))
    group = q64.shape[1] // k64.shape[1]
    k64, v64 = np.repeat(k64, group, axis=1), np.repeat(v64, group, axis=1)
    scale = 1 / math.sqrt(q.shape[-1])
    logits = q64 @ np.swapaxes(k64, -1, -2) * scale
    if causal:
        s = q64.shape[2]
        logits = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, logits)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dp = do64 @ np.swapaxes(v64, -1, -2)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True)) * scale
    dq, dk, dv = ds @ k64, np.swapaxes(ds, -1, -2) @ q64, np.swapaxes(p, -1, -2) @ do64

    def grouped(x):  # sum over the query heads of each key/value head
        b, _, s, d = x.shape
        return x.reshape(b, -1, group, s, d).sum(axis=2)

    return to_bhsd(dq), to_bhsd(grouped(dk)), to_bhsd(grouped(dv))


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"attention_backward_kernel": (
    (*(ArraySpec((1, 2, 256, 64), ad.bfloat16) for _ in range(4)), ArraySpec((1, 2, 256), ad.float32),
     ArraySpec((1, 2, 256), ad.float32), ArraySpec((1, 2, 256, 64), ad.float32),
     *(ArraySpec((1, 2, 256, 64), ad.bfloat16) for _ in range(2)), ArraySpec((1, 2, 4), ad.int32)),
    {"CAUSAL": True})}
