"""The paged decode (`asyncdsl.kernels.paged_decode_attention`) in float64, from its inputs."""

from __future__ import annotations

import math

import numpy as np


def reference(q, k_cache, v_cache, block_table, seq_lens, k_scale=1.0, v_scale=1.0) -> np.ndarray:
    """The paged decode in float64 from the inputs, (B, Q, H, D) (q (B, H, D) taken as Q = 1);
    keys on a page outside the cache, or past the table, are left out."""
    q4 = q.reshape(q.shape[0], 1, *q.shape[1:]) if q.ndim == 3 else q
    batch, queries, heads, d = q4.shape
    pages, page, h_kv, _ = k_cache.shape
    out = np.zeros(q4.shape, np.float64)
    for b in range(batch):
        length = min(int(seq_lens[b]), block_table.shape[1] * page)
        where = [(int(block_table[b, t // page]), t % page) for t in range(length)]
        for i in range(queries):
            seen = [(p, r) for t, (p, r) in enumerate(where) if t <= length - queries + i and 0 <= p < pages]
            if not seen:
                continue
            rows = tuple(np.array(seen).T)
            for h in range(heads):
                k = k_cache[rows + (h // (heads // h_kv),)].astype(np.float64) * k_scale
                v = v_cache[rows + (h // (heads // h_kv),)].astype(np.float64) * v_scale
                logits = k @ q4[b, i, h].astype(np.float64) / math.sqrt(d)
                weights = np.exp(logits - logits.max())
                out[b, i, h] = weights @ v / weights.sum()
    return out
