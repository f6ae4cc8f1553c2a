"""The fp8 GEMM benchmark's comparison: each form of cuBLASLt's fp8 GEMM against the asyncdsl
configurations of the same numerics."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_the_fp8_benchmark_sets_each_peer_form_against_the_configurations_of_its_numerics():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import matmul_fp8
    finally:
        sys.path.remove(str(BENCHMARKS))
    tflops = {"torch._scaled_mm fast_accum": 1300.0, "torch._scaled_mm": 1200.0, "asyncdsl bn=256 stages=4": 1250.0,
              "asyncdsl bn=256 stages=4 cluster=2": 1320.0, "asyncdsl bn=192 stages=4 promote=1": 1150.0,
              "asyncdsl bn=192 stages=4 promote=4": 1260.0}
    errors = dict.fromkeys(tflops, 2.6e-3) | {"torch._scaled_mm": 1.7e-3, "asyncdsl bn=192 stages=4 promote=4": 1.8e-3}
    result = matmul_fp8.compare(tflops, errors)
    assert result["best config"] == {"asyncdsl": "asyncdsl bn=256 stages=4 cluster=2",
                                     "asyncdsl promoted": "asyncdsl bn=192 stages=4 promote=4"}
    assert result["ratio"] == {"asyncdsl / torch._scaled_mm fast_accum": 1320 / 1300,
                               "asyncdsl promoted / torch._scaled_mm": 1260 / 1200}
    assert result["error ratio"] == pytest.approx({"asyncdsl / torch._scaled_mm fast_accum": 1.0,
                                                   "asyncdsl promoted / torch._scaled_mm": 1.8 / 1.7})
