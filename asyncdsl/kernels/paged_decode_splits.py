"""The launches around the paged decode's (`asyncdsl.kernels.paged_decode`) that balance its
splits: `plan_kernel` before it, one CTA planning the batch's pieces from the lengths on the
device (`blocks.balanced_splits`), and `merge_kernel` after it, folding the pieces of each
sequence of several splits in split order (`blocks.split_kv_merge.merge_splits_in_order`)."""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.balanced_splits import SplitBudget, merge_work, write_plan
from asyncdsl.blocks.split_kv_merge import merge_splits_in_order
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.kernels.outputs import empty, kept
from asyncdsl.kernels.paged_decode_checks import ROWS

HIDDEN = -1.0e30  # the lse of a split that saw no key of a row: finite, so that the merge is no NaN


@kernel(grid=(1,), block=128, name="paged_decode_plan")
def plan_kernel(seq_lens, plan, CAPACITY: constexpr, BK: constexpr, MAX_SPLITS: constexpr = None):
    """The balanced splits of the batch (`blocks.balanced_splits.write_plan`) into `plan`."""
    write_plan(plan, seq_lens, CAPACITY, BK, MAX_SPLITS)


@kernel(grid=lambda plan, part, lse, o: (ad.cdiv(part.shape[1], ROWS), plan.shape[1] - o.shape[0]), block=128,
        name="paged_decode_merge")
def merge_kernel(plan, part, lse, o):
    """o (B, Q·H, D) of each sequence of several splits (the plan's merges) from their parts
    and log-sum-exps, in split order; the other sequences' rows are left as they are."""
    b, splits, first = merge_work(plan, ad.program_id(1))
    row = ad.program_id(0) * ROWS + ad.iota((ROWS,), ad.int32, 0, layout=ad.WGMMA_ROW)
    inside = row < splits.min(1) * part.shape[1]  # none where the merge is idle
    columns = ad.iota((1, part.shape[2]), ad.int32, 1)
    merged, _ = merge_splits_in_order(
        splits, lambda c: ad.load(part.at[first + c, row[:, None], columns], layout=ad.WGMMA,
                                  mask=inside[:, None], other=0.0),
        lambda c: ad.load(lse.at[first + c, row], layout=ad.WGMMA_ROW, mask=inside, other=HIDDEN),
        ROWS, part.shape[2])
    ad.store(o.at[b, row[:, None], columns], merged.astype(o.dtype), mask=inside[:, None])


def workspace(q, budget: SplitBudget, rows: int, d: int, split: bool, stream) -> tuple:
    """The plan table and the pieces' float32 parts (slots, rows, d) and log-sum-exps of a decode
    beside q, kept per device, stream and shapes (`outputs.kept`): the pieces apart from the
    plan, which alone grows with the batch, so that the batch sizes a server captures share
    them.  One slot where no sequence splits (nothing writes the pieces)."""
    slots = budget.workspace if split else 1
    plan = kept(q, stream, ("paged decode plan", budget.plan_shape),
                lambda: empty(q, budget.plan_shape, np.int32))
    part, lse = kept(q, stream, ("paged decode pieces", slots, rows, d), lambda: (
        empty(q, (slots, rows, d), np.float32), empty(q, (slots, rows), np.float32)))
    return plan, part, lse
