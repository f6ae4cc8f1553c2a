"""The order in which persistent CTAs take the tiles of a matrix: row by row, or a planar snake
that keeps the CTAs running at once on a compact patch, so that they share slices in L2.

    from asyncdsl.blocks.tile_order import tile_position

    m, n = tile_position(tile, m_tiles, n_tiles, 16)   # tile number -> (tile row, tile column)

Works on ints (host side) and traced scalars (in a kernel) alike.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def tile_position(tile, m_tiles: int, n_tiles: int, width: int):
    """Where tile number `tile` lies, (m, n).  Row by row when `width` is 0; else a "planar
    snake": bands of `width` tile rows (the last band what is left) walked column by column, down
    each column of the band, every other band backwards, so the CTAs running at once work on a
    compact patch of c and share their slices of a and b in L2.  (Row by row, a few rows of tiles
    and many columns, M = 512 say, have every CTA of a wave on another column of b, each column
    read from memory once per row of tiles.)"""
    if not isinstance(width, int) or width < 0:
        raise ad.TraceError(f"SNAKE is the width of the bands of tiles (0: row by row), a non-negative int, "
                            f"got {width!r}")
    if not width:
        return tile // n_tiles, tile % n_tiles
    band, within = tile // (width * n_tiles), tile % (width * n_tiles)
    rows = m_tiles % width
    if rows == 0 or m_tiles < width:  # every band is `width` rows, or there is one band
        rows = min(width, m_tiles)
    elif not isinstance(band, int):  # the last band is short
        rows = (m_tiles - band * width).min(width)
    else:
        rows = min(width, m_tiles - band * width)
    column = within // rows
    backwards = band % 2
    return band * width + within % rows, column + backwards * (n_tiles - 1 - 2 * column)
