"""The programs of small_tile_programs.py (tiles of few or unit-size dims) on the GPU: bit for bit
the interpreter's result, which test_small_tiles.py holds to numpy."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip
from small_tile_programs import PROGRAMS, SHAPES, kernel, values

hopper_or_skip()
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("body", sorted(PROGRAMS))
def test_small_and_unit_tiles_equal_the_interpreter(body, shape):
    x = values(shape)
    row = np.arange(shape[1], dtype=np.float32).reshape(1, -1)
    want = np.asarray(PROGRAMS[body](x, row), np.float32)
    out = np.zeros(want.shape if want.ndim else (1,), np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(kernel(body), [x, row], [out])
    assert gpu.tobytes() == cpu.tobytes()
