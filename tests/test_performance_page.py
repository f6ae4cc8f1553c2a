"""benchmarks/results/ holds the latest run of each benchmark the docs cite, within its limits, and
docs/performance.md is what benchmarks/performance_page.py writes from those runs."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_performance_page_is_current():
    page = _load("performance_page", ROOT / "benchmarks" / "performance_page.py").page()
    assert PAGE.read_text() == page, ("docs/performance.md is out of date: "
                                      "run `python benchmarks/performance_page.py`")


def test_results_stay_within_their_limits():
    """The latest JSON of each benchmark and about a picture each, in a few MiB."""
    files = sorted(RESULTS.iterdir())
    pictures = [path for path in files if path.suffix == ".png"]
    assert len(files) == len(pictures) + len(list(RESULTS.glob("*.json"))), "only JSON and PNG files"
    assert len(pictures) <= len(files) - len(pictures) + 2 and len(pictures) <= 25, len(pictures)
    assert sum(path.stat().st_size for path in files) <= 5 * 2**20


def test_every_result_is_a_benchmarks_latest_and_shown_by_the_performance_page():
    page = PAGE.read_text()
    for path in RESULTS.iterdir():
        assert not re.search(r"\d{4}-\d{2}-\d{2}", path.name), f"{path.name}: benchmarks write NAME.json"
        assert f"](../benchmarks/results/{path.name})" in page, f"{path.name} is on no page: drop it"
    for path in RESULTS.glob("*.json"):
        payload = json.loads(path.read_text())
        assert {"date", "gpu"} <= payload.keys() and ({"commit", "recorded_in_commit"} & payload.keys())


def test_a_benchmark_overwrites_its_latest_result_with_the_date_commit_and_gpu(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import common
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setenv("BENCHMARK_COMMIT", "0123456789ab")
    monkeypatch.delenv("OUT", raising=False)
    first = common.write_result("copy_bandwidth", {"4096x4096 f32 (TB/s)": {"asyncdsl": 3.5}})
    second = common.write_result("copy_bandwidth", {"4096x4096 f32 (TB/s)": {"asyncdsl": 3.6}})
    assert first == second == tmp_path / "copy_bandwidth.json" and len(list(tmp_path.iterdir())) == 1
    payload = json.loads(second.read_text())
    assert payload["commit"] == "0123456789ab" and payload["gpu"] == "NVIDIA H200"
    assert payload["4096x4096 f32 (TB/s)"] == {"asyncdsl": 3.6}
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", payload["date"])
    monkeypatch.delenv("BENCHMARK_COMMIT")
    assert re.fullmatch(r"[0-9a-f]{12}(\+changes)?", common.measured_commit())  # this checkout's HEAD


def test_the_warm_up_rows_read_a_saved_workloads_result_on_any_cpu_count():
    # first_call.py --workload llama.workload names its kernels by the file, on the host's CPUs
    module = _load("performance_page", ROOT / "benchmarks" / "performance_page.py")
    payload = json.loads((RESULTS / "first_call.json").read_text())
    kernels = next(key for key in payload if key.startswith("workload of"))
    figures = {key.replace("(16)", "(32)"): value for key, value in payload.pop(kernels).items()}
    payload["llama.workload of 40 kernels (s)"] = figures
    rows = module.warm_up_rows(payload)
    assert [row.label.split(",")[0] for row in rows[1:]] == ["llama.workload's 40 kernels"] * 3
    assert rows[1].ours == figures["empty caches, a worker per CPU (32)"]
