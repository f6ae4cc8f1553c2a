"""Attention backward on the tensor cores (FlashAttention-3's schedule), bf16 in and out:
`dq, dk, dv = asyncdsl.kernels.attention_backward(q, k, v, o, lse, do, causal=True)`.

The gradients of o = softmax(q kᵀ / √D) v for the forward's shapes and layouts
(`asyncdsl.kernels.attention`): q, o, do (B, H, S, D), k, v (B, H_KV, S_KV, D), "BHSD" or "BSHD",
grouped-query heads (dk, dv summed over a group's query heads), causal or not, S and S_KV not
whole blocks.  Three launches:

1. `prepare` (`attention_backward_rows`): δ = rowsum(o ∘ do) in float32, and zeros into the
   float32 dq workspace and the order flags.
2. The main kernel (`asyncdsl.blocks.attention_backward`, the rows addressed in a (batch, head)
   of the dense tensors), one CTA per block of BN = 128 keys of one (batch, key/value head): a producer
   warpgroup (2) loads the CTA's keys and values once, then streams q and do of every query
   block and query head that meets them through a ring (`asyncdsl.blocks.attention_loads`, the
   roles of queries and keys swapped).  Each consumer warpgroup (0, 1) owns 64 of the keys and
   keeps their dk and dv in registers; per query block it computes, transposed so that p and ds
   feed the tensor cores from registers,
       sᵀ = k qᵀ,  dpᵀ = v doᵀ,  pᵀ = exp(sᵀ/√D - lse),  dsᵀ = pᵀ ∘ (dpᵀ - δ),
       dv += pᵀ do,  dk += dsᵀ q;
   the CTA's share of dq, ds k over its 128 keys, is made from both consumers' dsᵀ (through
   SMEM, read transposed), handed to the producer through SMEM and added by it into the
   workspace by TMA reduce-add (`asyncdsl.blocks.attention_grads.DqAdder`), in any order, or
   in a fixed one with `deterministic=True`.
3. `finish_dq`: dq = workspace / √D in the input dtype.

Head dims 64 and 128; at 192 and 256, where dk and dv of 64 keys take 192 or more of a
thread's 232 registers, the host function launches `attention_backward_wide` instead.
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.attention_backward import GradientRows, differentiate
from asyncdsl.blocks.attention_grads import KeyTile, check_gradients, grid_position
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import check_operand_types, head_rows, head_shapes
from asyncdsl.blocks.online_softmax import LOG2E
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.attention_backward_rows import finish_dq, prepare
from asyncdsl.kernels.attention_backward_wide import attention_backward_wide_kernel
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty

BN, BM = 128, 64  # keys a CTA (64 a consumer), query rows a step


@on_stream
def attention_backward(q, k, v, o, lse, do, *, causal: bool = False, deterministic: bool = False,
                       layout: str = "BHSD", stream=None):
    """dq, dk, dv of attention (`asyncdsl.kernels.attention`) from its inputs, its output o, its
    log-sum-exp `lse` (B, H, S) float32 and the output's gradient do (like o).  `deterministic`
    adds the key blocks' shares of dq in a fixed order: the same bits on every run."""
    if layout not in ("BHSD", "BSHD") or len(q.shape) != 4:
        raise ad.ArgumentError(f"attention_backward takes 4-dim q, k, v in layout 'BHSD' or 'BSHD', got "
                               f"layout {layout!r} and q of shape {tuple(q.shape)}", user_location())
    check_operand_types("attention_backward", lse, q=q, k=k, v=v, o=o, do=do)
    b, h, s, d = (q.shape[layout.index(axis)] for axis in "BHSD")
    delta = empty(q, (b, h, s), np.float32)
    workspace = empty(q, (b, h, s, d), np.float32)
    flags = empty(q, (b, h, -(-s // BM)), np.int32)
    dq, dk, dv = empty(q, q.shape, q.dtype), empty(k, k.shape, k.dtype), empty(v, v.shape, v.dtype)
    launch(prepare, o, do, delta, workspace, flags, stream=stream, LAYOUT=layout)
    main = attention_backward_kernel if d <= 128 else attention_backward_wide_kernel
    launch(main, q, k, v, do, lse, delta, workspace, dk, dv, flags, stream=stream, CAUSAL=causal,
           DETERMINISTIC=deterministic, LAYOUT=layout)
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
    x, head = grid_position(DETERMINISTIC)
    b, h_kv = head // H_KV, head % H_KV
    tile = KeyTile(S, S_KV, BN, BM, CAUSAL, H // H_KV, h_kv, DETERMINISTIC, x)
    # Keys in the ring's `q` (A of k qᵀ), queries in its "keys" (B of k qᵀ as .T, of dk += dsᵀ q
    # as rows), do in its "values" (B of dv += pᵀ do as rows, of v doᵀ as .T).
    loads = AttentionLoads(k.dtype, 64, 2, BM, q.dtype, do.dtype, D, STAGES)
    head_of = GradientRows(
        query=lambda h, start, count: head_rows(q, LAYOUT, b, h, start, count),
        grad_out=lambda h, start, count: head_rows(do, LAYOUT, b, h, start, count),
        keys=lambda start, count: head_rows(k, LAYOUT, b, h_kv, start, count),
        values=lambda start, count: head_rows(v, LAYOUT, b, h_kv, start, count),
        grad_keys=lambda start, count: head_rows(dk, LAYOUT, b, h_kv, start, count),
        grad_values=lambda start, count: head_rows(dv, LAYOUT, b, h_kv, start, count),
        lse=lambda h, rows: lse.at[b, h, rows], delta=lambda h, rows: delta.at[b, h, rows],
        workspace=lambda h, rows, c: workspace.at[b, h, rows, ad.ds(c * 64, 64)],
        flag=lambda h, i: flags.at[b, h, i])
    differentiate(tile, loads, head_of, scale=scale, deterministic=DETERMINISTIC)


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
