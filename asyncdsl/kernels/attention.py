"""Attention forward on the tensor cores (FlashAttention's online softmax), bf16 in and out:
`o, lse = asyncdsl.kernels.attention(q, k, v, causal=True)`.

o = softmax(q @ kᵀ / √D) @ v, optionally causal, for q, o of shape (B, H, S, D) and k, v of
shape (B, H_KV, S_KV, D) (`layout="BHSD"`), or the same with S before H (`"BSHD"`: TMA addresses
either, nothing is transposed).  H_KV may divide H (grouped-query attention: query head h reads
k/v head h // (H / H_KV)); S and S_KV need not be multiples of the blocks (TMA fills rows past
the end with zeros, the keys there are masked on the last block only, rows past the end are not
stored); S_KV may differ from S when not causal.  `lse` (B, H, S) float32 receives each row's
log-sum-exp of the scaled scores (natural log), what a backward pass needs.

Each CTA owns 2·BQ query rows of one (batch, head) (`asyncdsl.blocks.attention_tiles`): two
consumer warpgroups (0 and 1) each own BQ of them, and a producer warpgroup (2) loads q once,
then streams k and v by TMA through a ring of STAGES slots (`asyncdsl.blocks.attention_loads`);
the consumers take their rows through the key blocks with the online softmax, each block's
p @ v overlapping the next block's softmax (`asyncdsl.blocks.attention_forward`).  At the end
each consumer stores its rows' log-sum-exp, scales its rows by 1/l and stores them by TMA
through its q buffer.

Blocks of 192 keys at D = 64, 128 up to D = 128, 64 above (the scores of a block and the output
share the registers).  Exponentials are `ex2.approx` on the GPU (the interpreter's exact exp2
differs in the last bits).  A warpgroup barrier before the wait for p @ v keeps ptxas from
hoisting that wait above the exponentials (docs/hardware.md §14.6).  The register hand-over
holds only when the kernel is compiled as a whole program, as the runtime does by default
(docs/hardware.md §14.7).  `TURNS=True` makes the consumers take turns to issue
(`asyncdsl.turns`); it and the other variants tried measured slower
(docs/notes/2026-12-02-wgmma-and-jit.md); the measurements against cuDNN and Mosaic GPU are in
docs/performance.md.
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.attention_forward import HeadRows, attend
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import QueryTile, head_rows, head_shapes
from asyncdsl.blocks.online_softmax import LOG2E
from asyncdsl.blocks.shapes import check_causal_lengths, check_head_groups
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty


@on_stream
def attention(q, k, v, *, causal: bool = False, layout: str = "BHSD", out=None, lse=None, stream=None):
    """softmax(q kᵀ / √D) v of bf16 q (B, H, S, D) and k, v (B, H_kv, S_kv, D) (or "BSHD" for
    `layout`), causal or not: returns o (like q, or `out`) and the rows' natural log-sum-exp
    (B, H, S) float32 (or `lse`)."""
    if layout not in ("BHSD", "BSHD") or len(q.shape) != 4:
        raise ad.ArgumentError(f"attention takes 4-dim q, k, v in layout 'BHSD' or 'BSHD', got layout "
                               f"{layout!r} and q of shape {tuple(q.shape)}", user_location())
    b, h, s = (q.shape[layout.index(axis)] for axis in "BHS")
    o = empty(q, q.shape, q.dtype) if out is None else out
    lse = empty(q, (b, h, s), np.float32) if lse is None else lse
    launch(attention_kernel, q, k, v, o, lse, stream=stream, CAUSAL=causal, LAYOUT=layout)
    return o, lse


def key_block(d: int) -> int:
    """Keys a block at head dim d: the scores of a block and the output share the registers."""
    return {64: 192, 128: 128}.get(d, 64)


def _grid(q, k, v, o, lse, BQ, LAYOUT, **_):
    (b, h, s, _), _ = head_shapes(q, k, LAYOUT)
    return (ad.cdiv(s, 2 * BQ), b * h)


@kernel(grid=_grid, block=384, name="attention", profile_events=1536)
def attention_kernel(q, k, v, o, lse, BQ: constexpr = 64, BK: constexpr = None, STAGES: constexpr = 2,
                     CAUSAL: constexpr = False, LAYOUT: constexpr = "BHSD", TURNS: constexpr = False):
    """o = softmax(q kᵀ / √D) v and the rows' log-sum-exp (see the module's docstring)."""
    (B, H, S, D), (H_KV, S_KV) = head_shapes(q, k, LAYOUT)
    _check(q, k, v, o, lse, B, H, S, D, H_KV, S_KV, BK, CAUSAL, LAYOUT)
    BK = key_block(D) if BK is None else BK
    scale = LOG2E / math.sqrt(D)  # 2^(scale·x) = e^(x / √D): one fma and one ex2 an element
    head = ad.program_id(1)
    b, h = head // H, head % H
    h_kv = h // (H // H_KV)  # grouped-query attention: H / H_KV query heads share a k, v head
    tile = QueryTile(S, S_KV, 2 * BQ, BK, CAUSAL)

    loads = AttentionLoads(q.dtype, BQ, 2, BK, k.dtype, v.dtype, D, STAGES)
    turns = ad.turns((0, 1)) if TURNS else None  # the consumers' turns to issue (`TURNS`)
    head_of = HeadRows(lambda start, count: head_rows(q, LAYOUT, b, h, start, count),
                       lambda start, count: head_rows(k, LAYOUT, b, h_kv, start, count),
                       lambda start, count: head_rows(v, LAYOUT, b, h_kv, start, count))

    def finish(me, first_row, state, acc):
        """The rows' log-sum-exp, then the rows scaled by 1/l, by TMA through the q buffer."""
        ad.store(lse.at[b, h, ad.ds(first_row, BQ)], state.log_sum_exp())
        loads.q.at[me][...] = state.normalize(acc[...]).astype(o.dtype)
        ad.fence_async_smem()
        ad.async_copy(loads.q.at[me], head_rows(o, LAYOUT, b, h, first_row, BQ))
        ad.await_async_copy(0)

    attend(tile, loads, head_of, scale=scale, finish=finish, turns=turns)


def _check(q, k, v, o, lse, B, H, S, D, H_KV, S_KV, BK, CAUSAL, LAYOUT) -> None:
    """Refuse at trace time what the kernel does not compute."""
    if BK is not None and (not isinstance(BK, int) or BK <= 0 or BK % 16):
        raise ad.TraceError("BK, the keys of a block, must be a positive multiple of 16 (p @ v takes them "
                            f"16 at a time), got {BK!r}", user_location())
    if q.dtype not in (ad.bfloat16, ad.float16) or {k.dtype, v.dtype, o.dtype} != {q.dtype} or \
            lse.dtype != ad.float32:
        raise ad.TraceError(f"q, k, v and o must be all bfloat16 or all float16 (the tensor cores' operands) "
                            f"and lse float32, got {q.dtype}, {k.dtype}, {v.dtype}, {o.dtype}, {lse.dtype}",
                            user_location())
    expected = {"v": k.shape, "o": q.shape, "lse": (B, H, S)}
    for name, array in (("v", v), ("o", o), ("lse", lse)):
        if array.shape != expected[name]:
            raise ad.TraceError(f"{name} has shape {array.shape}, expected {expected[name]} "
                                f"({LAYOUT} layout)", user_location())
    if D % 64 or not 64 <= D <= 256:
        raise ad.TraceError(f"head dim {D}: this kernel takes 64, 128, 192 or 256 (columns of 64 elements, "
                            "one 128-byte swizzled row each; a wgmma's N is at most 256)", user_location())
    check_head_groups(H, H_KV)
    if CAUSAL:
        check_causal_lengths(S, S_KV)


def reference(q, k, v, causal: bool, layout: str = "BHSD") -> tuple[np.ndarray, np.ndarray]:
    """Attention in float64 from the bf16 inputs: the output (in `layout`) and the log-sum-exp
    of each row's scores, (B, H, S)."""
    to_bhsd = (lambda x: x) if layout == "BHSD" else (lambda x: np.swapaxes(x, 1, 2))
    q64, k64, v64 = (to_bhsd(x).astype(np.float64) for x in (q, k, v))
    group = q64.shape[1] // k64.shape[1]  # query heads per k, v head
    k64, v64 = np.repeat(k64, group, axis=1), np.repeat(v64, group, axis=1)
    logits = q64 @ np.swapaxes(k64, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = q64.shape[2]
        logits = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, logits)
    top = logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits - top)
    total = weights.sum(axis=-1, keepdims=True)
    return to_bhsd((weights / total) @ v64), (top + np.log(total))[..., 0]


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"attention_kernel": ((*(ArraySpec((1, 2, 256, 64), ad.bfloat16) for _ in range(4)),
                                      ArraySpec((1, 2, 256), ad.float32)), {"CAUSAL": True})}
