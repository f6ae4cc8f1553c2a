"""The fuzzers' worker pool: a case whose worker dies still gets a result, of the kind its own
fuzzer makes, so that the fuzzer's summary reads it like any other."""

from __future__ import annotations

import json
import os
from typing import NoReturn

from asyncdsl.fuzz.copies import run as copies
from asyncdsl.fuzz.copies.pool import run_cases, run_pool
from asyncdsl.fuzz.tiles import run as tiles
from asyncdsl.fuzz.tiles.summary import Summary


def _dies(seed: int, index: int, directory: str, budget: float) -> NoReturn:
    os._exit(3)  # the worker process ends without answering, as a crash would


def test_a_tile_program_whose_worker_dies_is_reported_by_the_tile_summary(tmp_path):
    [(index, result)] = list(run_pool(5, [7], 1, 10.0, _dies, tiles.Result.lost))
    assert index == 7
    assert isinstance(result, tiles.Result)
    assert (result.name, result.outcome, result.steps) == ("5:7", "internal", ())
    assert "exit status 3" in result.detail
    summary = Summary()
    summary.add(index, result)
    assert summary.failures == 1
    assert summary.by_step() == ""  # no steps known, and none read off a result of another kind
    report = tmp_path / "report.jsonl"
    summary.write_report(str(report))
    assert json.loads(report.read_text())["steps"] == []


def test_a_copy_case_whose_worker_dies_is_a_copy_result():
    [(index, result)] = list(run_cases(5, [7], 1, 10.0, _dies))
    assert index == 7
    assert isinstance(result, copies.Result)
    assert (result.name, result.outcome, result.scenario) == ("5:7", "internal", "")
