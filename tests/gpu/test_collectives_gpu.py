"""Collective (multicast) TMA loads on the H200: in clusters of 2 and 4 CTAs, every CTA ends up
with its group's whole tile, bit-exact against numpy, and the interpreter produces the same
bytes from the same inputs.

Each CTA loads one part of its group's tile with `.multicast::cluster` and waits for the whole
tile on its own barrier (the other parts come from its peers), then stores it at its own rows;
the output therefore shows, CTA by CTA, what landed in its shared memory.

    python3 -m pytest -q tests/gpu/test_collectives_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest
from collective_kernels import (
    broadcast_kernel,
    expected_broadcast,
    expected_rounds,
    num_groups,
    rounds_kernel,
)
from gpu_support import hopper_or_skip
from support import random_bits

import asyncdsl as ad
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(2027)
ROWS = 64
SWIZZLED_TILES = {"swizzle": 128, "transforms": (ad.TileTransform((8, 64)),), "smem_shape": (8, 1, 8, 64)}

CASES = [
    pytest.param((2, 1, 1), "x", (8, 2), ad.float32, {}, id="2x1x1-x"),
    pytest.param((1, 2, 1), "y", (2, 8), ad.float32, {}, id="1x2x1-y"),
    pytest.param((2, 2, 1), ("x", "y"), (4, 4), ad.float16, {}, id="2x2x1-xy"),
    pytest.param((2, 2, 1), "x", (4, 4), ad.int8, {}, id="2x2x1-x"),
    pytest.param((2, 2, 1), "y", (4, 4), ad.float32, {}, id="2x2x1-y"),
    pytest.param((4, 1, 1), "x", (16, 2), ad.float32, {}, id="4x1x1-x"),
    pytest.param((4, 1, 1), "x", (8, 2), ad.bfloat16, SWIZZLED_TILES, id="4x1x1-x-tiled-swizzle128"),
    pytest.param((2, 1, 1), "x", (8, 1), ad.bfloat16, SWIZZLED_TILES, id="2x1x1-x-tiled-swizzle128"),
    pytest.param((2, 2, 1), ("x", "y"), (4, 2), ad.bfloat16, SWIZZLED_TILES, id="2x2x1-xy-tiled-swizzle128"),
]


def poisoned(shape, dtype: ad.DType) -> np.ndarray:
    out = np.empty(shape, dtype.numpy)
    out.view(np.uint8)[...] = 0xA5
    return out


@pytest.mark.parametrize("cluster, collective, grid, dtype, options", CASES)
def test_multicast_is_bit_exact_and_matches_the_interpreter(cluster, collective, grid, dtype, options):
    dims = (collective,) if isinstance(collective, str) else collective
    kernel = broadcast_kernel(cluster, collective, grid, ROWS, **options)
    x = random_bits((num_groups(cluster, dims, grid) * ROWS, 64), dtype, RNG)
    out_shape = (grid[0] * grid[1] * ROWS, 64)

    y_device = to_device(poisoned(out_shape, dtype))
    kernel(to_device(x), y_device)
    on_gpu = to_host(y_device)
    assert on_gpu.tobytes() == expected_broadcast(x, cluster, collective, grid, ROWS).tobytes()

    interpreted = poisoned(out_shape, dtype)
    kernel.interpret(x, interpreted)
    assert interpreted.tobytes() == on_gpu.tobytes()


def test_many_clusters_of_four():
    """1024 CTAs in 256 clusters of 4, each group multicasting its own swizzled tile."""
    cluster, grid = (4, 1, 1), (256, 4)
    kernel = broadcast_kernel(cluster, "x", grid, ROWS, **SWIZZLED_TILES)
    x = random_bits((num_groups(cluster, ("x",), grid) * ROWS, 64), ad.bfloat16, RNG)
    y_device = to_device(poisoned((grid[0] * grid[1] * ROWS, 64), ad.bfloat16))
    kernel(to_device(x), y_device)
    assert to_host(y_device).tobytes() == expected_broadcast(x, cluster, "x", grid, ROWS).tobytes()


def test_rounds_of_multicast_into_one_buffer():
    """A traced loop multicasting a new tile into the same buffer 8 times, the cluster meeting
    between rounds; also through the interpreter."""
    rounds, ctas, rows = 8, 32, 64
    kernel = rounds_kernel(rounds, rows)
    x = random_bits((rounds * ctas // 2 * rows, 64), ad.float32, RNG)
    y_device = to_device(poisoned((rounds * ctas * rows, 64), ad.float32))
    kernel(to_device(x), y_device)
    on_gpu = to_host(y_device)
    assert on_gpu.tobytes() == expected_rounds(x, rounds, ctas, rows).tobytes()
    interpreted = poisoned(on_gpu.shape, ad.float32)
    kernel.interpret(x, interpreted)
    assert interpreted.tobytes() == on_gpu.tobytes()
