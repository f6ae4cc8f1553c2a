"""PTX of kernels over buffers that carry their layout assembles for sm_90a."""

from __future__ import annotations

import pytest
from smem_layout_kernels import REGISTER_LAYOUTS, SWIZZLES, copy_through_layout, registers_through_layout

import asyncdsl as ad


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16, ad.int8), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_copies_through_a_layout_assemble(ptxas, dtype, swizzle):
    spec = ad.ArraySpec((64, 128), dtype)
    ptxas(copy_through_layout.compile(spec, spec, SWIZZLE=swizzle).binary.ptx)


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_register_access_through_a_layout_assembles(ptxas, dtype, swizzle, layout):
    spec = ad.ArraySpec((64, 128), dtype)
    ptx = registers_through_layout.compile(spec, spec, SWIZZLE=swizzle, LAYOUT=layout, MATH=True).binary.ptx
    ptxas(ptx)
    if swizzle:  # the thread term is swizzled once, in PTX: (term & rows) >> 3, xor'ed back in
        assert "and.b32" in ptx and "shr.u32" in ptx and "xor.b32" in ptx
