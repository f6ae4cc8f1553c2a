"""The fuzzer's fixed slice, run by CI: every case assembles and matches the model, or ends in a
clean error at the user's line.  The slice is as long as it takes to draw every known bug pattern;
`python -m asyncdsl.fuzz.copies` runs any other slice, and the long runs (10,000 cases a seed)
are recorded in docs/notes/2026-12-06-copy-fuzz.md."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, settings

from asyncdsl.fuzz.copies.cases import Case, Squeeze, Window
from asyncdsl.fuzz.copies.expr import Const, CtaId
from asyncdsl.fuzz.copies.generate import case_for, cases
from asyncdsl.fuzz.copies.layout import Tile
from asyncdsl.fuzz.copies.oracle import expect
from asyncdsl.fuzz.copies.patterns import patterns
from asyncdsl.fuzz.copies.pool import cpu_count, run_cases, run_isolated
from asyncdsl.fuzz.copies.run import FAILURES, HINTS
from asyncdsl.fuzz.copies.summary import Summary
from asyncdsl.fuzz.copies.toolchain import have_ptxas

SEED = 1
CASES = 400
BUDGET = 20.0

pytestmark = pytest.mark.skipif(not have_ptxas(), reason="ptxas not found (the test extra installs it)")


def test_fixed_seed_slice():
    summary = Summary(SEED)
    for index, result in run_cases(SEED, range(CASES), min(2, cpu_count()), BUDGET):
        summary.add(index, result)
    failures = summary.failures
    assert failures == 0, f"{summary.line()}\n{summary.by_pattern()}\n{summary.shown(2)}"


def test_the_slice_draws_every_bug_pattern_a_slice_twice_as_long_draws():
    def drawn(count: int) -> set[str]:
        return {name for index in range(count) for name in patterns(case_for(SEED, index, HINTS))}

    assert drawn(CASES) == drawn(2 * CASES)


# Drawn by hypothesis from the same generator, derandomized so CI sees the same cases each run;
# run it locally without `phases` to have hypothesis shrink a failure to a smaller kernel.
@settings(max_examples=60, deadline=None, derandomize=True, database=None, phases=[Phase.generate])
@given(case=cases(HINTS))
def test_hypothesis_cases(case):
    result = run_isolated(case, BUDGET)
    assert result.outcome not in FAILURES, f"{result.outcome}: {result.detail}\n{result.source}"


# The model's verdicts on the copies that used to be misjudged: each case below is run, and its
# expectation (run and match, or refuse) is the model's, so a wrong verdict fails the run.


def _window_case(name, tiling, rows=31, index=None):
    """A (4 or 8, 16) float32 window of a (rows, 128) array through `tiling`, or the row `index`."""
    key = ((Squeeze(Const(index)), Window(Const(0), 16)) if index is not None
           else (Window(Const(0), tiling[0]), Window(Const(0), 16)))
    window = (16,) if index is not None else (tiling[0], 16)
    smem = window if tiling is None else (window[0] // tiling[0], 16 // tiling[1], *tiling)
    return Case(name=name, direction="load", dtype="float32", gmem_shape=(rows, 128), key=key,
                smem_shape=smem, transforms=() if tiling is None else (Tile(tiling),))


def _verdict(case):
    expectation = expect(case, np.random.default_rng(0))
    return expectation.must_fail, expectation.must_pass


@pytest.mark.parametrize("tiling, runs", [((8, 4), True), ((4, 4), False)])
def test_a_tiling_that_does_not_divide_the_array_goes_one_box_a_tile(tiling, runs):
    case = _window_case("tile-boxes", tiling)
    error, must_pass = _verdict(case)
    assert (error is None) == runs and (must_pass is not None) == runs, (error, must_pass)
    assert run_isolated(case, BUDGET).outcome == ("ok" if runs else "clean_error")


@pytest.mark.parametrize("index, runs", [(-1, True), (-31, True), (-32, False)])
def test_a_literal_negative_index_counts_from_the_end(index, runs):
    case = _window_case("negative-index", None, index=index)
    error, _ = _verdict(case)
    assert (error is None) == runs, error
    assert run_isolated(case, BUDGET).outcome == ("ok" if runs else "clean_error")



def _traced_start_case(name, dtype, array, rows, columns, tiling):
    """A (rows, columns) window of an `array`-shaped array from the CTA's index (2 CTAs), through
    `tiling`: the start is traced and not provably on a tile."""
    key = (Window(CtaId("program_id", 0), rows), Window(Const(0), columns))
    smem = (rows // tiling[0], columns // tiling[1], *tiling)
    return Case(name=name, direction="load", dtype=dtype, gmem_shape=array, key=key,
                smem_shape=smem, transforms=(Tile(tiling),), grid=(2, 1, 1))


@pytest.mark.parametrize("tiling", [(2, 16), (8, 4)])
def test_a_tiled_window_at_a_traced_start_off_its_tiles_goes_one_box_a_tile(tiling):
    """Rows from a traced start (the CTA's index, not provably a multiple of the tile's rows): the
    copy goes one box a tile, as a sequence's rows in a packed batch do, and lands what the model
    says."""
    case = _traced_start_case("traced-tile-start", "float32", (64, 128), tiling[0] * 4, 16, tiling)
    error, _ = _verdict(case)
    assert error is None, error
    assert run_isolated(case, BUDGET).outcome == "ok"


@pytest.mark.parametrize("dtype", ["int4", "float4_e2m1fn", "int8"])
def test_tile_boxes_of_packed_elements_land_at_their_tiles_bytes(dtype):
    """Two columns of (2, 128) tiles from a traced start, one box a tile: with 4-bit elements a
    tile is 128 bytes, and the boxes land 128 bytes apart (they landed twice as far, past the
    buffer's end from the ninth tile on)."""
    case = _traced_start_case("packed-tile-boxes", dtype, (64, 256), 16, 256, (2, 128))
    error, _ = _verdict(case)
    assert error is None, error
    assert run_isolated(case, BUDGET).outcome == "ok"
