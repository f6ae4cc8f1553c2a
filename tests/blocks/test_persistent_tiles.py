"""The persistent tile scheduler (`asyncdsl.blocks.persistent_tiles`), in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import persistent_tiles as block
from asyncdsl.blocks.tile_order import tile_position


@pytest.mark.parametrize("shape,ctas", [((192, 320), 4), ((64, 64), 3), ((256, 128), 1)], ids=str)
def test_each_tile_is_taken_once_by_the_cta_its_number_says(shape, ctas):
    numbered = run_example(block)["numbered"]
    c = np.full(shape, np.nan, np.float32)
    numbered.interpret(c, CTAS=ctas)
    m_tiles, n_tiles = shape[0] // 64, shape[1] // 64
    expected = np.zeros(shape, np.float32)
    for tile in range(m_tiles * n_tiles):
        m, n = tile_position(tile, m_tiles, n_tiles, 2)
        expected[m * 64:(m + 1) * 64, n * 64:(n + 1) * 64] = tile % ctas
    np.testing.assert_array_equal(c, expected)


@ad.kernel(grid=lambda c, CTAS, **_: (CTAS,))
def first_shares(c, CTAS: ad.constexpr, SPLIT_K: ad.constexpr, FIRST: ad.constexpr):
    """Writes into each tile of each copy of the grid (c's first axis) the number of the unit
    that takes its first share of K, as the CTA walking the units counts it."""
    groups, m, n = c.shape
    tiles = block.PersistentTiles(m, n, 64, 64, CTAS, snake=3, split_k=SPLIT_K, groups=groups,
                                  first_group=ad.program_id(0) * 0 + FIRST)
    for work in tiles:
        value = ad.zeros((1, 64, 64), ad.float32) + (work.index * CTAS + ad.program_id(0))
        with ad.when(work.split == 0):
            ad.store(c.at[ad.ds(work.group, 1), ad.ds(work.row, 64), ad.ds(work.col, 64)], value)


@pytest.mark.parametrize("groups,shape,ctas,split_k", [(3, (130, 70), 7, 2), (2, (256, 64), 3, 3)], ids=str)
def test_copies_of_the_grid_hold_every_share_of_their_tiles(groups, shape, ctas, split_k):
    # A copy of the tile grid is tiles * split_k units: dividing by the tiles alone put shares of
    # copy 0's tiles in copies past the last, and left tiles of every copy unwritten.
    c = np.full((groups, *shape), np.nan, np.float32)
    first_shares.interpret(c, CTAS=ctas, SPLIT_K=split_k, FIRST=1)
    m_tiles, n_tiles = -(-shape[0] // 64), -(-shape[1] // 64)
    expected = np.full((groups, m_tiles * 64, n_tiles * 64), np.nan)
    for unit in range(0, groups * m_tiles * n_tiles * split_k, split_k):
        copy, tile = divmod(unit // split_k, m_tiles * n_tiles)
        m, n = tile_position(tile, m_tiles, n_tiles, 3)
        expected[(copy + 1) % groups, m * 64:(m + 1) * 64, n * 64:(n + 1) * 64] = unit
    np.testing.assert_array_equal(c, expected[:, :shape[0], :shape[1]])
