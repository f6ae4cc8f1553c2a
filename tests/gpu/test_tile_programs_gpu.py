"""Random register-tile programs (tests/tile_programs.py) on the GPU against the interpreter, bit
for bit, and against their numpy model; programs the compiler refuses are the CPU suite's
business (tests/interpret/test_tile_programs.py)."""

from __future__ import annotations

import itertools

import numpy as np
from gpu_support import hopper_or_skip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tile_programs import tile_programs

from asyncdsl.errors import AsyncDSLError
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()

_names = itertools.count()


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=tile_programs(), seed=st.integers(0, 2**16))
def test_a_tile_program_on_the_gpu_matches_the_interpreter_and_numpy(program, seed, tmp_path_factory):
    kernel = program.kernel(tmp_path_factory.getbasetemp() / f"gpu_tile_program_{next(_names)}.py")
    x, outputs = program.arrays(seed)
    try:
        kernel.interpret(x, *outputs)
    except AsyncDSLError:
        return
    on_gpu = [to_device(a) for a in (x, *(np.full_like(o, np.nan) for o in outputs))]
    kernel(*on_gpu)
    for gpu, interpreted, wanted in zip(map(to_host, on_gpu[1:]), outputs, program.expected(x)):
        assert gpu.tobytes() == interpreted.tobytes(), program.text()
        assert np.array_equal(gpu, wanted, equal_nan=True), program.text()
