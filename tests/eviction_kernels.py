"""A kernel whose TMA load carries an L2 eviction policy (`async_copy(eviction_policy=...)`),
shared by the PTX tests and the GPU tests."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.mma_operands import tensor_core_layout


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def load_with_policy(x, y, POLICY: ad.constexpr, COLLECTIVE: ad.constexpr = None):
    """Both CTAs of a pair load x (columns of 64, swizzled: tile boxes where its rows are not a
    whole number of them), alone or multicast (`COLLECTIVE` "x"), and store it to their half of y."""
    rows, cols = x.shape[0], 64 * ad.cdiv(x.shape[1], 64)
    buf = ad.smem((rows, cols), x.dtype, **tensor_core_layout(rows))
    bar = ad.barrier()
    ad.async_copy(x.at[:, ad.ds(0, cols)], buf, barrier=bar, eviction_policy=POLICY, collective=COLLECTIVE)
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(ad.cluster_cta_id(0) * rows, rows), ad.ds(0, cols)])
    ad.await_async_copy(0)


def arrays(cols: int = 64):
    """x (64, cols) bf16 counting up, and y for the two CTAs' copies of it."""
    x = np.arange(64 * cols).reshape(64, cols).astype(ml_dtypes.bfloat16)
    return x, np.zeros((128, cols), ml_dtypes.bfloat16)
