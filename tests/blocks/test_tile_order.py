"""The planar snake order of tiles (`asyncdsl.blocks.tile_order`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from asyncdsl.blocks.tile_order import tile_position


@given(m_tiles=st.integers(1, 40), n_tiles=st.integers(1, 40), width=st.integers(0, 20))
def test_every_tile_has_one_place(m_tiles, n_tiles, width):
    places = [tile_position(t, m_tiles, n_tiles, width) for t in range(m_tiles * n_tiles)]
    assert sorted(places) == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]


@given(m_tiles=st.integers(1, 40), n_tiles=st.integers(1, 40), width=st.integers(1, 20))
def test_consecutive_tiles_are_neighbours_within_a_band(m_tiles, n_tiles, width):
    """A snake: the next tile is the one below, or the next column's first in the band, or (at a
    band's end) the tile below in the same column."""
    places = [tile_position(t, m_tiles, n_tiles, width) for t in range(m_tiles * n_tiles)]
    for (m0, n0), (m1, n1) in zip(places, places[1:]):
        assert abs(n1 - n0) <= 1 and (n1 == n0 or m1 // width == m0 // width)
