"""Kernels over windows of shared-memory buffers (`buf.at[ds(row, n)]`, `buf.at[s, ds(row, n)]`),
shared by the interpreter suite (against numpy), the PTX suite (ptxas) and the GPU suite (GPU bytes
equal to the interpreter's).  Each one moves data through a window by one consumer of views: TMA
loads and stores, register loads and stores (plain, `ldmatrix`/`stmatrix`), and wgmma operands."""

from __future__ import annotations

import asyncdsl as ad

SWIZZLES = (0, 32, 64, 128)
REGISTER_LAYOUTS = {"wgmma": ad.WGMMA, "strided": ad.strided(4), "row": None}


def tiling(dtype: ad.DType, swizzle: int) -> ad.TileTransform:
    """Tiles of 8 rows of one swizzle span (64 bytes without a swizzle), as TMA and wgmma use."""
    return ad.TileTransform((8, (swizzle or 64) * 8 // dtype.bits))


def _buffer(shape, dtype, swizzle: int | None):
    """A buffer laid out in `tiling` tiles (None: a plain row-major one)."""
    if swizzle is None:
        return ad.smem(shape, dtype)
    return ad.smem(shape, dtype, transforms=tiling(dtype, swizzle), swizzle=swizzle)


@ad.kernel(grid=(1,))
def tma_through_halves(x, y, SWIZZLE: ad.constexpr, HALF: ad.constexpr):
    """x (R, C) -> slot 1 of a (2, R, C) ring, each HALF-row window by its own TMA load; y <- the
    windows in the other order (y's first rows from the ring's last window)."""
    rows = x.shape[0]
    ring = _buffer((2, *x.shape), x.dtype, SWIZZLE)
    landed = ad.barrier(arrival_count=rows // HALF)
    for row in range(0, rows, HALF):
        ad.async_copy(x.at[row:row + HALF], ring.at[1, ad.ds(row, HALF)], barrier=landed)
    landed.wait()
    for row in range(0, rows, HALF):
        ad.async_copy(ring.at[1, row:row + HALF], y.at[rows - HALF - row:rows - row])
    ad.await_async_copy(0)


@ad.kernel(grid=(2,))
def tma_traced_window(x, y, SWIZZLE: ad.constexpr):
    """CTA p loads rows p·R/2 .. of x into the window of a (R, C) buffer at a traced start, and
    stores that window to the same rows of y."""
    half = x.shape[0] // 2
    row = ad.program_id(0) * half
    buf = _buffer(x.shape, x.dtype, SWIZZLE)
    landed = ad.barrier()
    ad.async_copy(x.at[ad.ds(row, half)], buf.at[ad.ds(row, half)], barrier=landed)
    landed.wait()
    ad.async_copy(buf.at[ad.ds(row, half)], y.at[ad.ds(row, half)])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def registers_through_windows(x, y, SWIZZLE: ad.constexpr, LAYOUT: ad.constexpr):
    """x -> a buffer by TMA; each half of its rows read into registers in LAYOUT, `t * t - t`,
    and written into the other half of a second buffer, which TMA stores to y."""
    half = x.shape[0] // 2
    inbox = _buffer(x.shape, x.dtype, SWIZZLE)
    outbox = _buffer(x.shape, x.dtype, SWIZZLE)
    landed = ad.barrier()
    ad.async_copy(x.at[...], inbox, barrier=landed)
    landed.wait()
    for row in (0, half):
        tile = ad.load(inbox.at[ad.ds(row, half)], layout=REGISTER_LAYOUTS[LAYOUT])
        outbox.at[ad.ds(half - row, half)][...] = tile * tile - tile
    ad.fence_async_smem()
    ad.async_copy(outbox, y.at[...])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def wgmma_on_windows(a, b, c, N: ad.constexpr):
    """c = a @ b[K:2K] for a (M, K), b (2K, N): the two 64-row halves of a's buffer are the A
    operands of two wgmmas (as two consumers would split them), the window of b's rows K .. 2K
    their B operand."""
    k = a.shape[1]
    layout = dict(transforms=tiling(a.dtype, 128), swizzle=128)
    a_s = ad.smem(a.shape, a.dtype, **layout)
    b_s = ad.smem(b.shape, b.dtype, **layout)
    loaded = ad.barrier(arrival_count=2)
    ad.async_copy(a, a_s, barrier=loaded)
    ad.async_copy(b, b_s, barrier=loaded)
    loaded.wait()
    for row in (0, 64):
        acc = ad.registers((64, N), ad.float32, layout=ad.WGMMA)
        ad.wgmma(acc, a_s.at[ad.ds(row, 64)], b_s.at[ad.ds(k, k)], accumulate=False)
        ad.wgmma_wait(0)
        ad.store(c.at[row:row + 64], acc[...])


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def multicast_into_a_window(x, y, SWIZZLE: ad.constexpr):
    """Both CTAs of a cluster get x (R/2 rows) by one multicast load (each CTA loading its part
    for both) into the second half of their (R, C) buffer; CTA p stores that window to rows
    p·R/2 .. of y."""
    half = x.shape[0]
    buf = _buffer((2 * half, x.shape[1]), x.dtype, SWIZZLE)
    loaded = ad.barrier()
    ad.async_copy(x.at[...], buf.at[ad.ds(half, half)], barrier=loaded, collective="x")
    loaded.wait()
    ad.async_copy(buf.at[ad.ds(half, half)], y.at[ad.ds(ad.program_id(0) * half, half)])
    ad.await_async_copy(0)


@ad.kernel(grid=(2,))
def columns_through_windows(x, y, SWIZZLE: ad.constexpr):
    """x (R, C) -> a buffer tiled in whole columns of one swizzle span, R rows a tile (its column
    tiles one after the other), one TMA load a span into its window of columns; CTA p reads
    each span into registers from a traced start, p spans on (cyclically), writes `t * t - t`
    into the same columns of a second buffer, which TMA stores to y[p]."""
    rows, width = x.shape
    span = (SWIZZLE or 64) * 8 // x.dtype.bits
    layout = dict(transforms=ad.TileTransform((rows, span)), swizzle=SWIZZLE)
    inbox, outbox = ad.smem(x.shape, x.dtype, **layout), ad.smem(x.shape, x.dtype, **layout)
    spans = width // span
    landed = ad.barrier(arrival_count=spans)
    for k in range(spans):
        ad.async_copy(x.at[:, ad.ds(k * span, span)], inbox.at[:, ad.ds(k * span, span)], barrier=landed)
    landed.wait()
    for k in range(spans):
        tile = ad.load(inbox.at[:, ad.ds((ad.program_id(0) + k) % spans * span, span)], layout=ad.WGMMA)
        outbox.at[:, ad.ds(k * span, span)][...] = tile * tile - tile
    ad.fence_async_smem()
    ad.async_copy(outbox, y.at[ad.program_id(0)])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def wgmma_on_column_windows(a, c):
    """c = a[:, :64] @ a[:, 64:]ᵀ for a (64, 128) bf16 in one buffer tiled (64, 64): its two
    column windows are the A operand and, transposed, the B operand of one wgmma."""
    a_s = ad.smem(a.shape, a.dtype, transforms=ad.TileTransform((64, 64)), swizzle=128)
    loaded = ad.barrier()
    ad.async_copy(a, a_s, barrier=loaded)
    loaded.wait()
    acc = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, a_s.at[:, ad.ds(0, 64)], a_s.at[:, ad.ds(64, 64)].T, accumulate=False)
    ad.wgmma_wait(0)
    ad.store(c, acc[...])
