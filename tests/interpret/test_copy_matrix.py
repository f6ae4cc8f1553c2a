"""The TMA copy matrix (tests/copy_matrix.py) in the interpreter, against the numpy reference,
and each case's PTX through ptxas."""

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
from support import poisoned, random_bits

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_load_lands_bytes_where_the_reference_says(case):
    x = random_bits(case.shape, case.dtype, RNG)
    dump = poisoned(case.smem_shape, case.dtype)
    load_and_dump.interpret(x, dump, CASE=case)
    assert np.array_equal(dump.view(np.uint8).reshape(-1), expected_dump(case, x))


@pytest.mark.parametrize("case", [c for c in CASES if c.stores_in_bounds], ids=lambda c: c.name)
def test_round_trip_through_the_same_chain(case):
    x = random_bits(case.shape, case.dtype, RNG)
    y = poisoned(case.shape, case.dtype)
    round_trip.interpret(x, y, CASE=case)
    assert np.array_equal(y.view(np.uint8),
                          expected_round_trip(case, x, poisoned(case.shape, case.dtype)).view(np.uint8))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ptx_assembles(case, ptxas):
    import asyncdsl as ad

    x = ad.ArraySpec(case.shape, case.dtype)
    ptxas(load_and_dump.ptx(x, ad.ArraySpec(case.smem_shape, case.dtype), CASE=case))
    if case.stores_in_bounds or case.dynamic:
        ptxas(round_trip.ptx(x, x, CASE=case))
    else:  # a static negative store start is refused: the H200 faults on it
        with pytest.raises(ad.CopyError, match="stores at negative coordinates fault on the H200"):
            round_trip.ptx(x, x, CASE=case)
