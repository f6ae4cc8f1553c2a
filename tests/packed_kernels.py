"""Kernels and inputs of the 4-bit (packed) element tests, shared by the CPU and GPU suites."""

from __future__ import annotations

import numpy as np

import asyncdsl as ad

PACKED = [ad.float4_e2m1fn, ad.int4, ad.uint4]


@ad.kernel(grid=lambda x, y, BM, BN, **_: (x.shape[0] // BM, x.shape[1] // BN))
def tile_round_trip(x, y, BM: ad.constexpr, BN: ad.constexpr, TILE: ad.constexpr = None,
                    SWIZZLE: ad.constexpr = 0):
    """Each CTA loads a (BM, BN) tile (through TileTransform(TILE)) and stores it back the same way."""
    rows, cols = ad.ds(ad.program_id(0) * BM, BM), ad.ds(ad.program_id(1) * BN, BN)
    transforms = (ad.TileTransform(TILE),) if TILE else ()
    shape = (BM // TILE[0], BN // TILE[1], *TILE) if TILE else (BM, BN)
    tile = ad.smem(shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[rows, cols], tile, barrier=bar, transforms=transforms, swizzle=SWIZZLE)  # the load
    bar.wait()
    ad.async_copy(tile, y.at[rows, cols], transforms=transforms, swizzle=SWIZZLE)
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def dump_tiled(x, y, TILE: ad.constexpr):
    """Loads all of x through TileTransform(TILE) and stores the SMEM buffer as it lies into y."""
    tile = ad.smem(y.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=bar, transforms=ad.TileTransform(TILE))
    bar.wait()
    ad.async_copy(tile, y.at[...])
    ad.await_async_copy(0)


def random_4bit(shape, dtype: ad.DType, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 16, size=shape, dtype=np.uint8).view(dtype.numpy)


@ad.kernel(grid=(1,))
def through_second_slot(x, y):
    slots = ad.smem((2, *x.shape), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[...], slots.at[1], barrier=bar)
    bar.wait()
    ad.async_copy(slots.at[1], y.at[...])
    ad.await_async_copy(0)
