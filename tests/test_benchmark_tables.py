"""The table scaffolding of benchmarks/common.py on stand-ins for torch and the GPU: shapes from
the command line, TFLOP/s, peers that cannot run left out, outputs poisoned with NaN, contenders
timed in turns into rotated outputs, and the rows and payload a table writes; then the benchmarks
built on it, their measurements stood in for, write one row per workload and the same summary."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _fake_torch(synchronized: list | None = None):
    """What the helpers ask of torch: `full` (numpy arrays on the host) and `cuda.synchronize`."""
    def synchronize():
        if synchronized is not None:
            synchronized.append(True)

    return types.SimpleNamespace(full=lambda shape, value, device, dtype: np.full(shape, value, dtype),
                                 cuda=types.SimpleNamespace(synchronize=synchronize))


@pytest.fixture
def benchmarks(monkeypatch):
    """The benchmark modules, imported from benchmarks/ with torch stood in for; results are
    kept in `written` instead of results/."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    common = importlib.import_module("common")
    written: dict = {}
    monkeypatch.setattr(common, "write_result",
                        lambda name, payload: written.setdefault(name, payload) and name)
    return types.SimpleNamespace(common=common, written=written, load=importlib.import_module)


def test_shapes_come_from_the_command_line_else_the_defaults(benchmarks):
    shape_arguments = benchmarks.common.shape_arguments
    assert (shape_arguments(["4096x7168x16384", "1x2x3x4x5"], ((8, 8, 8),))
            == [(4096, 7168, 16384), (1, 2, 3, 4, 5)])
    assert shape_arguments([], ((8, 8, 8), (1, 2, 3))) == [(8, 8, 8), (1, 2, 3)]


def test_tflops_and_the_ratio_to_the_best_peer(benchmarks):
    common = benchmarks.common
    speed = common.tflops(6e9, {"asyncdsl": 2.0, "torch": 3.0, "triton": 6.0})  # 6 GFLOP in 2 ms: 3 TFLOP/s
    assert speed == pytest.approx({"asyncdsl": 3.0, "torch": 2.0, "triton": 1.0})
    assert common.best_peer_ratio(speed, "asyncdsl") == pytest.approx({"asyncdsl / best peer": 1.5})
    assert common.best_peer_ratio({"asyncdsl": 3.0, "asyncdsl dense": 2.0}, "asyncdsl") == {}


def test_a_peer_that_cannot_build_or_run_is_reported_and_left_out(benchmarks, capsys):
    def broken_build():
        raise ImportError("no varlen_attn in this torch")

    def broken_run():
        raise RuntimeError("no kernel for these shapes\nsecond line")

    ran = []
    candidates = {"asyncdsl": lambda: lambda: ran.append(1), "missing": broken_build,
                  "refusing": lambda: broken_run}
    kept = benchmarks.common.runnable(_fake_torch(), candidates)
    assert list(kept) == ["asyncdsl"] and ran == [1]
    run, wait = kept["asyncdsl"]
    run()
    assert ran == [1, 1]
    printed = capsys.readouterr().out
    assert "missing unavailable: ImportError: no varlen_attn in this torch" in printed
    assert "refusing unavailable: RuntimeError: no kernel for these shapes\n" in printed


def test_each_contender_writes_once_into_its_own_poisoned_output(benchmarks):
    own = np.ones((2, 3), np.float32)

    def half(out):
        out[0] = 2.0  # a row left unwritten stays NaN, for the error against float64 to show

    def refused(out):
        raise RuntimeError("torch._grouped_mm: offsets must be multiples of 16\ndetails")

    launchers = {"asyncdsl": lambda out: out.fill(1.0), "half": half, "peer": lambda out: own,
                 "refused": refused}
    not_run: dict = {}
    synchronized: list = []
    outputs = benchmarks.common.poisoned_outputs(_fake_torch(synchronized), launchers, (2, 3), np.float32,
                                                 not_run)
    assert list(outputs) == ["asyncdsl", "half", "peer"] and list(launchers) == list(outputs)
    assert np.array_equal(outputs["asyncdsl"], np.ones((2, 3))) and outputs["peer"] is own
    assert np.isnan(outputs["half"][1]).all() and not np.isnan(outputs["half"][0]).any()
    assert not_run == {"refused": "torch._grouped_mm: offsets must be multiples of 16"}
    assert len(synchronized) == 3  # after each launch that ran
    with pytest.raises(RuntimeError, match="offsets"):  # without `not_run`, a failure is the benchmark's
        benchmarks.common.poisoned_outputs(_fake_torch(), {"refused": refused}, (2, 3), np.float32)


@pytest.mark.parametrize("device", [True, False])
def test_contenders_take_turns_writing_the_rounds_output(benchmarks, monkeypatch, device):
    common = benchmarks.common
    made = iter(range(100))
    rotation = common.OutputRotation(lambda: [next(made)], 3)
    written: dict = {"a": [], "b": []}
    launchers = {name: (lambda out, name=name: written[name].append(out[0])) for name in written}
    monkeypatch.setattr(common, "median_gpu_ms", lambda fn, warmup, rep: fn() or 0.5)
    times, timing = common.rotated_ms(_fake_torch(), launchers, rotation, rounds=4, device=device)
    assert set(times) == {"a", "b"} and all(ms > 0 for ms in times.values())
    if device:
        assert timing == ("device: CUDA events around single launches after a cache flush, median of "
                          "4 rounds")
        assert written == {"a": [0, 1, 2, 0], "b": [0, 1, 2, 0]}  # round i writes buffer i mod 3
    else:
        assert timing == "wall clock of 20 launches in a row, contenders taking turns, median of 7 rounds"
        # 3 warm-up launches into the first buffer, then 7 rounds of 20 on buffers 0, 1, 2, 0, 1, 2, 0
        assert [written["a"].count(index) for index in range(3)] == [3 + 3 * 20, 2 * 20, 2 * 20]


def test_a_table_writes_its_rows_the_summary_and_the_details(benchmarks, capsys):
    table = benchmarks.common.TflopsTable()
    first = {"TFLOP/s": {"asyncdsl": 700.4, "asyncdsl sweep BM=64": 650.0, "cuBLAS": 690.0}, "ratio": 1.01}
    assert table.add("4096x4096x4096", first, "ratio 1.010", shown=lambda name: "sweep" not in name) is first
    table.add("64x7168x16384", {"TFLOP/s": {"asyncdsl": 300.0, "cuBLAS": 200.0}, "ratio": 1.5})
    assert capsys.readouterr().out.splitlines()[0] == (
        "4096x4096x4096 {'asyncdsl': 700, 'asyncdsl sweep BM=64': 650, 'cuBLAS': 690} ratio 1.010")
    assert table.write("gemm", {"rows at their bar": 2}) == "gemm"
    assert benchmarks.written["gemm"] == {
        "unit": "TFLOP/s", "4096x4096x4096 (TFLOP/s)": {"asyncdsl": 700.4, "cuBLAS": 690.0},
        "64x7168x16384 (TFLOP/s)": {"asyncdsl": 300.0, "cuBLAS": 200.0}, "rows at their bar": 2,
        "details": {"4096x4096x4096": first, "64x7168x16384": table.details["64x7168x16384"]}}


def _measured(index: int, **entries) -> dict:
    return {"TFLOP/s": {"asyncdsl": 100.0 + index, "asyncdsl sweep BM=64 BN=128 SPLIT_K=2": 90.0,
                        "peer": 80.0}, "relative error vs float64": {"asyncdsl": 1e-3}, "ratio": 1.25,
            "max abs error vs float64": 1e-3, **entries}


BENCHMARK_TABLES = [
    ("grouped_gemm", ["measure"], ["8x128x256x512", "4x64x256x512"],
     {"ratio": {"even": 1.2}, "uneven / even time (asyncdsl)": {"bf16": 1.1}},
     ["8x128x256x512", "4x64x256x512"], {}),
    ("moe_layer", ["measure"], [], {}, ["16384x4096x14336x8x2", "4096x4096x14336x8x2"], {}),
    ("gemm_fp8_blockscaled", ["measure"], ["64x7168x16384"], {}, ["64x7168x16384"], {}),
    ("gemm_fp8_blockscaled", ["measure"], [], {},  # its own shapes: 3 of the 5 with a bar reach 1.25
     ["4096x7168x16384", "4096x4096x7168", "4096x2112x7168", "64x7168x16384", "128x24576x1536",
      "1x7168x16384", "16384x7168x2048"], {"rows at their bar": 3}),
    ("attention_varlen", ["measure_equal", "measure_ragged", "measure_prefill"], ["--tokens", "1024"],
     {"asyncdsl varlen / asyncdsl dense": 0.97, "paged / gathered": 0.9},
     [*(f"{kind} 1024 tokens H16 D128{causal}" for causal in ("", " causal")
        for kind in ("equal lengths", "ragged")),
      *(f"chunked prefill 8 x 512 after 3584, pages of {page}, H16 D128" for page in (16, 64))],
     {"asyncdsl varlen / asyncdsl dense, worst row": 0.97}),
    ("attention_varlen_backward", ["measure"], ["--tokens", "1024", "--dim", "64"],
     {"deterministic cost": 0.1, "max abs error vs float64": {"dq": 1e-3}},
     [f"backward, {kind} 1024 tokens H16 D64{causal}" for causal in ("", " causal")
      for kind in ("equal lengths", "ragged")], {}),
]


@pytest.mark.parametrize("name,measures,argv,entries,rows,summary", BENCHMARK_TABLES,
                         ids=[f"{table[0]}-{len(table[2])}" for table in BENCHMARK_TABLES])
def test_a_benchmark_writes_a_row_per_workload(benchmarks, monkeypatch, name, measures, argv, entries, rows,
                                               summary):
    module = benchmarks.load(name)
    counter = iter(range(100))
    for measure in measures:
        monkeypatch.setattr(module, measure, lambda *args, **kwargs: _measured(next(counter), **entries))
    monkeypatch.setattr(module, "plot_result", lambda path: None, raising=False)
    module.main(argv)
    payload = benchmarks.written[name]
    assert list(payload) == ["unit", *(f"{row} (TFLOP/s)" for row in rows), *summary, "details"]
    assert payload["unit"] == "TFLOP/s" and list(payload["details"]) == rows
    for row in rows:
        measured = payload["details"][row]
        shown = {key: value for key, value in measured["TFLOP/s"].items()
                 if name != "gemm_fp8_blockscaled" or "sweep" not in key}
        assert payload[f"{row} (TFLOP/s)"] == shown
    assert {key: payload[key] for key in summary} == summary
