"""Shared-memory buffers that carry their layout, in the interpreter: copies through the layout
are the identity, and register tiles read and write each logical element where the transforms
and the swizzle put it (bit-exact against numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from smem_layout_kernels import (
    REGISTER_LAYOUTS,
    SWIZZLES,
    copy_through_layout,
    registers_through_layout,
    registers_to_plain,
)
from support import random_bits
from tile_kernels import special_values

import asyncdsl as ad

DTYPES = (ad.float32, ad.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES + (ad.int8,), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_a_copy_in_and_out_of_a_laid_out_buffer_is_the_identity(dtype, swizzle):
    x = random_bits((64, 128), dtype, 7)
    y = np.zeros_like(x)
    copy_through_layout.interpret(x, y, SWIZZLE=swizzle)
    assert y.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_a_register_load_reads_the_logical_tile(dtype, swizzle, layout):
    x = random_bits((64, 128), dtype, 11)
    y = np.zeros_like(x)
    registers_to_plain.interpret(x, y, SWIZZLE=swizzle, LAYOUT=layout)
    assert y.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_load_math_store_through_swizzled_buffers_equals_numpy(dtype, swizzle, layout):
    x = special_values(dtype, (64, 128), 5)
    y = np.zeros_like(x)
    registers_through_layout.interpret(x, y, SWIZZLE=swizzle, LAYOUT=layout, MATH=True)
    wide = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # inf * inf - inf and friends: NaN, as on the GPU
        expected = ((wide * wide).astype(dtype.numpy).astype(np.float64) - wide).astype(dtype.numpy)
    nan = np.isnan(expected.astype(np.float32))
    assert (np.isnan(y.astype(np.float32)) == nan).all()
    assert (y[~nan].view(f"u{dtype.bits // 8}") == expected[~nan].view(f"u{dtype.bits // 8}")).all()
