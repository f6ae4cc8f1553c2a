"""A balanced split-KV schedule, planned on the device: sequences of very different lengths cut
into pieces of about equal work for a fixed grid, so that the CTAs of a few long sequences do
not run long after the others finished.

    from asyncdsl.blocks.balanced_splits import SEQ, SPLIT, SPLITS, SplitBudget, host_plan

    budget = SplitBudget.make(batch=3, kv_heads=2, ctas=8)   # host side: the grid and workspace
    (budget.units, budget.slots, budget.workspace)           # (4, 7, 8)
    plan = host_plan([40, 0, 700], capacity=1024, size=64, units=budget.units)
    plan[SPLITS, :3]  # [1 1 3]: 12 blocks over 4 units, pieces of at most 4 blocks
    plan[SEQ]         # [2 2 -1 -1 0 1 2]: slots 0 and 1 take sequence 2's splits (plan[SPLIT]
                      # 1 and 2), 2 and 3 are idle, 4 + b takes sequence b's first split

The work is blocks of `size` positions of a sequence, T of them in all (its length cut to the
table, read on the device).  With a budget of U units (`ctas // kv_heads`: a unit is one split
of one sequence, a CTA for each KV head), a piece is at most chunk = max(MIN_BLOCKS, ceil(T / U))
blocks: sequence b takes s_b = max(1, ceil(blocks_b / chunk)) splits, its blocks cut evenly
(split k from k·blocks_b // s_b).  Past its first split a sequence takes s_b - 1 < blocks_b /
chunk units, U at most in all, so a grid of U + B slots fits every batch the shapes allow: slot
e < U is the e-th extra split in sequence order (or idle), slot U + b the first split of
sequence b.  The extra splits, pieces of the long sequences, come first in the grid, so the
longest work starts first and the short sequences fill the tail.  Sequences of several splits
write their pieces to workspace slots `PART[b]` + k, at most 2U of them; a sequence of one
split is written by its CTA directly.  Merges (`MERGE[m]`: the m-th sequence of several splits,
at most U of them) then read each one's pieces in split order, so results do not depend on
which CTA finished first.

`write_plan` computes the table in one CTA (a warpgroup) with register tiles in WGMMA layouts:
prefix sums over 64 sequences at a time as masked sums of a (64, 64) tile, carried from one
64 to the next, and each unit slot's owner found by a masked sum over the sequences whose
extra splits cover it.  Kernel code cannot turn a tile into a traced index, and a search in
traced indices would chain one read of global memory per step in every CTA; so the plan is
one small launch before the decode, whose CTAs read their slot's entries with
`asyncdsl.load_index` (`SplitWork`).  Its cost grows as B · U / 4096 tile steps of one CTA.
`host_plan` is the same table in numpy, for tests and for reading the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asyncdsl.frontend import language as ad

MIN_BLOCKS = 4  # the fewest blocks of a piece: a split's fixed cost (its merge, its start) would dominate
# The plan's rows: per sequence b (columns < B), per grid slot j (columns < U + B), per merge m (< U).
SPLITS, PART, SEQ, SPLIT, MERGE = range(5)
IDLE = -1  # SEQ of a unit slot no extra split needs, MERGE of a merge no sequence needs
DIRECT = -1  # PART of a sequence of one split: its CTA writes the output itself
T64 = 64  # sequences (and slots) a tile step of `write_plan` takes


@dataclass(frozen=True)
class SplitBudget:
    """The launch shapes of a balanced split for `batch` sequences of `kv_heads` KV heads over a
    budget of `ctas` CTAs: `units` extra splits, a grid of `slots` slots (times the KV heads),
    `workspace` slots of pieces, `units` merges; all from shapes, so a call captures in a graph."""

    batch: int
    kv_heads: int
    units: int

    @classmethod
    def make(cls, batch: int, kv_heads: int, ctas: int) -> SplitBudget:
        return cls(batch, kv_heads, max(1, ctas // kv_heads))

    @property
    def slots(self) -> int:
        return self.units + self.batch

    @property
    def workspace(self) -> int:
        return 2 * self.units

    @property
    def plan_shape(self) -> tuple[int, int]:
        return (5, self.slots)


def host_plan(lens, capacity: int, size: int, units: int, max_splits: int | None = None) -> np.ndarray:
    """The plan `write_plan` writes, in numpy (int32, (5, units + B))."""
    blocks = (np.clip(np.asarray(lens, np.int64), 0, capacity) + size - 1) // size
    chunk = max(MIN_BLOCKS, -(-int(blocks.sum()) // units))
    splits = np.maximum(1, -(-blocks // chunk))
    splits = splits if max_splits is None else np.minimum(splits, max_splits)
    extras, multi = splits - 1, (splits > 1).astype(np.int64)
    extra_start, multi_start = np.cumsum(extras) - extras, np.cumsum(multi) - multi
    batch = len(blocks)
    plan = np.zeros((5, units + batch), np.int32)
    plan[SPLITS, :batch] = splits
    plan[PART, :batch] = np.where(multi > 0, extra_start + multi_start, DIRECT)
    plan[SEQ, :units], plan[MERGE, :units] = IDLE, IDLE
    for b in range(batch):
        for k in range(1, splits[b]):
            plan[SEQ, extra_start[b] + k - 1], plan[SPLIT, extra_start[b] + k - 1] = b, k
        if multi[b]:
            plan[MERGE, multi_start[b]] = b
    plan[SEQ, units:] = np.arange(batch)
    return plan


def write_plan(plan, lens, capacity: int, size: int, max_splits: int | None = None) -> None:
    """Kernel code for one warpgroup: the plan of the sequences of lengths `lens` (B,) int32,
    cut to `capacity` positions, in blocks of `size`, into `plan` (5, U + B) int32."""
    batch, units = lens.shape[0], plan.shape[1] - lens.shape[0]
    steps = ad.cdiv(batch, T64)
    row = ad.iota((T64, T64), ad.int32, 0, layout=ad.WGMMA)
    col = ad.iota((T64, T64), ad.int32, 1, layout=ad.WGMMA)

    def blocks_of(step, layout):
        b = step * T64 + ad.iota((T64,), ad.int32, 0, layout=layout)
        length = ad.load(lens.at[ad.minimum(b, batch - 1)], layout=layout, mask=b < batch, other=0)
        return b, (ad.minimum(ad.maximum(length, 0), capacity) + size - 1) // size

    total = ad.registers((T64,), ad.int32, layout=ad.WGMMA_ROW)
    total[...] = ad.zeros((T64,), ad.int32, layout=ad.WGMMA_ROW)
    for step in ad.range(steps):
        total[...] = total[...] + blocks_of(step, ad.WGMMA_ROW)[1].sum()
    chunk = ad.maximum((total[...].max() + units - 1) // units, MIN_BLOCKS)  # 0-d: any layout

    def splits_of(blocks):
        splits = ad.maximum((blocks + chunk - 1) // chunk, 1)
        return splits if max_splits is None else ad.minimum(splits, max_splits)

    # Carried over the steps: the extra splits and the sequences of several before this step's,
    # and each unit slot's (and merge's) owner as sums over the sequences that own it.
    carried = [ad.registers((T64,), ad.int32, layout=ad.WGMMA_ROW) for _ in range(2)]
    found = [[ad.registers((T64,), ad.int32, layout=ad.WGMMA_ROW) for _ in range(5)]
             for _ in range(ad.cdiv(units, T64))]
    for ref in carried + [ref for refs in found for ref in refs]:
        ref[...] = ad.zeros((T64,), ad.int32, layout=ad.WGMMA_ROW)
    for step in ad.range(steps):
        extras_row = splits_of(blocks_of(step, ad.WGMMA_ROW)[1]) - 1
        multi_row = ad.minimum(extras_row, 1)
        b, blocks = blocks_of(step, ad.WGMMA_COL)
        splits = splits_of(blocks)
        extras, multi = splits - 1, ad.minimum(splits - 1, 1)
        before = row < col  # exclusive prefix sums along the step's 64 sequences
        extra_start = ad.where(before, extras_row[:, None], 0).sum(0) + carried[0][...].max()
        multi_start = ad.where(before, multi_row[:, None], 0).sum(0) + carried[1][...].max()
        inside = b < batch
        ad.store(plan.at[SPLITS, b], splits, mask=inside)
        ad.store(plan.at[PART, b], ad.where(multi > 0, extra_start + multi_start, DIRECT), mask=inside)
        ad.store(plan.at[SEQ, units + b], b, mask=inside)
        ad.store(plan.at[SPLIT, units + b], ad.zeros((T64,), ad.int32, layout=ad.WGMMA_COL), mask=inside)
        for first, (owned, seq, start, merged, merge_seq) in enumerate(found):
            slot = first * T64 + row  # the unit slot (merge) of each row
            owner = (extra_start[None, :] <= slot) & (slot < (extra_start + extras)[None, :])
            owned[...] = owned[...] + owner.sum(1)
            seq[...] = seq[...] + ad.where(owner, b[None, :], 0).sum(1)
            start[...] = start[...] + ad.where(owner, extra_start[None, :], 0).sum(1)
            mine = (multi_start[None, :] == slot) & (multi[None, :] > 0)
            merged[...] = merged[...] + mine.sum(1)
            merge_seq[...] = merge_seq[...] + ad.where(mine, b[None, :], 0).sum(1)
        carried[0][...] = carried[0][...] + extras_row.sum()
        carried[1][...] = carried[1][...] + multi_row.sum()
    for first, (owned, seq, start, merged, merge_seq) in enumerate(found):
        slot = first * T64 + ad.iota((T64,), ad.int32, 0, layout=ad.WGMMA_ROW)
        mine = slot < units
        ad.store(plan.at[SEQ, slot], ad.where(owned[...] > 0, seq[...], IDLE), mask=mine)
        ad.store(plan.at[SPLIT, slot], ad.where(owned[...] > 0, slot - start[...] + 1, 0), mask=mine)
        ad.store(plan.at[MERGE, slot], ad.where(merged[...] > 0, merge_seq[...], IDLE), mask=mine)


class SplitWork:
    """What CTA slot `slot` of a plan does, as traced indices: sequence `b`, its blocks
    first .. first + count - 1 of `blocks` (`blocks(b)`: the sequence's blocks, read on the
    device), and where it writes: `direct` (the output itself), else `partial` at workspace
    slot `part`.  An idle slot (not `live`) has count 0 and neither."""

    def __init__(self, plan, slot, blocks):
        seq, self.split = ad.load_index(plan.at[SEQ, slot]), ad.load_index(plan.at[SPLIT, slot])
        live = (seq + 1).min(1)  # 0 for an idle slot
        self.b = seq.max(0)
        splits, first_part = ad.load_index(plan.at[SPLITS, self.b]), ad.load_index(plan.at[PART, self.b])
        total = blocks(self.b)
        self.first = self.split * total // splits
        self.count = ((self.split + 1) * total // splits - self.first) * live
        self.live = seq >= 0
        self.direct = self.live & (splits == 1)
        self.partial = self.live & (splits > 1)
        self.part = first_part.max(0) + self.split


def merge_work(plan, merge):
    """(b, splits, first part) of merge `merge` of a plan: splits 0 where it is idle."""
    seq = ad.load_index(plan.at[MERGE, merge])
    b = seq.max(0)
    return b, ad.load_index(plan.at[SPLITS, b]) * (seq + 1).min(1), ad.load_index(plan.at[PART, b]).max(0)
