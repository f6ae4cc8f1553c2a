"""The two float32 numbers of each query row that attention's backward pass needs beside q and
do, its log-sum-exp (scaled for `exp2`) and δ = rowsum(o ∘ do), staged in SMEM by the producer
warpgroup with the ring slot that holds the rows' q and do.

    import asyncdsl as ad
    from asyncdsl.blocks.query_row_stats import QueryRowStats

    @ad.kernel(block=256)                             # consumer 0, producer 1
    def spread(lse, delta, out):                      # out[j, r, c] = lse[64 j + c] - δ[64 j + c]
        stats = QueryRowStats(2, 64)
        free = ad.barrier(num=2)                      # (in the backward: the ring's keys)
        blocks = out.shape[0]
        with ad.warpgroup_role(1):
            for j in ad.range(blocks):
                rows = ad.ds(j * 64, 64)
                lse_j = ad.load(lse.at[rows], layout=ad.WGMMA_ROW)  # issued before the wait
                delta_j = ad.load(delta.at[rows], layout=ad.WGMMA_ROW)
                with ad.when(j >= 2):
                    free[j % 2].wait()
                stats.put(j % 2, lse_j, delta_j)
        with ad.warpgroup_role(0):
            for j in ad.range(blocks):
                stats.wait(j % 2)
                spread_j = ad.zeros((64, 64), ad.float32, layout=ad.WGMMA) + stats.lse(j % 2)
                spread_j = spread_j - stats.delta(j % 2)
                free[j % 2].arrive()                  # after the warpgroup meets: its reads are over
                ad.store(out.at[j], spread_j)

The consumers would otherwise read the rows from GMEM in every step, each thread 16 of each in
the columns' layout (`asyncdsl.WGMMA_COL`): the loads sit on their path (δ's right after the
wait for dpᵀ) and the indices live in their registers.  The producer reads them in the rows'
layout (`asyncdsl.WGMMA_ROW`, two of each a thread: it runs on few registers), issues the reads
before it waits for the slot and stores them once both waits are over; the consumers read the
SMEM in the columns' layout.  A slot's numbers are free when its keys are (the consumers
`release_keys` after their last read of them, past a warpgroup meeting), so they need no
barrier of their own for that.
"""

from __future__ import annotations

from asyncdsl.blocks.online_softmax import LOG2E
from asyncdsl.frontend import language as ad


class QueryRowStats:
    """`stages` slots of `rows` query rows' scaled log-sum-exp and δ.  Make it at the kernel's
    top level."""

    def __init__(self, stages: int, rows: int):
        self.buffer = ad.smem((stages, 2, rows), ad.float32)  # [slot, lse·scale / δ]
        self.full = ad.barrier(num=stages)

    def put(self, slot, lse, delta) -> None:
        """For the producer: store `lse` and `delta`, register tiles (rows,) float32 (read in
        `asyncdsl.WGMMA_ROW` before the ring's waits for the slot), into `slot`, free once those
        waits are over, and tell the consumers."""
        self.buffer.at[slot, 0][...] = lse
        self.buffer.at[slot, 1][...] = delta
        self.full[slot].arrive()  # after the warpgroup meets: every thread's stores are in

    def load_step(self, loads, t, tile, i, lse, delta, query, grad_out) -> None:
        """For the producer of attention's backward: step t's query rows, those of block i of
        `tile` (an `asyncdsl.blocks.attention_grads.KeyTile`), into the ring `loads` with their
        numbers.  `lse` and `delta` are the rows' GMEM windows, read first; `query` and
        `grad_out` make the GMEM views of q and do for the ring's `load`, which waits for the
        slot; the numbers are stored, the log-sum-exp times -log2(e), once it is free."""
        lse_i = tile.row_lse(lse, i, layout=ad.WGMMA_ROW)
        delta_i = ad.load(delta, layout=ad.WGMMA_ROW)
        loads.load(t, query, grad_out)
        self.put(loads.slot(t), lse_i * -LOG2E, delta_i)

    def wait(self, slot) -> None:
        """For a consumer: wait until `slot`'s numbers are in."""
        with ad.region("wait stats"):
            self.full[slot].wait()

    def lse(self, slot):
        """For a consumer: the log-sum-exp in `slot`, as put, (1, rows) in the columns' layout."""
        return ad.load(self.buffer.at[slot, 0], layout=ad.WGMMA_COL)[None, :]

    def delta(self, slot):
        """For a consumer: δ in `slot`, (1, rows) in the columns' layout."""
        return ad.load(self.buffer.at[slot, 1], layout=ad.WGMMA_COL)[None, :]
