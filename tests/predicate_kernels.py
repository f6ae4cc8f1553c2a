"""Kernels of the predicate and `arrive=False` tests, shared by the CPU and GPU suites."""

from __future__ import annotations

import numpy as np

import asyncdsl as ad

R, C = 16, 64  # rows per CTA, columns


def random_rows(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, C)).astype(np.float32)


@ad.kernel(grid=(4,))
def odd_ctas_copy(x, y):
    """Only odd CTAs load and store their rows; even ones skip both (and their wait)."""
    i = ad.program_id(0)
    odd = i % 2 == 1
    tile = ad.smem((R, C), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(i * R, R), :], tile, barrier=bar, predicate=odd)
    with ad.when(odd):
        bar.wait()
    ad.async_copy(tile, y.at[ad.ds(i * R, R), :], predicate=odd)
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def skipped_store_then_reuse(x, y, PREDICATE: ad.constexpr):
    """A store skipped by its predicate still closes a group: await_async_copy(1) then retires the
    store before it, whose SMEM the next load overwrites."""
    tile = ad.smem((R, C), x.dtype)
    bars = ad.barrier(num=2)
    ad.async_copy(x.at[ad.ds(0, R), :], tile, barrier=bars[0])
    bars[0].wait()
    ad.async_copy(tile, y.at[ad.ds(0, R), :])  # group 1
    ad.async_copy(tile, y.at[ad.ds(R, R), :], predicate=ad.program_id(0) == PREDICATE)  # group 2
    ad.await_async_copy(1, read_only=True)
    ad.async_copy(x.at[ad.ds(R, R), :], tile, barrier=bars[1])  # overwrites the tile
    bars[1].wait()
    ad.async_copy(tile, y.at[ad.ds(2 * R, R), :])
    ad.await_async_copy(0)


@ad.kernel(grid=lambda x, y: (x.shape[0] // (2 * R),))
def halves_on_one_barrier(x, y):
    """Two loads complete on one barrier that one arrive_expect_tx announces; two stores make one
    bulk group, closed by the second."""
    row = ad.program_id(0) * 2 * R
    top, bottom = ad.smem((R, C), x.dtype), ad.smem((R, C), x.dtype)
    bar = ad.barrier()
    bar.arrive_expect_tx(2 * R * C * 4)
    ad.async_copy(x.at[ad.ds(row, R), :], top, barrier=bar, arrive=False)
    ad.async_copy(x.at[ad.ds(row + R, R), :], bottom, barrier=bar, arrive=False)
    bar.wait()
    ad.async_copy(top, y.at[ad.ds(row, R), :], arrive=False)
    ad.async_copy(bottom, y.at[ad.ds(row + R, R), :])
    ad.await_async_copy(0)
