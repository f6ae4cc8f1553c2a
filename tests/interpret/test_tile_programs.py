"""Random register-tile programs (tests/tile_programs.py) against their numpy model: each one
computes exactly what the model does in the interpreter and assembles with ptxas, or is refused
with an AsyncDSLError that names a line of its own source.  An internal error, a wrong value or
PTX that ptxas rejects fails."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import examples
from tile_programs import tile_programs

from asyncdsl.errors import AsyncDSLError

_names = itertools.count()


@settings(max_examples=examples(150),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=tile_programs(), seed=st.integers(0, 2**16))
def test_a_tile_program_computes_what_numpy_does_or_is_refused_at_its_line(
        program, seed, tmp_path_factory, ptxas):
    path = tmp_path_factory.getbasetemp() / f"tile_program_{next(_names)}.py"
    kernel = program.kernel(path)
    x, outputs = program.arrays(seed)
    try:
        kernel.interpret(x, *outputs)
        ptx = kernel.ptx(x, *outputs)
    except AsyncDSLError as error:
        assert error.location is not None and error.location.file == str(path), f"{error}\n{program.text()}"
        event(f"refused: {type(error).__name__}")
        return
    event("computed")
    for got, wanted in zip(outputs, program.expected(x)):
        assert np.array_equal(got, wanted, equal_nan=True), f"{program.text()}\ngot {got}\nwanted {wanted}"
    ptxas(ptx)
