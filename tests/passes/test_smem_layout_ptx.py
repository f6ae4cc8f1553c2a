"""PTX of kernels over buffers that carry their layout assembles for sm_90a."""

from __future__ import annotations

import pytest
from smem_layout_kernels import SWIZZLES, copy_through_layout

import asyncdsl as ad


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16, ad.int8), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_copies_through_a_layout_assemble(ptxas, dtype, swizzle):
    spec = ad.ArraySpec((64, 128), dtype)
    ptxas(copy_through_layout.compile(spec, spec, SWIZZLE=swizzle).binary.ptx)
