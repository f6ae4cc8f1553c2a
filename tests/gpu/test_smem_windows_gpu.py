"""Windows of shared-memory buffers on the H200: TMA loads and stores into windows at static and
traced starts, a cluster's multicast load, register loads and stores (`ldmatrix`/`stmatrix`
among them) and wgmma operands through windows, of rows and of whole column tiles, give the
interpreter's bytes."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip
from smem_window_kernels import (
    REGISTER_LAYOUTS,
    SWIZZLES,
    columns_through_windows,
    multicast_into_a_window,
    registers_through_windows,
    tma_through_halves,
    tma_traced_window,
    wgmma_on_column_windows,
    wgmma_on_windows,
)
from support import random_bits
from tile_kernels import special_values

import asyncdsl as ad

hopper_or_skip()
pytestmark = pytest.mark.gpu

LAYOUTS = (None, *SWIZZLES)  # None: a plain row-major buffer


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16, ad.int8), ids=str)
@pytest.mark.parametrize("swizzle", LAYOUTS)
@pytest.mark.parametrize("half", (32, 64))
def test_tma_through_static_windows(dtype, swizzle, half):
    x = random_bits((128, 128 // dtype.itemsize), dtype, 1)
    (gpu,), (cpu,) = gpu_and_interpreter(tma_through_halves, [x], [np.zeros_like(x)], SWIZZLE=swizzle,
                                         HALF=half)
    expected = np.concatenate([x[row:row + half] for row in range(128 - half, -1, -half)])
    assert gpu.tobytes() == cpu.tobytes() == expected.tobytes()


@pytest.mark.parametrize("swizzle", LAYOUTS)
def test_tma_through_a_window_at_a_traced_start(swizzle):
    x = random_bits((128, 64), ad.bfloat16, 2)
    (gpu,), (cpu,) = gpu_and_interpreter(tma_traced_window, [x], [np.zeros_like(x)], SWIZZLE=swizzle)
    assert gpu.tobytes() == cpu.tobytes() == x.tobytes()


@pytest.mark.parametrize("swizzle", LAYOUTS)
def test_a_multicast_load_into_a_window(swizzle):
    x = random_bits((64, 64), ad.bfloat16, 8)
    (gpu,), (cpu,) = gpu_and_interpreter(multicast_into_a_window, [x], [np.zeros((128, 64), x.dtype)],
                                         SWIZZLE=swizzle)
    assert gpu.tobytes() == cpu.tobytes() == np.concatenate([x, x]).tobytes()


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", LAYOUTS)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_register_loads_and_stores_through_windows(dtype, swizzle, layout):
    x = special_values(dtype, (128, 64), 9)  # NaN, ±0, ±inf, subnormals among random values
    (gpu,), (cpu,) = gpu_and_interpreter(registers_through_windows, [x], [np.zeros_like(x)],
                                         SWIZZLE=swizzle, LAYOUT=layout)
    assert gpu.view(np.uint8).tobytes() == cpu.view(np.uint8).tobytes()


@pytest.mark.parametrize("n", (64, 128))
def test_wgmma_on_windows(n):
    # Small integers: every product and sum exact, so the GPU, the interpreter and numpy agree
    # bit for bit (rounding of inexact sums is the wgmma tests' business, not the windows').
    rng = np.random.default_rng(4)
    a = rng.integers(-8, 8, (128, 64)).astype(ad.bfloat16.numpy)
    b = rng.integers(-8, 8, (128, n)).astype(ad.bfloat16.numpy)
    c = np.full((128, n), np.nan, np.float32)  # every element written by the kernel
    (gpu,), (cpu,) = gpu_and_interpreter(wgmma_on_windows, [a, b], [c], N=n)
    assert gpu.tobytes() == cpu.tobytes()
    np.testing.assert_array_equal(gpu, a.astype(np.float64) @ b[64:].astype(np.float64))


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_windows_of_whole_column_tiles(dtype, swizzle):
    span = (swizzle or 64) // dtype.itemsize
    x = special_values(dtype, (64, 3 * span), 10)
    (gpu,), (cpu,) = gpu_and_interpreter(columns_through_windows, [x], [np.zeros((2, *x.shape), x.dtype)],
                                         SWIZZLE=swizzle)
    assert gpu.view(np.uint8).tobytes() == cpu.view(np.uint8).tobytes()


def test_column_windows_are_wgmma_operands():
    a = np.random.default_rng(6).integers(-8, 8, (64, 128)).astype(ad.bfloat16.numpy)
    c = np.full((64, 64), np.nan, np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(wgmma_on_column_windows, [a], [c])
    assert gpu.tobytes() == cpu.tobytes()
    np.testing.assert_array_equal(gpu, a[:, :64].astype(np.float64) @ a[:, 64:].astype(np.float64).T)
