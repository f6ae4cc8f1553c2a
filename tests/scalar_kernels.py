"""Kernels with runtime scalar arguments, shared by the interpreter and GPU suites."""

from __future__ import annotations

import numpy as np

import asyncdsl as ad

B = 16


@ad.kernel(grid=lambda x, y, row0, count: (max(count, 1),))
def copy_tiles(x, y, row0: int, count):
    """CTA i copies rows [row0 + i * B, row0 + (i + 1) * B) of x to y, if i < count."""
    i = ad.program_id(0)
    buf = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    with ad.when(i < count):
        rows = ad.ds(row0 + i * B, B)
        ad.async_copy(x.at[rows, :], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[rows, :])
        ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def copy_loop(x, y, row0: int, count: int, step: int):
    """One CTA copies `count` tiles of B rows, `step` rows apart, from row `row0` on."""
    buf = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    for i in ad.range(count):
        rows = ad.ds(row0 + i * step, B)
        ad.async_copy(x.at[rows, :], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[rows, :])
        ad.await_async_copy(0)


def expected_copy(x, row0, count, step=B):
    """y after copying `count` windows of B rows: TMA zero-fills rows past the array and clips."""
    y = np.zeros_like(x)
    for i in range(count):
        start = row0 + i * step
        low, high = max(start, 0), min(start + B, x.shape[0])
        y[low:high] = x[low:high]
    return y


@ad.kernel(grid=(1,))
def scale_tile(x, y, scale: float, shift: int):
    """y = x * scale + shift where x > scale, else -scale / 2 (register tiles, float32)."""
    buf = ad.smem((64, 64), ad.float32)
    bar = ad.barrier()
    ad.async_copy(x, buf, barrier=bar)
    bar.wait()
    t = buf[...]
    buf[...] = ad.where(t > scale, t * scale + shift, ad.full((64, 64), -scale / 2.0, ad.float32))
    ad.fence_async_smem()
    ad.async_copy(buf, y)
    ad.await_async_copy(0)
