"""The fuzzer's cases on the H200: for at least 1,000 cases the GPU leaves exactly the bytes the
interpreter leaves, given the same inputs (cases the interpreter refuses, that must fail, or that
would fault a GPU are not launched).  Where the interpreter itself differs from the model (known
compiler bugs), the CPU fuzz test reports it; the summary line here counts those cases too."""

from __future__ import annotations

import pytest
from gpu_support import hopper_or_skip

from asyncdsl.fuzz.copies.gpu import run_on_gpu
from asyncdsl.fuzz.copies.pool import cpu_count, run_cases
from asyncdsl.fuzz.copies.summary import Summary

hopper_or_skip()
pytestmark = pytest.mark.gpu

SEED = 7
MIN_GPU_CASES = 1000
BATCH = 500
MAX_CASES = 10 * MIN_GPU_CASES
BUDGET = 60.0  # seconds per case: compile, interpret, launch


def test_gpu_bytes_equal_the_interpreters():
    summary = Summary(SEED)
    start = 0
    while summary.ran_on_gpu < MIN_GPU_CASES and start < MAX_CASES:
        batch = range(start, start + BATCH)
        for index, result in run_cases(SEED, batch, min(8, cpu_count()), BUDGET, run_on_gpu, on_gpu=True):
            summary.add(index, result)
        start += BATCH
    print(summary.line())
    failures, ran = summary.failures, summary.ran_on_gpu
    assert failures == 0, f"{summary.line()}\n{summary.shown(3)}"
    assert ran >= MIN_GPU_CASES, summary.line()
