"""Shared-memory buffers that carry their layout, in the interpreter: copies through the layout
are the identity, and register tiles read and write each logical element where the transforms
and the swizzle put it (bit-exact against numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from smem_layout_kernels import SWIZZLES, copy_through_layout
from support import random_bits

import asyncdsl as ad

DTYPES = (ad.float32, ad.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES + (ad.int8,), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_a_copy_in_and_out_of_a_laid_out_buffer_is_the_identity(dtype, swizzle):
    x = random_bits((64, 128), dtype, 7)
    y = np.zeros_like(x)
    copy_through_layout.interpret(x, y, SWIZZLE=swizzle)
    assert y.tobytes() == x.tobytes()
