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
then streams k and v by TMA through a ring of STAGES slots (`asyncdsl.blocks.attention_loads`), a
slot refilled once both consumers released it.  The producer keeps 40 registers a thread and
hands the rest to the consumers (232 each, `setmaxnreg`).

For block j a consumer issues s = q @ k_jᵀ (one wgmma), then o += p_{j-1} @ v_{j-1} (p straight
from registers as wgmma's A operand); once s is done, the online softmax of s
(`asyncdsl.blocks.online_softmax`) runs while that second wgmma does, and o is scaled by α after
it.  At the end each consumer stores its rows' log-sum-exp, scales its rows by 1/l and stores
them by TMA through its q buffer.

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

import contextlib
import math

import numpy as np

from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import QueryTile, head_rows, head_shapes
from asyncdsl.blocks.online_softmax import OnlineSoftmax
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch
from asyncdsl.kernels.outputs import empty

LOG2E = 1.4426950408889634


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
    launch(attention_kernel, q, k, v, o, lse, stream=stream, CAUSAL=bool(causal), LAYOUT=layout)
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
    q_s = loads.q  # [consumer]; the output goes out through it
    issue_order = ad.turns((0, 1)) if TURNS else None  # the consumers' turns to issue (`TURNS`)

    with ad.warpgroup_role(2, registers=40):
        for half in range(2):
            loads.load_query(half, head_rows(q, LAYOUT, b, h, tile.first_row + half * BQ, BQ))
        for j in ad.range(tile.blocks):
            loads.load(j, lambda i: head_rows(k, LAYOUT, b, h_kv, i * BK, BK),
                      lambda i: head_rows(v, LAYOUT, b, h_kv, i * BK, BK))

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        my_first_row = tile.first_row + me * BQ
        s = ad.registers((BQ, BK), ad.float32, layout=ad.WGMMA)  # q @ kᵀ of one block
        p = ad.registers((BQ, BK), v.dtype, layout=ad.WGMMA)  # its probabilities, A of p @ v
        acc = ad.registers((BQ, D), ad.float32, layout=ad.WGMMA)
        state = OnlineSoftmax(BQ, scale)
        acc[...] = ad.zeros((BQ, D), ad.float32)
        state.start()

        def turn():
            """Taking turns to issue the wgmmas (`TURNS`): one consumer's run while the other's
            softmax does."""
            return issue_order.turn() if TURNS else contextlib.nullcontext()

        def scores(j):
            """Issue s = q @ k_jᵀ."""
            loads.wait_keys(loads.slot(j))
            ad.wgmma(s, q_s.at[me], loads.keys(loads.slot(j)), accumulate=False)

        def softmax(j, masked: bool):
            """Block j's probabilities (bf16) and the factor the output so far is scaled by."""
            return state.update(tile.mask(s[...], j, my_first_row) if masked else s[...], v.dtype)

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
                    ad.wgmma_wait(1)  # s_j is done, p_{j-1} @ v_{j-1} may still run
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

        loads.query_landed.wait()
        with turn():
            scores(0)
        ad.wgmma_wait(0)
        loads.release_keys(loads.slot(0))
        p[...], _ = softmax(0, masked=tile.first_block_masked())
        tile.walk_after_first(step)
        last = loads.slot(tile.blocks - 1)
        loads.wait_values(last)
        with turn():
            ad.wgmma(acc, p[...], loads.values(last))
        ad.wgmma_wait(0)
        loads.release_values(last)
        ad.store(lse.at[b, h, ad.ds(my_first_row, BQ)], state.log_sum_exp())
        q_s.at[me][...] = state.normalize(acc[...]).astype(o.dtype)
        ad.fence_async_smem()
        ad.async_copy(q_s.at[me], head_rows(o, LAYOUT, b, h, my_first_row, BQ))
        ad.await_async_copy(0)


def _check(q, k, v, o, lse, B, H, S, D, H_KV, S_KV, BK, CAUSAL, LAYOUT) -> None:
    """Refuse at trace time what the kernel does not compute."""
    if BK is not None and (not isinstance(BK, int) or BK <= 0 or BK % 16):
        raise ad.TraceError("BK, the keys of a block, must be a positive multiple of 16 (p @ v takes them "
                            f"16 at a time), got {BK!r}", user_location())
    expected = {"v": k.shape, "o": q.shape, "lse": (B, H, S)}
    for name, array in (("v", v), ("o", o), ("lse", lse)):
        if array.shape != expected[name]:
            raise ad.TraceError(f"{name} has shape {array.shape}, expected {expected[name]} "
                                f"({LAYOUT} layout)", user_location())
    if D % 64 or not 64 <= D <= 256:
        raise ad.TraceError(f"head dim {D}: this kernel takes 64, 128, 192 or 256 (columns of 64 elements, "
                            "one 128-byte swizzled row each; a wgmma's N is at most 256)", user_location())
    if H % H_KV:
        raise ad.TraceError(f"{H} query heads cannot be grouped over {H_KV} key/value heads (not a divisor)",
                            user_location())
    if CAUSAL and S_KV != S:
        raise ad.TraceError(f"causal attention takes as many keys as queries, got {S_KV} keys for {S} "
                            "queries", user_location())


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
