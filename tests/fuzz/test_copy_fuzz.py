"""The fuzzer's fixed slice, run by CI: every case assembles and matches the model, or ends in a
clean error at the user's line.  `python -m asyncdsl.fuzz.copies` runs any other slice."""

from __future__ import annotations

import pytest
from hypothesis import Phase, given, settings

from asyncdsl.fuzz.copies.generate import cases
from asyncdsl.fuzz.copies.pool import cpu_count, run_cases, run_isolated
from asyncdsl.fuzz.copies.run import FAILURES, HINTS
from asyncdsl.fuzz.copies.summary import Summary
from asyncdsl.fuzz.copies.toolchain import have_ptxas

SEED = 1
CASES = 800
BUDGET = 20.0

pytestmark = pytest.mark.skipif(not have_ptxas(), reason="ptxas not found (the test extra installs it)")


def test_fixed_seed_slice():
    summary = Summary(SEED)
    for index, result in run_cases(SEED, range(CASES), min(2, cpu_count()), BUDGET):
        summary.add(index, result)
    failures = summary.failures
    assert failures == 0, f"{summary.line()}\n{summary.by_pattern()}\n{summary.shown(2)}"


# Drawn by hypothesis from the same generator, derandomized so CI sees the same cases each run;
# run it locally without `phases` to have hypothesis shrink a failure to a smaller kernel.
@settings(max_examples=60, deadline=None, derandomize=True, database=None, phases=[Phase.generate])
@given(case=cases(HINTS))
def test_hypothesis_cases(case):
    result = run_isolated(case, BUDGET)
    assert result.outcome not in FAILURES, f"{result.outcome}: {result.detail}\n{result.source}"
