"""The persistent tile scheduler (`asyncdsl.blocks.persistent_tiles`), in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

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
