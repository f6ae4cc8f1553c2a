"""The TMA copy matrix on the H200: every case's shared-memory bytes and round trip are
bit-exact against the numpy reference and identical to the interpreter's on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
from copy_matrix import (
    CASES,
    expected_dump,
    expected_round_trip,
    load_and_dump,
    round_trip,
)
from gpu_support import hopper_or_skip
from support import poisoned, random_bits

from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(11)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_load_matches_reference_and_interpreter(case):
    x = random_bits(case.shape, case.dtype, RNG)
    on_gpu = to_device(poisoned(case.smem_shape, case.dtype))
    load_and_dump(to_device(x), on_gpu, CASE=case)
    interpreted = poisoned(case.smem_shape, case.dtype)
    load_and_dump.interpret(x, interpreted, CASE=case)
    gpu_bytes = to_host(on_gpu).view(np.uint8).reshape(-1)
    assert np.array_equal(gpu_bytes, expected_dump(case, x))
    assert np.array_equal(gpu_bytes, interpreted.view(np.uint8).reshape(-1))


@pytest.mark.parametrize("case", [c for c in CASES if c.stores_in_bounds], ids=lambda c: c.name)
def test_round_trip_matches_reference_and_interpreter(case):
    x = random_bits(case.shape, case.dtype, RNG)
    on_gpu = to_device(poisoned(case.shape, case.dtype))
    round_trip(to_device(x), on_gpu, CASE=case)
    interpreted = poisoned(case.shape, case.dtype)
    round_trip.interpret(x, interpreted, CASE=case)
    expected = expected_round_trip(case, x, poisoned(case.shape, case.dtype))
    assert np.array_equal(to_host(on_gpu).view(np.uint8), expected.view(np.uint8))
    assert np.array_equal(interpreted.view(np.uint8), expected.view(np.uint8))
