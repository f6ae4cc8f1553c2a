"""The row ring (`asyncdsl.blocks.row_ring`): persistent CTAs walking their rows with several in
flight, in the interpreter (which runs a persistent grid as two CTAs)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from docstring_examples import run_example

import asyncdsl as ad
from asyncdsl.blocks import row_ring


@pytest.mark.parametrize("rows", [1, 2, 7])
def test_the_docstring_example_doubles_every_row_refilling_freed_slots(rows):
    """With 7 rows over two CTAs of two slots, each CTA refills its slots; with one row the
    second CTA has none."""
    doubled = run_example(row_ring)["doubled"]
    x = np.random.default_rng(rows).standard_normal((rows, 512)).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    doubled.interpret(x, y)
    assert np.array_equal(y.astype(np.float32), 2 * x.astype(np.float32))


def test_a_ring_refuses_rows_its_warpgroups_cannot_share_in_whole_vectors():
    doubled = run_example(row_ring)["doubled"]
    with pytest.raises(ad.TraceError, match="rows of 640 elements do not split into 2 shares") as caught:
        doubled.compile(*(ad.ArraySpec((4, 640), ad.bfloat16),) * 2)
    assert caught.value.location is not None
