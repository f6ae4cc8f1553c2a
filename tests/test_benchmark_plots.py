"""Benchmark helpers: `benchmarks/common.plot_result` draws the recorded results, `OutputRotation` takes
the output buffers in turn, rounds keep every contender's time and paired speedups compare them
within each round."""

from __future__ import annotations

import json
import math
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
def test_every_recorded_result_has_panels_of_finite_numbers(result, common):
    """What a picture of the result draws: a panel a workload, each of numbers (drawing them is
    the same for every result, and takes seconds for the largest: one is drawn below)."""
    panels = common._panels(json.loads(result.read_text()))
    assert panels and all(panels.values()), panels
    assert all(math.isfinite(number) for numbers in panels.values() for number in numbers.values())


def test_a_recorded_result_of_several_panels_draws(common, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.delenv("OUT", raising=False)

    def bars(path):
        panels = common._panels(json.loads(path.read_text()))
        return sum(map(len, panels.values())) if len(panels) > 1 else math.inf

    copy = Path(shutil.copy(min(RESULTS, key=bars), tmp_path))
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


def test_rounds_take_turns_and_keep_every_contenders_time(common, monkeypatch):
    clock, order = iter(range(1, 100)), []

    def timed(name):
        def fn():
            order.append(name)
            return float(next(clock))
        return fn

    monkeypatch.setattr(common, "median_gpu_ms", lambda fn, warmup, rep: fn())
    rounds_started = []
    by_round = common.gpu_ms_by_round({"a": timed("a"), "b": timed("b"), "c": timed("c")}, rounds=4,
                                      before_round=rounds_started.append)
    assert rounds_started == [0, 1, 2, 3] and sorted(order) == sorted("abc" * 4)
    assert sorted(t for times in by_round.values() for t in times) == [float(t) for t in range(1, 13)]
    assert len({tuple(order[i:i + 3]) for i in range(0, 12, 3)}) > 1  # the turns change order
    medians = common.rounds_of_gpu_ms({"a": timed("a")}, rounds=3)
    assert medians == {"a": 14.0}  # the 13th to 15th readings


def test_paired_speedups_compare_within_each_round(common):
    # The medians alone say 1.1x (1.0 against triton's 1.1); round by round asyncdsl was ahead
    # once and behind twice.
    by_round = {"asyncdsl": [1.0, 2.0, 1.0], "triton": [1.1, 1.8, 0.9], "torch.compile": [1.2, 2.2, 1.5]}
    paired = common.paired_speedups(by_round, "asyncdsl", ["triton", "torch.compile"])
    assert (paired
            == pytest.approx({"median": 0.9, "lowest": 0.9, "highest": 1.1, "rounds at or above": 1 / 3}))


def test_the_register_tile_table_holds_the_medians_and_the_paired_speedups(monkeypatch, tmp_path):
    """`register_tiles.main` on stand-ins for torch and the timers: each row's TB/s are the
    medians over the rounds and the per-round rows compare within each round."""
    import types

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import register_tiles
    finally:
        sys.path.remove(str(BENCHMARKS))
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None),
                                       testing=types.SimpleNamespace(assert_close=lambda *a, **k: None))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    peers = ("asyncdsl", "torch eager", "torch.compile", "triton")
    out = types.SimpleNamespace(zero_=lambda: None, float=lambda: None)
    monkeypatch.setitem(register_tiles.BUILDERS, "softmax",
                        lambda shape: ({p: (lambda: None) for p in peers}, out, out, 10**9, {}, None))
    monkeypatch.setattr(register_tiles, "WORKLOADS", {"softmax": ((4, 8),)})
    times = {"asyncdsl": [1.0, 2.0, 1.0], "torch eager": [5.0] * 3, "torch.compile": [1.2, 2.2, 1.5],
             "triton": [1.1, 1.8, 0.9]}
    monkeypatch.setattr(register_tiles, "gpu_ms_by_round", lambda runs, rounds: times)
    monkeypatch.setattr(register_tiles, "interleaved_ms",
                        lambda streamed, rounds, launches: {p: 1.0 for p in peers})
    graphed = {"asyncdsl": [0.5, 0.5, 0.6], "torch eager": [2.0] * 3, "torch.compile": [0.6, 0.7, 0.8],
               "triton": [0.55, 0.45, 0.66]}
    monkeypatch.setattr(register_tiles, "graph_ms_by_round", lambda runs, rounds, launches: graphed)
    monkeypatch.setattr(register_tiles, "_copy_tbps", lambda nbytes: 1000.0)
    written = {}
    monkeypatch.setattr(register_tiles, "write_result",
                        lambda name, results: written.update(results) or tmp_path)
    monkeypatch.setattr(register_tiles, "plot_result", lambda path: None)
    register_tiles.main(["softmax"])
    row = written["softmax 4x8 bf16 (TB/s)"]
    assert row["asyncdsl"] == pytest.approx(1.0) and row["triton"] == pytest.approx(1 / 1.1)  # TB/s
    assert row["asyncdsl / best of triton, torch.compile"] == pytest.approx(1.1)
    assert row["asyncdsl / best of triton, torch.compile, per round: median"] == pytest.approx(0.9)
    assert (row["asyncdsl / best of triton, torch.compile, per round: rounds at or above"]
            == pytest.approx(1 / 3))
    assert row["asyncdsl, in a CUDA graph"] == pytest.approx(2.0)  # 10^9 bytes in the median 0.5 ms
    in_graph = "asyncdsl / best of triton, torch.compile, in a CUDA graph, per round: "
    assert row[in_graph + "median"] == pytest.approx(1.1) and row[in_graph + "lowest"] == pytest.approx(0.9)
