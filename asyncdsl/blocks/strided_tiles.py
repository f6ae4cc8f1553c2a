"""The tiles of a matrix that a persistent CTA takes when CTAS CTAs walk them with a stride.

    import asyncdsl as ad
    from asyncdsl.blocks.strided_tiles import strided_tiles

    @ad.kernel(grid=lambda src, dst, CTAS: (CTAS,))
    def copy(src, dst, CTAS: ad.constexpr):
        mine, window = strided_tiles(ad.program_id(0), *src.shape, 32, 32, CTAS)
        tile = ad.smem((32, 32), src.dtype)
        landed = ad.barrier()
        for t in ad.range(mine):                      # tiles cta, cta + CTAS, ... in row-major order
            ad.async_copy(src.at[window(t)], tile, barrier=landed)
            landed.wait(parity=t % 2)
            ad.async_copy(tile, dst.at[window(t)])
            ad.await_async_copy(0, read_only=True)    # the store has read the tile

Row-major order with a stride keeps the CTAs of a wave on neighbouring tiles, which suits copies
and collectives (every tile costs the same); a GEMM orders its tiles for L2 reuse instead.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def strided_tiles(cta, rows: int, columns: int, BM: int, BN: int, CTAS: int):
    """The (BM, BN) tiles of a rows x columns array that CTA `cta` takes when CTAS CTAs walk them
    with a stride (tiles cta, cta + CTAS, cta + 2 * CTAS, ... in row-major order): how many it
    has, and `window(t)`, the rows and columns of its t-th as two slices."""
    tiles_per_row = ad.cdiv(columns, BN)
    tiles = ad.cdiv(rows, BM) * tiles_per_row
    mine = (tiles - cta + CTAS - 1) // CTAS

    def window(t):
        tile = cta + t * CTAS
        return ad.ds(tile // tiles_per_row * BM, BM), ad.ds(tile % tiles_per_row * BN, BN)

    return mine, window
