"""The row kernels around attention's backward (`asyncdsl.kernels.attention_backward`): before
it, δ = rowsum(o ∘ do) and zeros into what it adds into; after it, dq from its float32 sum.

Each CTA takes 64 rows of one (batch, head), one warpgroup; rows past S read as zeros and are
not stored.
"""

from __future__ import annotations

import math

from asyncdsl.blocks.attention_tiles import head_rows, head_shapes
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec

ROWS = 64


def _prepare_grid(o, do, delta, workspace, flags, LAYOUT, **_):
    (b, h, s, _), _ = head_shapes(o, o, LAYOUT)
    return (ad.cdiv(s, ROWS), b * h)


@kernel(grid=_prepare_grid, block=128, name="attention_backward_prepare")
def prepare(o, do, delta, workspace, flags, LAYOUT: constexpr = "BHSD"):
    """δ (B, H, S) = rowsum(o ∘ do) in float32; the rows' float32 dq sums (B, H, S, D) and the
    order flag of the block (B, H, S / 64) set to 0."""
    (_, H, _, D), _ = head_shapes(o, o, LAYOUT)
    block, head = ad.program_id(0), ad.program_id(1)
    b, h = head // H, head % H
    row = block * ROWS
    products = (ad.load(head_rows(o, LAYOUT, b, h, row, ROWS), layout=ad.WGMMA).astype(ad.float32)
                * ad.load(head_rows(do, LAYOUT, b, h, row, ROWS), layout=ad.WGMMA).astype(ad.float32))
    ad.store(delta.at[b, h, ad.ds(row, ROWS)], products.sum(axis=1))
    ad.store(workspace.at[b, h, ad.ds(row, ROWS), :], ad.zeros((ROWS, D), ad.float32))
    ad.signal(flags.at[b, h, block], 0)


def _finish_grid(workspace, dq, LAYOUT, **_):
    b, h, s, _ = workspace.shape
    return (ad.cdiv(s, ROWS), b * h)


@kernel(grid=_finish_grid, block=128, name="attention_backward_finish_dq")
def finish_dq(workspace, dq, LAYOUT: constexpr = "BHSD"):
    """dq = workspace / √D in dq's dtype (and layout)."""
    _, H, _, D = workspace.shape
    block, head = ad.program_id(0), ad.program_id(1)
    b, h = head // H, head % H
    row = block * ROWS
    total = ad.load(workspace.at[b, h, ad.ds(row, ROWS), :], layout=ad.WGMMA)
    ad.store(head_rows(dq, LAYOUT, b, h, row, ROWS), (total * (1.0 / math.sqrt(D))).astype(dq.dtype))


# Arguments `asyncdsl dump` traces the kernels with.
EXAMPLE_ARGS = {
    "prepare": ((ArraySpec((1, 2, 200, 64), ad.bfloat16), ArraySpec((1, 2, 200, 64), ad.bfloat16),
                 ArraySpec((1, 2, 200), ad.float32), ArraySpec((1, 2, 200, 64), ad.float32),
                 ArraySpec((1, 2, 4), ad.int32)), {}),
    "finish_dq": ((ArraySpec((1, 2, 200, 64), ad.float32), ArraySpec((1, 200, 2, 64), ad.bfloat16)),
                  {"LAYOUT": "BSHD"}),
}
