"""Shared-memory buffers that carry their layout, on the H200: copies through them, and register
tiles read and written through their transforms and swizzle, give the interpreter's bytes."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip
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

hopper_or_skip()
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16, ad.int8), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_a_copy_in_and_out_of_a_laid_out_buffer_is_the_identity(dtype, swizzle):
    x = random_bits((64, 128), dtype, 3)
    (gpu,), (cpu,) = gpu_and_interpreter(copy_through_layout, [x], [np.zeros_like(x)], SWIZZLE=swizzle)
    assert gpu.tobytes() == x.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_register_loads_read_the_logical_tile(dtype, swizzle, layout):
    x = random_bits((64, 128), dtype, 4)
    (gpu,), (cpu,) = gpu_and_interpreter(registers_to_plain, [x], [np.zeros_like(x)], SWIZZLE=swizzle,
                                         LAYOUT=layout)
    assert gpu.tobytes() == x.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_tma_load_registers_math_store_tma_store_is_bit_exact(dtype, swizzle, layout):
    x = special_values(dtype, (64, 128), 9)  # NaN, ±0, ±inf, subnormals among random values
    (gpu,), (cpu,) = gpu_and_interpreter(
        registers_through_layout, [x], [np.zeros_like(x)], SWIZZLE=swizzle, LAYOUT=layout, MATH=True
    )
    assert gpu.view(np.uint8).tobytes() == cpu.view(np.uint8).tobytes()
