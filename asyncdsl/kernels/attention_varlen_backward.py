"""The gradients of variable-length attention (`asyncdsl.kernels.attention_varlen`), bf16 in and
out: `dq, dk, dv = asyncdsl.kernels.attention_varlen_backward(q, k, v, o, lse, do, cu_seqlens_q,
cu_seqlens_k, max_q, max_k, causal=True)`.

The forward's packed layouts: q, o, do (total_q, H, D), k, v (total_k, H_KV, D), lse (H, total_q)
float32 as the forward returns it, int32 offsets of B + 1 entries on the device; grouped-query
heads (dk, dv summed over a group's query heads), causal with the diagonal aligned to the last
key as in the forward.  Head dims 64 and 128.  Three launches, as the dense backward's
(`asyncdsl.kernels.attention_backward`):

1. `prepare` (`attention_varlen_backward_rows`): δ (H, total_q) = rowsum(o ∘ do), zeros into the
   float32 dq workspace (H, total_q + B·64, D; each sequence's rows padded by one block of 64, so
   that no TMA reduce-add of a sequence's last block reaches its neighbour's) and the order flags.
2. The main kernel, the dense one's work (`asyncdsl.blocks.attention_backward`) with its rows
   addressed from the sequence's first row: one CTA per 128 keys of one (sequence, key/value
   head), grid (⌈max_k / 128⌉, B·H_KV); a CTA reads its sequence's offsets on the device
   (`asyncdsl.load_index`) and does nothing past the sequence's keys.  TMA loads whole blocks,
   so a sequence's last blocks run into its neighbours' rows: their keys are masked, their query
   rows get a log-sum-exp of +inf (those rows must hold finite numbers, as a packed batch's do),
   and dk, dv of a last, partial part of 64 keys go out by stores masked to the sequence's rows.
3. `finish_dq`: dq = workspace / √D for the sequence's rows.

Rows of dq, dk, dv outside every sequence (past cu_seqlens[B]) are not written.
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.attention_backward import GradientRows, differentiate
from asyncdsl.blocks.attention_grads import KeyTile, grid_position
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import check_operand_types
from asyncdsl.blocks.online_softmax import LOG2E
from asyncdsl.blocks.shapes import check_head_groups
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.attention_varlen import check_packed
from asyncdsl.kernels.attention_varlen_backward_rows import ROWS, finish_dq, prepare
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty

BN, BM = 128, ROWS  # keys a CTA (64 a consumer), query rows a step


@on_stream
def attention_varlen_backward(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                              max_seqlen_k: int, *, causal: bool = False, deterministic: bool = False,
                              stream=None):
    """dq, dk, dv of `asyncdsl.kernels.attention_varlen` from its inputs, its output o, its
    log-sum-exp `lse` (H, total_q) float32 and the output's gradient do (like o).
    `deterministic` adds the key blocks' shares of dq in a fixed order: the same bits on every
    run."""
    check_packed("attention_varlen_backward", q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    check_operand_types("attention_varlen_backward", lse, q=q, k=k, v=v, o=o, do=do)
    total, h, d = q.shape
    batch = cu_seqlens_q.shape[0] - 1
    delta = empty(q, (h, total), np.float32)
    workspace = empty(q, (h, total + batch * BM, d), np.float32)
    flags = empty(q, (batch, h, max(-(-int(max_seqlen_q) // BM), 1)), np.int32)
    dq, dk, dv = empty(q, q.shape, q.dtype), empty(k, k.shape, k.dtype), empty(v, v.shape, v.dtype)
    launch(prepare, o, do, delta, workspace, flags, cu_seqlens_q, int(max_seqlen_q), stream=stream)
    launch(attention_varlen_backward_kernel, q, k, v, do, lse, delta, workspace, dk, dv, flags, cu_seqlens_q,
           cu_seqlens_k, int(max_seqlen_k), stream=stream, CAUSAL=causal,
           DETERMINISTIC=deterministic)
    launch(finish_dq, workspace, dq, cu_seqlens_q, int(max_seqlen_q), stream=stream)
    return dq, dk, dv


def _grid(q, k, v, do, lse, delta, workspace, dk, dv, flags, cu_seqlens_q, cu_seqlens_k, max_seqlen_k, **_):
    return (max(ad.cdiv(max_seqlen_k, BN), 1), (cu_seqlens_k.shape[0] - 1) * k.shape[1])


@kernel(grid=_grid, block=384, name="attention_varlen_backward")
def attention_varlen_backward_kernel(q, k, v, do, lse, delta, workspace, dk, dv, flags, cu_seqlens_q,
                                     cu_seqlens_k, max_seqlen_k: int, STAGES: constexpr = 2,
                                     CAUSAL: constexpr = False, DETERMINISTIC: constexpr = False):
    """dk, dv of one block of a sequence's keys, and its shares of dq added into `workspace`
    (see the module's docstring); `max_seqlen_k` sizes the grid only."""
    _check(q, k, v, do, lse, delta, workspace, dk, dv, flags, cu_seqlens_q, cu_seqlens_k)
    _, H, D = q.shape
    H_KV = k.shape[1]
    x, head = grid_position(DETERMINISTIC)
    b, h_kv = head // H_KV, head % H_KV
    q_start, k_start = ad.load_index(cu_seqlens_q.at[b]), ad.load_index(cu_seqlens_k.at[b])
    S = ad.load_index(cu_seqlens_q.at[b + 1]) - q_start
    S_KV = ad.load_index(cu_seqlens_k.at[b + 1]) - k_start
    dq_start = q_start + b * BM  # the sequence's first row of the workspace
    tile = KeyTile(S, S_KV, BN, BM, CAUSAL, H // H_KV, h_kv, DETERMINISTIC, x)
    loads = AttentionLoads(k.dtype, 64, 2, BM, q.dtype, do.dtype, D, STAGES)

    def key_rows(x):
        return lambda start, count: x.at[ad.ds(k_start + start, count), h_kv, :]

    def query_rows(x):
        return lambda h, start, count: x.at[ad.ds(q_start + start, count), h, :]

    head_of = GradientRows(
        query=query_rows(q), grad_out=query_rows(do), keys=key_rows(k), values=key_rows(v),
        grad_keys=key_rows(dk), grad_values=key_rows(dv),
        lse=lambda h, rows: lse.at[h, ad.ds(q_start + rows.start, rows.size)],
        delta=lambda h, rows: delta.at[h, ad.ds(q_start + rows.start, rows.size)],
        workspace=lambda h, rows, c: workspace.at[h, ad.ds(dq_start + rows.start, rows.size),
                                                  ad.ds(c * 64, 64)],
        flag=lambda h, i: flags.at[b, h, i])
    differentiate(tile, loads, head_of, scale=LOG2E / math.sqrt(D), deterministic=DETERMINISTIC)


def _check(q, k, v, do, lse, delta, workspace, dk, dv, flags, cu_seqlens_q, cu_seqlens_k) -> None:
    """Refuse at trace time what the kernel does not compute."""
    if len(q.shape) != 3 or len(k.shape) != 3:
        raise ad.TraceError(f"q and k must be packed (total, heads, head dim), got {tuple(q.shape)} and "
                            f"{tuple(k.shape)}", user_location())
    (total, H, D), H_KV = q.shape, k.shape[1]
    offsets = (tuple(cu_seqlens_q.shape), tuple(cu_seqlens_k.shape))
    if len(offsets[0]) != 1 or offsets[0] != offsets[1] or offsets[0][0] < 2:
        raise ad.TraceError(f"cu_seqlens_q and cu_seqlens_k must both be (B + 1,) offsets, B >= 1, got "
                            f"shapes {offsets[0]} and {offsets[1]}", user_location())
    B = offsets[0][0] - 1
    expected = {"v": k.shape, "do": q.shape, "dk": k.shape, "dv": k.shape, "lse": (H, total),
                "delta": (H, total), "workspace": (H, total + B * BM, D)}
    for name, array in (("v", v), ("do", do), ("dk", dk), ("dv", dv), ("lse", lse), ("delta", delta),
                        ("workspace", workspace)):
        if tuple(array.shape) != tuple(expected[name]):
            raise ad.TraceError(f"{name} has shape {tuple(array.shape)}, expected {tuple(expected[name])}",
                                user_location())
    if len(flags.shape) != 3 or tuple(flags.shape[:2]) != (B, H):
        raise ad.TraceError(f"flags has shape {tuple(flags.shape)}, expected ({B}, {H}, query blocks)",
                            user_location())
    if k.shape[2] != D or D not in (64, 128):
        raise ad.TraceError(f"head dim {D} (k: {k.shape[2]}): this kernel takes 64 or 128 for both",
                            user_location())
    check_head_groups(H, H_KV)


def reference(q, k, v, do, cu_seqlens_q, cu_seqlens_k, causal: bool):
    """dq, dk, dv in float64 from the bf16 inputs, sequence by sequence (dk, dv summed over each
    group of query heads; a query row that sees no key has no gradient)."""
    group = q.shape[1] // k.shape[1]
    scale = 1 / math.sqrt(q.shape[-1])
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b in range(len(cu_seqlens_q) - 1):
        (q0, q1), (k0, k1) = cu_seqlens_q[b:b + 2], cu_seqlens_k[b:b + 2]
        qs, dos = (x[q0:q1].astype(np.float64).transpose(1, 0, 2) for x in (q, do))
        ks, vs = (np.repeat(x[k0:k1].astype(np.float64), group, axis=1).transpose(1, 0, 2) for x in (k, v))
        visible = np.ones((q1 - q0, k1 - k0), bool)
        if causal:
            visible = np.arange(k1 - k0)[None, :] <= np.arange(q1 - q0)[:, None] + (k1 - k0) - (q1 - q0)
        logits = np.where(visible, qs @ ks.transpose(0, 2, 1) * scale, -np.inf)
        seen = visible.any(axis=-1, keepdims=True)
        top = np.where(seen, logits.max(axis=-1, keepdims=True, initial=-np.inf), 0)
        p = np.exp(logits - top)
        p /= np.maximum(p.sum(axis=-1, keepdims=True), 1e-300)
        dp = dos @ vs.transpose(0, 2, 1)
        ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True)) * scale
        dq[q0:q1] = (ds @ ks).transpose(1, 0, 2)
        for out, grads in ((dk, ds.transpose(0, 2, 1) @ qs), (dv, p.transpose(0, 2, 1) @ dos)):
            out[k0:k1] = grads.reshape(k.shape[1], group, k1 - k0, k.shape[2]).sum(axis=1).transpose(1, 0, 2)
    return dq, dk, dv


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"attention_varlen_backward_kernel": (
    (*(ArraySpec((300, 2, 64), ad.bfloat16) for _ in range(4)), ArraySpec((2, 300), ad.float32),
     ArraySpec((2, 300), ad.float32), ArraySpec((2, 492, 64), ad.float32),
     *(ArraySpec((300, 2, 64), ad.bfloat16) for _ in range(2)), ArraySpec((3, 2, 4), ad.int32),
     ArraySpec((4,), ad.int32), ArraySpec((4,), ad.int32), 200), {"CAUSAL": True})}
