"""The compute-layer fuzzers on the H200: at least 1,000 random register-tile programs
(asyncdsl.fuzz.tiles) and 200 wgmma configurations (asyncdsl.fuzz.wgmma) leave on the GPU exactly
the bytes the interpreter leaves, from the same inputs, and the interpreter's agree with the
numpy model.  Programs are drawn with exact steps only (every output bit is defined); programs
the interpreter refuses are the CPU fuzzer's business and are not launched.

Kernels are compiled in worker processes (one per CPU, at most 16), so the ~1,300 compilations
run in parallel.  With `--compile-only` (tests/ptx_digests.py) nothing is launched: each
program is interpreted, compared with the model, compiled and assembled by ptxas."""

from __future__ import annotations

import functools

import pytest
from gpu_support import hopper_or_skip

from asyncdsl.fuzz.copies.pool import cpu_count, run_pool
from asyncdsl.fuzz.tiles import generate as tiles
from asyncdsl.fuzz.tiles.gpu import run_on_gpu
from asyncdsl.fuzz.tiles.run import Result
from asyncdsl.fuzz.tiles.summary import Summary
from asyncdsl.fuzz.wgmma import generate as wgmma

hopper_or_skip()
pytestmark = pytest.mark.gpu

SEED = 7
BUDGET = 120.0  # seconds a program may take: interpret, compile, launch
JOBS = min(16, cpu_count())


def _on_the_gpu(draw, wanted: int, compile_only: bool) -> Summary:
    """Programs of SEED, in batches, until `wanted` of them ran on the GPU (or compiled)."""
    summary = Summary()
    run = functools.partial(run_on_gpu, draw=draw, compile_only=compile_only)
    start, batch = 0, wanted + wanted // 20
    while _reached_the_device(summary) < wanted and start < 3 * wanted:
        for index, result in run_pool(SEED, range(start, start + batch), JOBS, BUDGET, run, Result.lost,
                                      on_gpu=not compile_only):
            summary.add(index, result)
        start += batch
        batch = max(16, wanted - _reached_the_device(summary) + 8)
    return summary


def _reached_the_device(summary: Summary) -> int:
    return sum(1 for r in summary.results.values() if r.stage == "device" and r.outcome == "ok")


@pytest.mark.parametrize("draw,wanted", [(tiles.program_for, 1000), (wgmma.program_for, 200)],
                         ids=["tile_programs", "wgmma_configurations"])
def test_gpu_bytes_equal_the_interpreters(draw, wanted, request):
    compile_only = request.config.getoption("--compile-only", default=False)
    summary = _on_the_gpu(draw, wanted, compile_only)
    print(summary.line())
    assert summary.failures == 0, f"{summary.line()}\n{summary.shown(3)}"
    assert _reached_the_device(summary) >= wanted, summary.line()
