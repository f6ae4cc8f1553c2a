"""The grouped tile scheduler (`asyncdsl.blocks.grouped_tiles`), in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import grouped_tiles as block


@pytest.mark.parametrize("sizes,ctas", [(((128, 192), (64, 64), (192, 128)), 4),
                                        (((64, 128),), 3), (((64, 64), (256, 192)), 1)], ids=str)
def test_every_tile_of_every_group_is_taken_and_knows_its_group(sizes, ctas):
    numbered = run_example(block)["numbered"]
    rows, columns = sum(m for m, _ in sizes), max(n for _, n in sizes)
    c = np.full((rows, columns), np.nan, np.float32)
    numbered.interpret(c, CTAS=ctas, SIZES=sizes)
    expected = np.full((rows, columns), np.nan, np.float32)
    first = 0
    for group, (m, n) in enumerate(sizes):
        expected[first:first + m, :n] = group
        first += m
    np.testing.assert_array_equal(c, expected)


def test_groups_of_rows_that_are_not_whole_tiles_are_refused():
    numbered = run_example(block)["numbered"]
    with pytest.raises(ad.TraceError, match="positive multiple of 64"):
        numbered.interpret(np.zeros((100, 64), np.float32), CTAS=2, SIZES=((100, 64),))
