"""Attention over a batch of sequences of different lengths packed into one tensor (FlashAttention's
variable-length API), bf16 in and out:
`o, lse = asyncdsl.kernels.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_q, max_k)`.

q and o are (total_q, H, D), k and v (total_k, H_KV, D): sequence b's queries are rows
cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q, its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1]
of k and v, the offsets int32 arrays of B + 1 entries on the device.  H_KV may divide H
(grouped-query attention).  `lse` (H, total_q) float32 receives each row's natural log-sum-exp
of its scaled scores.  Causal, the diagonal is aligned to the last key when a sequence has more
keys than queries (query i of S sees keys up to i + S_KV - S, FlashAttention's bottom-right
convention: a chunk of new tokens after a cache); a query row that sees no key at all (fewer
keys than queries, or no keys) gets o = 0 and lse = -inf.  Sequences of length 0 are allowed.

The lengths never reach the host: the grid is (⌈max_q / 128⌉, B·H), each CTA reads its
sequence's offsets from device memory (`asyncdsl.load_index`) and a CTA whose 128 rows start past
its sequence's end does nothing.  The rest is the dense kernel's work
(`asyncdsl.blocks.attention_forward`), its rows addressed from the sequence's first row:

- loads: TMA reads whole blocks of the packed tensors, so the last block of a sequence runs into
  the next sequence's rows (or zeros past the tensor).  The keys there are masked to -inf and
  their values weighted by exactly 0, so they must be finite numbers, as every row of a packed
  batch is (a NaN or inf in a neighbour's values would turn 0 · v into NaN).  Query rows past
  the end compute rows that are never stored.
- stores: only the sequence's rows are written.  A tile wholly inside its sequence goes out by
  TMA through the q buffer, as in the dense kernel; the last tile of a sequence (and lse always)
  by stores of the registers masked to the rows that belong to it, so no other sequence's rows
  are touched.
"""

from __future__ import annotations

import math

import numpy as np

from asyncdsl.blocks.attention_forward import HeadRows, attend, sequence_rows_finish
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import QueryTile, check_operand_types
from asyncdsl.blocks.online_softmax import LOG2E
from asyncdsl.blocks.shapes import check_head_groups
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.attention import key_block
from asyncdsl.kernels.dispatch import launch, on_host, on_stream
from asyncdsl.kernels.outputs import empty


@on_stream
def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int, *,
                     causal: bool = False, out=None, lse=None, stream=None):
    """softmax(q kᵀ / √D) v of each sequence of a packed batch: q (total_q, H, D), k, v
    (total_k, H_kv, D) bf16, int32 offsets cu_seqlens_q/k (B + 1,) on the device, max_seqlen_q
    at least the longest query sequence (max_seqlen_k is not needed: the key loops read their
    lengths on the device).  Returns o (like q, or `out`) and the rows' natural log-sum-exp
    (H, total_q) float32 (or `lse`)."""
    check_packed("attention_varlen", q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    check_operand_types("attention_varlen", None, q=q, k=k, v=v)
    total, h, _ = q.shape
    o = empty(q, q.shape, q.dtype) if out is None else out
    lse = empty(q, (h, total), np.float32) if lse is None else lse
    launch(attention_varlen_kernel, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
           stream=stream, CAUSAL=causal)
    return o, lse


def check_packed(what: str, q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) -> None:
    """The packed batch's arguments of `what` (the varlen forward or backward): q of 3 dims,
    lengths >= 0, and each side's offsets (`check_offsets`)."""
    if len(q.shape) != 3 or int(max_seqlen_q) < 0 or int(max_seqlen_k) < 0:
        raise ad.ArgumentError(f"{what} takes packed q, k, v of 3 dims (total, heads, head dim) "
                               f"and lengths >= 0, got q of shape {tuple(q.shape)}, "
                               f"max_seqlen_q={max_seqlen_q}, max_seqlen_k={max_seqlen_k}", user_location())
    check_offsets(cu_seqlens_q, int(max_seqlen_q), q.shape[0], "q")
    check_offsets(cu_seqlens_k, int(max_seqlen_k), k.shape[0], "k")


def check_offsets(cu_seqlens, max_seqlen: int, total: int, name: str) -> None:
    """Offsets in host memory (numpy: the interpreter's) are checked, as the GPU's cannot be
    without a sync: ascending, within the packed tensor's `total` rows, no sequence longer than
    `max_seqlen` (the grid would leave its last rows unwritten).  On the GPU bad offsets make
    empty sequences or read zeros, never an access outside the arrays."""
    if not on_host(cu_seqlens):
        return
    offsets = np.asarray(cu_seqlens, np.int64)
    lengths = np.diff(offsets)
    if offsets.ndim != 1 or len(offsets) < 2 or offsets[0] < 0 or offsets[-1] > total or (lengths < 0).any():
        raise ad.ArgumentError(f"cu_seqlens_{name} must be ascending offsets from 0 to at most the {total} "
                               f"rows of {name}, got {offsets.tolist()[:8]}", user_location())
    if lengths.max() > max_seqlen:
        raise ad.ArgumentError(f"max_seqlen_{name} is {max_seqlen} but a sequence has {lengths.max()} rows: "
                               "the grid is sized by it", user_location())


def _grid(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, BQ, **_):
    return (max(ad.cdiv(max_seqlen_q, 2 * BQ), 1), (cu_seqlens_q.shape[0] - 1) * q.shape[1])


@kernel(grid=_grid, block=384, name="attention_varlen", profile_events=1536)
def attention_varlen_kernel(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                            BQ: constexpr = 64, BK: constexpr = None, STAGES: constexpr = 2,
                            CAUSAL: constexpr = False):
    """o = softmax(q kᵀ / √D) v and the rows' log-sum-exp, sequence by sequence (see the
    module's docstring); `max_seqlen_q` sizes the grid only."""
    _, H, D = q.shape
    H_KV = k.shape[1]
    _check(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, BK)
    BK = key_block(D) if BK is None else BK
    head = ad.program_id(1)
    b, h = head // H, head % H
    h_kv = h // (H // H_KV)  # grouped-query attention: H / H_KV query heads share a k, v head
    q_start, k_start = ad.load_index(cu_seqlens_q.at[b]), ad.load_index(cu_seqlens_k.at[b])
    S = ad.load_index(cu_seqlens_q.at[b + 1]) - q_start
    tile = QueryTile(S, ad.load_index(cu_seqlens_k.at[b + 1]) - k_start, 2 * BQ, BK, CAUSAL)

    loads = AttentionLoads(q.dtype, BQ, 2, BK, k.dtype, v.dtype, D, STAGES)
    head_of = HeadRows(lambda start, count: q.at[ad.ds(q_start + start, count), h, :],
                       lambda start, count: k.at[ad.ds(k_start + start, count), h_kv, :],
                       lambda start, count: v.at[ad.ds(k_start + start, count), h_kv, :])

    finish = sequence_rows_finish(loads, o, lse, h, q_start, S)  # only the sequence's rows
    attend(tile, loads, head_of, scale=LOG2E / math.sqrt(D), finish=finish, empty_rows=True)


def _check(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, BK) -> None:
    """Refuse at trace time what the kernel does not compute."""
    if len(q.shape) != 3 or len(k.shape) != 3:
        raise ad.TraceError(f"q and k must be packed (total, heads, head dim), got {tuple(q.shape)} and "
                            f"{tuple(k.shape)}", user_location())
    (total, H, D), H_KV = q.shape, k.shape[1]
    expected = {"v": k.shape, "o": q.shape, "lse": (H, total)}
    for name, array in (("v", v), ("o", o), ("lse", lse)):
        if array.shape != expected[name]:
            raise ad.TraceError(f"{name} has shape {array.shape}, expected {expected[name]}", user_location())
    if k.shape[2] != D or D % 64 or not 64 <= D <= 256:
        raise ad.TraceError(f"head dim {D} (k: {k.shape[2]}): this kernel takes 64, 128, 192 or 256 for both",
                            user_location())
    check_head_groups(H, H_KV)
    offsets = (cu_seqlens_q.shape, cu_seqlens_k.shape)
    if len(offsets[0]) != 1 or offsets[0] != offsets[1] or offsets[0][0] < 2:
        raise ad.TraceError(f"cu_seqlens_q and cu_seqlens_k must both be (B + 1,) offsets, B >= 1, got "
                            f"shapes {offsets[0]} and {offsets[1]}", user_location())
    if BK is not None and (not isinstance(BK, int) or BK <= 0 or BK % 16):
        raise ad.TraceError(f"BK, the keys of a block, must be a positive multiple of 16, got {BK!r}",
                            user_location())


def reference(q, k, v, cu_seqlens_q, cu_seqlens_k, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Variable-length attention in float64 from the bf16 inputs, sequence by sequence: the
    output (total_q, H, D) and the rows' log-sum-exp (H, total_q); rows that see no key are 0
    with lse -inf, the causal diagonal aligned to the last key."""
    group = q.shape[1] // k.shape[1]
    o = np.zeros(q.shape, np.float64)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for b in range(len(cu_seqlens_q) - 1):
        (q0, q1), (k0, k1) = cu_seqlens_q[b:b + 2], cu_seqlens_k[b:b + 2]
        qs = q[q0:q1].astype(np.float64).transpose(1, 0, 2)
        ks, vs = (np.repeat(x[k0:k1].astype(np.float64), group, axis=1).transpose(1, 0, 2) for x in (k, v))
        logits = qs @ ks.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        if causal:
            visible = np.arange(k1 - k0)[None, :] <= np.arange(q1 - q0)[:, None] + (k1 - k0) - (q1 - q0)
            logits = np.where(visible, logits, -np.inf)
        seen = np.isfinite(logits).any(axis=-1, keepdims=True)
        top = np.where(seen, logits.max(axis=-1, keepdims=True, initial=-np.inf), 0.0)
        weights = np.exp(logits - top)
        total = weights.sum(axis=-1, keepdims=True)
        o[q0:q1] = np.where(seen, weights @ vs / np.where(seen, total, 1.0), 0.0).transpose(1, 0, 2)
        lse[:, q0:q1] = np.where(seen, top + np.log(np.where(seen, total, 1.0)), -np.inf)[..., 0]
    return o, lse


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"attention_varlen_kernel": (
    (*(ArraySpec((300, 2, 64), ad.bfloat16) for _ in range(4)), ArraySpec((2, 300), ad.float32),
     ArraySpec((4,), ad.int32), ArraySpec((4,), ad.int32), 200), {"CAUSAL": True})}
