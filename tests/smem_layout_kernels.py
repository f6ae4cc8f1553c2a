"""Kernels over shared-memory buffers that carry their layout (transforms + swizzle), shared by
the interpreter suite and the GPU suite (GPU bytes equal to the interpreter's)."""

from __future__ import annotations

import asyncdsl as ad

SWIZZLES = (0, 32, 64, 128)
REGISTER_LAYOUTS = {"wgmma": ad.WGMMA, "strided": ad.strided(4), "strided8": ad.strided(8), "row": None}


def tiling(dtype: ad.DType, swizzle: int) -> ad.TileTransform:
    """Tiles of 8 rows of one swizzle span (64 bytes without a swizzle): what TMA and wgmma use."""
    return ad.TileTransform((8, (swizzle or 64) * 8 // dtype.bits))


@ad.kernel(grid=(1,))
def copy_through_layout(x, y, SWIZZLE: ad.constexpr):
    """x -> slot 1 of a laid-out ring -> y: the copies take transforms and swizzle from the ring."""
    ring = ad.smem((2, *x.shape), x.dtype, transforms=tiling(x.dtype, SWIZZLE), swizzle=SWIZZLE)
    landed = ad.barrier()
    ad.async_copy(x.at[...], ring.at[1], barrier=landed)
    landed.wait()
    ad.async_copy(ring.at[1], y.at[...])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def registers_through_layout(x, y, SWIZZLE: ad.constexpr, LAYOUT: ad.constexpr, MATH: ad.constexpr):
    """TMA load into a laid-out buffer, register load in LAYOUT, `t * t - t` when MATH, register
    store into another laid-out buffer, TMA store: every address through the swizzle."""
    layout = tiling(x.dtype, SWIZZLE)
    inbox = ad.smem((2, *x.shape), x.dtype, transforms=layout, swizzle=SWIZZLE)
    outbox = ad.smem(x.shape, x.dtype, transforms=layout, swizzle=SWIZZLE)
    landed = ad.barrier()
    ad.async_copy(x.at[...], inbox.at[1], barrier=landed)
    landed.wait()
    tile = ad.load(inbox.at[1], layout=REGISTER_LAYOUTS[LAYOUT])
    if MATH:
        tile = tile * tile - tile
    outbox[...] = tile
    ad.fence_async_smem()
    ad.async_copy(outbox, y.at[...])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def registers_to_plain(x, y, SWIZZLE: ad.constexpr, LAYOUT: ad.constexpr):
    """A laid-out buffer read into registers and written to a plain row-major buffer (whose
    copy out needs no layout): the register load alone decides what y holds."""
    inbox = ad.smem(x.shape, x.dtype, transforms=tiling(x.dtype, SWIZZLE), swizzle=SWIZZLE)
    plain = ad.smem(x.shape, x.dtype)
    landed = ad.barrier()
    ad.async_copy(x.at[...], inbox, barrier=landed)
    landed.wait()
    plain[...] = ad.load(inbox, layout=REGISTER_LAYOUTS[LAYOUT])
    ad.fence_async_smem()
    ad.async_copy(plain, y.at[...])
    ad.await_async_copy(0)
