"""The strided walk of a matrix's tiles by persistent CTAs (`asyncdsl.blocks.strided_tiles`)."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example
from hypothesis import given
from hypothesis import strategies as st

from asyncdsl.blocks import strided_tiles as block
from asyncdsl.blocks.strided_tiles import strided_tiles


@pytest.mark.parametrize("shape,ctas", [((100, 72), 3), ((32, 32), 4), ((64, 200), 1)], ids=str)
def test_the_docstring_example_copies_every_tile_ragged_edges_included(shape, ctas):
    copy = run_example(block)["copy"]
    src = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    dst = np.full_like(src, np.nan)
    copy.interpret(src, dst, CTAS=ctas)
    assert np.array_equal(dst, src)


@given(rows=st.integers(1, 300), columns=st.integers(1, 300), bm=st.sampled_from([16, 32, 64]),
       bn=st.sampled_from([16, 64, 128]), ctas=st.integers(1, 9))
def test_the_ctas_take_every_tile_once(rows, columns, bm, bn, ctas):
    taken = []
    for cta in range(ctas):
        mine, window = strided_tiles(cta, rows, columns, bm, bn, ctas)
        taken += [(window(t)[0].start, window(t)[1].start) for t in range(mine)]
    every = [(r, c) for r in range(0, rows, bm) for c in range(0, columns, bn)]
    assert sorted(taken) == every
