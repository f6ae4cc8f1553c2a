"""Distributed shared memory on the H200: register tiles written into (or read from) another
CTA's copy of a buffer (`buf.peer(rank)`) in clusters of 2 and 4, over several rounds through
one mailbox, bit-exact against numpy and the same bytes as the interpreter.

    python3 -m pytest -q tests/gpu/test_peer_smem_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import hopper_or_skip
from peer_smem_kernels import CASES, expected_rotation, rotation_input, rotation_kernel, rotation_output_shape

from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

@pytest.mark.parametrize("size, columns, layout, pull, rounds, dtype", CASES)
def test_tiles_move_between_ctas_as_numpy_and_the_interpreter_say(size, columns, layout, pull, rounds, dtype):
    kernel = rotation_kernel(size, columns, layout, pull, rounds)
    x = rotation_input(size, columns, dtype, seed=size * 100 + columns + rounds)
    poison = np.full(rotation_output_shape(size, columns, rounds), np.nan, dtype.numpy)
    y_device = to_device(poison)
    kernel(to_device(x), y_device)
    on_gpu = to_host(y_device)
    assert on_gpu.tobytes() == expected_rotation(x, size, rounds).tobytes()
    interpreted = poison.copy()
    kernel.interpret(x, interpreted)
    assert interpreted.tobytes() == on_gpu.tobytes()
