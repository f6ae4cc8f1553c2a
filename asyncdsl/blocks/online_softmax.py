"""The online softmax of attention: rows of scores that arrive a block of columns at a time, kept
as a running row maximum m and sum of exponentials l, so that no row is ever whole in registers.

    import asyncdsl as ad
    from asyncdsl.blocks.online_softmax import OnlineSoftmax

    @ad.kernel(block=128)                            # one warpgroup: 64 rows
    def weighted(x, v, o, lse):                      # o = Σ_j softmax(x)[:, j] ∘ v[:, j], blockwise
        state = OnlineSoftmax(64, scale=1.4426950408889634)    # log2(e): exponentials of x itself
        acc = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
        acc[...] = ad.zeros((64, 64), ad.float32)
        state.start()
        for j in range(x.shape[1] // 64):
            scores = ad.load(x.at[:, ad.ds(j * 64, 64)], layout=ad.WGMMA)
            p, alpha = state.update(scores, ad.float32)
            acc[...] = acc[...] * alpha[:, None] + p * ad.load(v.at[:, ad.ds(j * 64, 64)], layout=ad.WGMMA)
        ad.store(o, state.normalize(acc[...]))
        ad.store(lse, state.log_sum_exp())

For each block of scores x (rows × columns), `update` raises the row maximum to m' = max(m,
max x), scales the sum so far by α = 2^(scale·(m - m')) and adds the new exponentials
p = 2^(scale·x - scale·m'), each one fused multiply-add and one `ex2.approx` an element (the
interpreter's exp2 is exact).  Whatever was summed with the old maximum (attention's output)
must be scaled by α too: `update` returns p and α.  At the end `normalize` divides by l (one
division a row) and `log_sum_exp` gives ln Σ e^(scale·x·ln 2), what a backward pass needs.
`scale` is log2(e)/√D in attention: the scores' scale folded into the exponent's fma.  A row
whose scores are all -inf (masked) has m = -inf and no defined α: dense attention never makes
one, as every query row sees at least its own key.  With `empty_rows=True` such rows are
allowed (a variable-length batch's sequence without keys, causal rows before the first key):
the exponentials are taken against 0 while m is -inf, so they and α are 0, the row normalizes
to 0 and its log-sum-exp is -inf (ln 0); one select a row more per block and at the end.
"""

from __future__ import annotations

import math

from asyncdsl.frontend import language as ad

LN2 = 0.6931471805599453
LOG2E = 1.4426950408889634  # e^x = 2^(x·LOG2E): attention's scale folds it into the exponent


class OnlineSoftmax:
    """The running maximum and sum of `rows` rows held as wgmma accumulator rows (`WGMMA_ROW`),
    exponentials taken as 2^(scale·x)."""

    def __init__(self, rows: int, scale: float, empty_rows: bool = False):
        self.rows, self.scale, self.empty_rows = rows, scale, empty_rows
        self.row_max = ad.registers((rows,), ad.float32, layout=ad.WGMMA_ROW)  # the paper's m
        self.row_sum = ad.registers((rows,), ad.float32, layout=ad.WGMMA_ROW)  # and l

    def start(self) -> None:
        """No column seen yet: m = -inf, l = 0."""
        self.row_max[...] = ad.full((self.rows,), -math.inf, ad.float32)
        self.row_sum[...] = ad.zeros((self.rows,), ad.float32)

    def update(self, x, dtype):
        """Take the block of scores x into the state; returns its probabilities 2^(scale·x -
        scale·m') in `dtype` and α, the factor for what was summed before."""
        old_max, block_max = self.row_max[...], x.max(axis=1)
        new_max = ad.maximum(old_max, block_max)
        # The maximum the exponentials are taken against: 0 for a row that has seen no key yet.
        base = ad.where(new_max == -math.inf, 0.0, new_max) if self.empty_rows else new_max
        alpha = ad.exp2((self.row_max[...] - base) * self.scale, approx=True)
        probabilities = ad.exp2(ad.fma(x, self.scale, (base * -self.scale)[:, None]), approx=True)
        self.row_sum[...] = self.row_sum[...] * alpha + probabilities.sum(axis=1)
        self.row_max[...] = new_max
        return probabilities.astype(dtype), alpha

    def log_sum_exp(self):
        """Each row's natural log of its sum of exponentials, ln Σ e^(scale·x·ln 2)."""
        return self.row_max[...] * (self.scale * LN2) + ad.log2(self.row_sum[...]) * LN2

    def normalize(self, acc):
        """acc (rows × anything) divided by each row's sum: one division a row, then products
        (0 for an empty row, `empty_rows`)."""
        inverse = 1.0 / self.row_sum[...]
        if self.empty_rows:
            inverse = ad.where(self.row_sum[...] == 0.0, 0.0, inverse)
        return acc * inverse[:, None]

