"""The producer loop of a load ring (`asyncdsl.blocks.load_ring`), in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from docstring_examples import run_example

from asyncdsl.blocks import load_ring as block


@pytest.mark.parametrize("shape,ctas", [((128, 192), 2), ((64, 64), 3)], ids=str)
def test_the_docstring_example_doubles_every_element_through_the_ring(shape, ctas):
    doubled = run_example(block)["doubled"]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y = np.full_like(x, np.nan)
    doubled.interpret(x, y, CTAS=ctas)
    np.testing.assert_array_equal(y, 2 * x)
