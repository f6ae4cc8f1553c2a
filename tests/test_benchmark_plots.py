"""Benchmark helpers: `benchmarks/common.plot_result` draws the recorded results, `OutputRotation` takes
the output buffers in turn."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
RESULTS = sorted((BENCHMARKS / "results").glob("*.json"))


@pytest.fixture(scope="module")
def common():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import common
    finally:
        sys.path.remove(str(BENCHMARKS))
    return common


@pytest.mark.parametrize("result", RESULTS, ids=lambda path: path.stem)
def test_every_recorded_result_draws(result, common, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.delenv("OUT", raising=False)
    copy = Path(shutil.copy(result, tmp_path))
    png = common.plot_result(copy)
    assert png == copy.with_suffix(".png") and png.read_bytes().startswith(b"\x89PNG")


def test_panels_are_workloads_or_units_and_leave_ratios_out(common):
    panels = common._panels({
        "date": "2026-12-01", "gpu": "NVIDIA H200",
        "softmax (TB/s)": {"asyncdsl": 3.1, "triton": 3.6, "asyncdsl / triton": 0.87},
        "asyncdsl_launch_us": 15.9, "torch_add_launch_us": 10.9, "asyncdsl_cold_s (empty caches)": 0.11,
        "frontend call (us)": 17.7,
    })
    assert panels == {
        "softmax (TB/s)": {"asyncdsl": 3.1, "triton": 3.6},
        "us": {"asyncdsl_launch_us": 15.9, "torch_add_launch_us": 10.9, "frontend call (us)": 17.7},
        "s": {"asyncdsl_cold_s (empty caches)": 0.11},
    }



def test_the_output_rotation_moves_every_contender_to_the_next_buffer_each_round(common):
    made = iter(range(100))
    rotation = common.OutputRotation(lambda: next(made), 3)
    seen = [rotation.current]
    for index in range(1, 7):  # as `before_round(i)` is called
        rotation.advance(index)
        seen.append(rotation.current)
    assert rotation.buffers == [0, 1, 2] and seen == [0, 1, 2, 0, 1, 2, 0]
