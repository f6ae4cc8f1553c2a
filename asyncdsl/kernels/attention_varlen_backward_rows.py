"""The row kernels around the variable-length attention backward
(`asyncdsl.kernels.attention_varlen_backward`): before it, δ = rowsum(o ∘ do) and zeros into what
it adds into; after it, dq from its float32 sum.

Each CTA takes 64 rows of one sequence's head, one warpgroup; the grid is (⌈max_seqlen_q / 64⌉,
B·H) and a CTA reads its sequence's offsets on the device, doing nothing past the sequence's
end.  The float32 dq workspace is (H, total_q + B·64, D): sequence b's rows start at
cu_seqlens_q[b] + 64·b, so the 64-row blocks of one sequence (zeroed here, added into by the
backward, read here) never reach the next one's rows.
"""

from __future__ import annotations

import math

from asyncdsl.frontend import language as ad
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec

ROWS = 64


def _rows_grid(*arrays, max_seqlen_q, **_):
    cu_seqlens_q, x = arrays[-1], arrays[0]
    return (max(ad.cdiv(max_seqlen_q, ROWS), 1), (cu_seqlens_q.shape[0] - 1) * x.shape[1])


def _block_of_sequence(cu_seqlens_q, H):
    """(b, h, the sequence's first row, its length, this CTA's first row in it)."""
    head = ad.program_id(1)
    b, h = head // H, head % H
    q_start = ad.load_index(cu_seqlens_q.at[b])
    return b, h, q_start, ad.load_index(cu_seqlens_q.at[b + 1]) - q_start, ad.program_id(0) * ROWS


@kernel(grid=lambda o, do, delta, workspace, flags, cu_seqlens_q, max_seqlen_q, **_:
        _rows_grid(o, cu_seqlens_q, max_seqlen_q=max_seqlen_q), block=128,
        name="attention_varlen_backward_prepare")
def prepare(o, do, delta, workspace, flags, cu_seqlens_q, max_seqlen_q: int):
    """δ (H, total_q) = rowsum(o ∘ do) in float32 for the sequence's rows; its blocks of the dq
    workspace and their order flags (B, H, ⌈max_seqlen_q / 64⌉) set to 0."""
    _, H, D = o.shape
    b, h, q_start, S, row = _block_of_sequence(cu_seqlens_q, H)
    with ad.when(row < S):
        rows = ad.ds(q_start + row, ROWS)
        products = (ad.load(o.at[rows, h, :], layout=ad.WGMMA).astype(ad.float32)
                    * ad.load(do.at[rows, h, :], layout=ad.WGMMA).astype(ad.float32))
        ad.store(delta.at[h, rows], products.sum(axis=1), mask=ad.iota((ROWS,), ad.int32, 0) < S - row)
        ad.store(workspace.at[h, ad.ds(q_start + b * ROWS + row, ROWS), :], ad.zeros((ROWS, D), ad.float32))
        ad.signal(flags.at[b, h, ad.program_id(0)], 0)


@kernel(grid=lambda workspace, dq, cu_seqlens_q, max_seqlen_q, **_:
        _rows_grid(dq, cu_seqlens_q, max_seqlen_q=max_seqlen_q), block=128,
        name="attention_varlen_backward_finish_dq")
def finish_dq(workspace, dq, cu_seqlens_q, max_seqlen_q: int):
    """dq = workspace / √D in dq's dtype, the sequence's rows only."""
    _, H, D = dq.shape
    b, h, q_start, S, row = _block_of_sequence(cu_seqlens_q, H)
    with ad.when(row < S):
        total = ad.load(workspace.at[h, ad.ds(q_start + b * ROWS + row, ROWS), :], layout=ad.WGMMA)
        ad.store(dq.at[ad.ds(q_start + row, ROWS), h, :], (total * (1.0 / math.sqrt(D))).astype(dq.dtype),
                 mask=ad.iota((ROWS, D), ad.int32, 0) < S - row)


# Arguments `asyncdsl dump` traces the kernels with.
EXAMPLE_ARGS: dict[str, tuple[tuple, dict]] = {
    "prepare": ((ArraySpec((300, 2, 64), ad.bfloat16), ArraySpec((300, 2, 64), ad.bfloat16),
                 ArraySpec((2, 300), ad.float32), ArraySpec((2, 492, 64), ad.float32),
                 ArraySpec((3, 2, 4), ad.int32), ArraySpec((4,), ad.int32), 200), {}),
    "finish_dq": ((ArraySpec((2, 492, 64), ad.float32), ArraySpec((300, 2, 64), ad.bfloat16),
                   ArraySpec((4,), ad.int32), 200), {}),
}
