"""Shared pieces of the benchmarks: timing in a fresh process, GPU timing, result files."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def fresh_process_seconds(code: str, env: dict | None = None) -> float:
    """Run `code` in a new Python process (which can import the benchmark modules); it must print
    one float (seconds) last."""
    path = os.pathsep.join(p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
    )
    if done.returncode:
        raise RuntimeError(f"benchmark subprocess failed:\n{done.stdout}\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def empty_dir() -> str:
    return tempfile.mkdtemp(prefix="asyncdsl-bench-")


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0)


def median_gpu_ms(fn, warmup: int = 25, rep: int = 200) -> float:
    """Median device time of `fn` in milliseconds (CUDA events, through triton.testing.do_bench)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def write_result(name: str, payload: dict) -> Path:
    """Write `payload` with the date and GPU to results/NAME-DATE.json (and $OUT when set)."""
    payload = {"date": datetime.date.today().isoformat(), "gpu": gpu_name(), **payload}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{payload['date']}.json"
    text = json.dumps(payload, indent=2) + "\n"
    path.write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], path.name).write_text(text)
    return path
