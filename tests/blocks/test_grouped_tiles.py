"""The grouped tile scheduler (`asyncdsl.blocks.grouped_tiles`), in the interpreter: every tile
of every group taken once, knowing its group and its group's end, whatever the groups' sizes
(empty groups, groups ending inside a tile) as the device holds them."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import grouped_tiles as block


@pytest.mark.parametrize("sizes,columns,ctas", [((128, 0, 100, 37), 192, 4), ((64,), 128, 3),
                                                ((0, 0, 200, 0), 64, 1), ((0,), 64, 2)], ids=str)
def test_every_row_of_every_group_is_taken_and_knows_its_group(sizes, columns, ctas):
    numbered = run_example(block)["numbered"]
    rows = max(sum(sizes), 1)
    c = np.full((rows, columns), np.nan, np.float32)
    numbered.interpret(c, np.cumsum(sizes).astype(np.int32), CTAS=ctas)
    expected = np.full((rows, columns), np.nan, np.float32)
    first = 0
    for group, m in enumerate(sizes):
        expected[first:first + m] = group
        first += m
    np.testing.assert_array_equal(c, expected)


def test_groups_of_rows_that_are_not_whole_tiles_are_refused_unless_ragged():
    @ad.kernel(grid=(1,))
    def tiles_of(c):
        block.GroupedTiles(2, lambda g, before: (before, before + 100), 64, 64, 64, 1)

    with pytest.raises(ad.TraceError, match="positive multiple of 64"):
        tiles_of.interpret(np.zeros((200, 64), np.float32))
