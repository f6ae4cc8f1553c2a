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
