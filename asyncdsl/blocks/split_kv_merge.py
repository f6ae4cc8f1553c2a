"""Merging the parts of a split-KV attention: each split of the keys gave its rows' normalised
output Ô_c and log-sum-exp lse_c; the whole is O = Σ w_c Ô_c / Σ w_c with w_c = e^(lse_c - M),
M = max_c lse_c, summed in split order so that the result does not depend on which split
finished first.

    import asyncdsl as ad
    from asyncdsl.blocks.split_kv_merge import merge_splits

    @ad.kernel(grid=(1,), block=128)
    def merged(parts, lses, out):                    # parts (C, 64, D), lses (C, 64) float32
        o, lse = merge_splits(parts.shape[0],
                              lambda c: ad.load(parts.at[c], layout=ad.WGMMA),
                              lambda c: ad.load(lses.at[c], layout=ad.WGMMA_ROW))
        ad.store(out, o)

A split that saw no key of a row reports a hugely negative lse (never -inf, which would make
e^(lse - M) a NaN where every split is empty) and weighs nothing beside one that saw a key.

Where the number of splits is known only on the device (a traced index, as a balanced schedule
gives: `asyncdsl.blocks.balanced_splits`), `merge_splits_in_order` folds them in one pass with
a running maximum, rescaling the sum so far when it grows: in split order too, so the same
parts give the same bits every run (not quite the two-pass sum's bits).
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def merge_splits(splits: int, part, lse):
    """(O, lse) of the rows from `splits` parts: `part(c)` gives split c's rows × D output,
    `lse(c)` its rows' log-sum-exp (each traced where it is called; c a Python int)."""
    top = lse(0)
    for c in range(1, splits):
        top = ad.maximum(top, lse(c))
    weight = ad.exp(lse(0) - top)
    total, weight_sum = part(0) * weight[:, None], weight
    for c in range(1, splits):
        weight = ad.exp(lse(c) - top)
        total, weight_sum = total + part(c) * weight[:, None], weight_sum + weight
    return total * (1.0 / weight_sum)[:, None], top + ad.log(weight_sum)


def merge_splits_in_order(count, part, lse, rows: int, d: int):
    """(O, lse) of `rows` rows from `count` (a traced index, at least 1) parts, as
    `merge_splits` but one pass: `part(c)` gives split c's rows × d output (WGMMA layout),
    `lse(c)` its rows' log-sum-exp (WGMMA_ROW), c a traced index."""
    top = ad.registers((rows,), ad.float32, layout=ad.WGMMA_ROW)
    weight_sum = ad.registers((rows,), ad.float32, layout=ad.WGMMA_ROW)
    total = ad.registers((rows, d), ad.float32, layout=ad.WGMMA)
    top[...], total[...] = lse(0), part(0)
    weight_sum[...] = ad.full((rows,), 1.0, ad.float32, layout=ad.WGMMA_ROW)
    for c in ad.range(1, count):
        new_lse = lse(c)
        grown = ad.maximum(top[...], new_lse)
        old_weight, weight = ad.exp(top[...] - grown), ad.exp(new_lse - grown)
        total[...] = total[...] * old_weight[:, None] + part(c) * weight[:, None]
        weight_sum[...] = weight_sum[...] * old_weight + weight
        top[...] = grown
    return total[...] * (1.0 / weight_sum[...])[:, None], top[...] + ad.log(weight_sum[...])
