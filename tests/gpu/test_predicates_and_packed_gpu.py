"""Predicated copies, copies with arrive=False and packed 4-bit copies on the H200: bit-exact
against numpy and identical to the interpreter's bytes on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip
from packed_kernels import PACKED, dump_tiled, random_4bit, through_second_slot, tile_round_trip
from predicate_kernels import halves_on_one_barrier, odd_ctas_copy, skipped_store_then_reuse
from support import random_bits

import asyncdsl as ad

hopper_or_skip()
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(31)


def both(kernel, x: np.ndarray, y: np.ndarray, **constexprs) -> tuple[np.ndarray, np.ndarray]:
    """(GPU result, interpreter result) of `kernel` writing into copies of `y`."""
    (gpu,), (interpreted,) = gpu_and_interpreter(kernel, [x], [y], **constexprs)
    return gpu, interpreted


def test_only_odd_ctas_copy():
    x = random_bits((64, 64), ad.float32, RNG)
    y = np.full_like(x, -1.0)
    expected = y.copy()
    expected[16:32], expected[48:64] = x[16:32], x[48:64]
    for result in both(odd_ctas_copy, x, y):
        assert result.tobytes() == expected.tobytes()


def test_a_skipped_store_commits_an_empty_group():
    x = random_bits((32, 64), ad.float32, RNG)
    y = np.zeros((48, 64), np.float32)
    expected = y.copy()
    expected[:16], expected[32:] = x[:16], x[16:]
    for result in both(skipped_store_then_reuse, x, y, PREDICATE=1):
        assert result.tobytes() == expected.tobytes()


def test_loads_and_stores_without_arrival_or_commit():
    x = random_bits((128, 64), ad.float32, RNG)
    for result in both(halves_on_one_barrier, x, np.zeros_like(x)):
        assert result.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", PACKED, ids=str)
@pytest.mark.parametrize("bm, bn, tile, swizzle",
                         [(16, 64, None, 0), (16, 256, (8, 256), 128), (32, 128, (8, 64), 32)])
def test_4_bit_tiles_round_trip(dtype, bm, bn, tile, swizzle):
    x = random_4bit((64, 256), dtype, seed=bm * bn)
    for result in both(tile_round_trip, x, np.zeros_like(x), BM=bm, BN=bn, TILE=tile, SWIZZLE=swizzle):
        assert result.tobytes() == x.tobytes()


def test_4_bit_tiles_land_in_smem_in_the_tiled_layout():
    x = random_4bit((32, 128), ad.float4_e2m1fn, seed=5)
    expected = np.ascontiguousarray(x.reshape(4, 8, 2, 64).transpose(0, 2, 1, 3))
    for result in both(dump_tiled, x, np.zeros((4, 2, 8, 64), x.dtype), TILE=(8, 64)):
        assert result.tobytes() == expected.tobytes()


def test_4_bit_buffer_views():
    x = random_4bit((16, 64), ad.uint4, seed=6)
    for result in both(through_second_slot, x, np.zeros_like(x)):
        assert result.tobytes() == x.tobytes()
