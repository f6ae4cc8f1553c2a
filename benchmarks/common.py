"""Shared pieces of the benchmarks: timing in a fresh process, GPU timing, the contenders of a
table (peers that run, poisoned outputs, timed turns) and its rows of TFLOP/s, result files and
their pictures."""

from __future__ import annotations

import datetime
import json
import os
import re
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


def in_turns(names, rounds: int, measure, before_round=None) -> dict[str, list[float]]:
    """Per name, `measure(name)` in each of `rounds` rounds, the names taking turns in a new
    (seeded) random order every round: a drift of the GPU's clocks over the run falls on all of
    them alike instead of on whoever was timed first or last, and no contender always follows the
    same one (a kernel that draws less power leaves the clocks higher for the next).
    `before_round(i)`, if given, runs before round i."""
    import random

    times: dict[str, list[float]] = {name: [] for name in names}
    order, shuffle = list(names), random.Random(0).shuffle
    for index in range(rounds):
        if before_round is not None:
            before_round(index)
        shuffle(order)
        for name in order:
            times[name].append(measure(name))
    return times


def gpu_ms_by_round(contenders: dict, rounds: int = 5, warmup: int = 10, rep: int = 100,
                    before_round=None) -> dict[str, list[float]]:
    """Per contender (name -> fn), its `median_gpu_ms` (each launch after an L2 flush) in each of
    `rounds` rounds, the contenders taking turns in a new (seeded) random order every round: a
    drift of the GPU's clocks over the run falls on all of them alike instead of on whoever was
    timed first or last.  `before_round(i)`, if given, runs before round i (to move every
    contender to new output buffers, say)."""
    return in_turns(contenders, rounds, lambda name: median_gpu_ms(contenders[name], warmup=warmup, rep=rep),
                    before_round)


def rounds_of_gpu_ms(contenders: dict, rounds: int = 5, warmup: int = 10, rep: int = 100,
                     before_round=None) -> dict[str, float]:
    """Per contender, the median over the rounds of `gpu_ms_by_round`."""
    import statistics

    by_round = gpu_ms_by_round(contenders, rounds, warmup, rep, before_round)
    return {name: statistics.median(values) for name, values in by_round.items()}


def paired_speedups(by_round: dict[str, list[float]], name: str, peers: list[str]) -> dict[str, float]:
    """`name`'s speed over the fastest of `peers` round by round (their time / its time, all
    measured within one round), as the median, the lowest and the highest over the rounds, and
    the share of rounds in which `name` was at least as fast: a comparison that the drift
    between rounds does not enter, where the ratio of two medians mixes rounds."""
    import statistics

    ratios = [min(by_round[peer][index] for peer in peers) / own for index, own in enumerate(by_round[name])]
    return {"median": statistics.median(ratios), "lowest": min(ratios), "highest": max(ratios),
            "rounds at or above": sum(ratio >= 1 for ratio in ratios) / len(ratios)}


class OutputRotation:
    """The output buffers that every contender's timed launches write, `current` the one of this
    round; `advance` (a `before_round` hook) moves all of them to the next, so no contender keeps
    a buffer luckier than the others' (where the output lies moved a 1000^3 GEMM between 11.7 and
    12.4 us in one run, docs/hardware.md §18)."""

    def __init__(self, make, count: int):
        self.buffers = [make() for _ in range(count)]
        self.current = self.buffers[0]

    def advance(self, index: int) -> None:
        self.current = self.buffers[index % len(self.buffers)]


def interleaved_ms(contenders: dict, rounds: int = 5, launches: int = 20,
                   before_round=None) -> dict[str, float]:
    """Per contender (name -> (run, wait)), the median over `rounds` of the wall time of
    `launches` launches in a row, per launch; the contenders take turns in every round, so each
    meets the same GPU clocks and power state (a long run of one kernel heats the GPU and lowers
    its clocks for whoever comes next; a rested GPU starts slow).  Kernels of a millisecond or
    more hide the host's launch costs; a round starts from an idle queue.  Each round takes the
    contenders in a new (seeded) random order: a kernel that draws less power leaves the GPU's
    clocks higher for the one after it, so no contender may always follow the same one.
    `before_round(i)`, if given, runs before round i."""
    import statistics
    import time

    for run, wait in contenders.values():  # warm-up round
        for _ in range(3):
            run()
        wait()

    def per_launch(name: str) -> float:
        run, wait = contenders[name]
        start = time.perf_counter()
        for _ in range(launches):
            run()
        wait()
        return (time.perf_counter() - start) * 1e3 / launches

    times = in_turns(contenders, rounds, per_launch, before_round)
    return {name: statistics.median(values) for name, values in times.items()}


def graph_ms_by_round(contenders: dict, rounds: int = 7, launches: int = 20) -> dict[str, list[float]]:
    """Per contender (name -> fn), the device time a launch of `launches` back to back, captured
    in one CUDA graph and replayed between CUDA events, in each of `rounds` rounds (contenders in
    a new seeded random order each round, each replayed once untimed first).  The GPU runs the
    launches one after another with no host in between, so this is the steady stream of
    `interleaved_ms` without the host's launch path, and with no L2 flush.  A contender that
    cannot be captured raises."""
    import torch

    graphs = {}
    side = torch.cuda.Stream()
    for name, fn in contenders.items():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capturing stream, as torch asks
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(launches):
                fn()
        graphs[name] = graph
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def per_launch(name: str) -> float:
        graphs[name].replay()  # untimed: the first replay after another contender's
        start.record()
        graphs[name].replay()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / launches

    return in_turns(contenders, rounds, per_launch)


def shape_arguments(argv: list[str], default) -> list[tuple[int, ...]]:
    """The shapes named on the command line ("4096x7168x16384" each), else `default`."""
    return [tuple(int(x) for x in arg.split("x")) for arg in argv] or [tuple(shape) for shape in default]


def tflops(flops: float, times: dict[str, float]) -> dict[str, float]:
    """Per contender, the TFLOP/s of `flops` done in its time (ms)."""
    return {name: flops / ms / 1e9 for name, ms in times.items()}


def best_peer_ratio(tflops_by_name: dict[str, float], own: str) -> dict[str, float]:
    """{"asyncdsl / best peer": own's TFLOP/s over the fastest contender not asyncdsl's}, or {}
    when no peer ran."""
    peers = [value for name, value in tflops_by_name.items() if not name.startswith("asyncdsl")]
    return {"asyncdsl / best peer": tflops_by_name[own] / max(peers)} if peers else {}


def runnable(torch, candidates: dict) -> dict:
    """The candidates (name -> a function building the contender, a callable) that build and run
    once without error, as (run, wait) for `interleaved_ms`; the others reported and left out (a
    peer this torch lacks or cannot run on the inputs)."""
    kept = {}
    for name, build in candidates.items():
        try:
            fn = build()
            fn()
            torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            print(f"{name} unavailable: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
            continue
        kept[name] = (fn, torch.cuda.synchronize)
    return kept


def relative_error(got, exact) -> float:
    """‖got − exact‖ / ‖exact‖ (torch tensors), in float64."""
    return float((got.double() - exact).norm() / exact.norm())


def poisoned_outputs(torch, launchers: dict, shape, dtype, not_run: dict | None = None) -> dict:
    """Per launcher (name -> launch(out)), the output of one launch into its own NaN-filled
    tensor of `shape` and `dtype`: what the launch returned where it returns one (a peer with no
    `out=` makes its own), else the poisoned buffer, every element of which must then have been
    written for its error against float64 to be finite.  With `not_run`, a launcher that raises
    a RuntimeError is a peer this torch cannot run on the inputs: its error's first line goes
    there under its name and it leaves `launchers`."""
    outputs = {}
    for name, launch in list(launchers.items()):
        out = torch.full(shape, float("nan"), device="cuda", dtype=dtype)
        try:
            produced = launch(out)
            torch.cuda.synchronize()
        except RuntimeError as error:
            if not_run is None:
                raise
            not_run[name] = str(error).splitlines()[0]
            del launchers[name]
            continue
        outputs[name] = out if produced is None else produced
    return outputs


def rotated_ms(torch, launchers: dict, rotation: OutputRotation, rounds: int, device: bool = True,
               rep: int = 30) -> tuple[dict[str, float], str]:
    """Per launcher (name -> launch(out)), its time (ms) writing `rotation`'s output of the round,
    and a line saying how it was taken: on the device, one launch after an L2 flush, the median
    of `rounds` rounds (`rounds_of_gpu_ms`), or with `device=False` the wall time of 20 launches
    in a row, the median of 7 rounds (`interleaved_ms`, for kernels long enough to hide the
    host); the contenders take turns either way."""
    if device:
        times = rounds_of_gpu_ms({name: lambda launch=launch: launch(rotation.current)
                                  for name, launch in launchers.items()},
                                 rounds=rounds, rep=rep, before_round=rotation.advance)
        return times, ("device: CUDA events around single launches after a cache flush, median of "
                       f"{rounds} rounds")
    times = interleaved_ms({name: (lambda launch=launch: launch(rotation.current), torch.cuda.synchronize)
                            for name, launch in launchers.items()}, rounds=7, launches=20,
                           before_round=rotation.advance)
    return times, "wall clock of 20 launches in a row, contenders taking turns, median of 7 rounds"


class TflopsTable:
    """A benchmark's result, a row per workload: the row's TFLOP/s by contender (the payload's
    "NAME (TFLOP/s)" entries, which `plot_result` draws) and its whole measurement under
    "details"; each row is printed as it is added."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, float]] = {}
        self.details: dict[str, dict] = {}

    def add(self, name: str, measured: dict, *notes, shown=lambda contender: True) -> dict:
        """Record `measured` (a dict whose "TFLOP/s" holds each contender's) as the row `name`,
        its TFLOP/s of the contenders `shown` picks (all by default), and print it with `notes`."""
        self.details[name] = measured
        self.rows[name] = {key: value for key, value in measured["TFLOP/s"].items() if shown(key)}
        print(name, {key: round(value) for key, value in measured["TFLOP/s"].items()}, *notes, flush=True)
        return measured

    def write(self, name: str, summary: dict | None = None) -> Path:
        """results/NAME.json (`write_result`): the unit, the rows, the `summary` entries, the details."""
        rows = {f"{row} (TFLOP/s)": values for row, values in self.rows.items()}
        return write_result(name, {"unit": "TFLOP/s", **rows, **(summary or {}), "details": self.details})


def measured_commit() -> str | None:
    """The commit whose code the benchmark runs: $BENCHMARK_COMMIT (for a copy of the tree without
    git), else git's HEAD, marked "+changes" when tracked files differ from it; None without git."""
    if os.environ.get("BENCHMARK_COMMIT"):
        return os.environ["BENCHMARK_COMMIT"]
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}+changes" if changed else head


def write_result(name: str, payload: dict) -> Path:
    """Write `payload` with the date, the commit measured and the GPU to results/NAME.json (and
    $OUT when set), in place of the benchmark's previous result: git keeps the earlier runs, and
    docs/performance.md tables the latest (`python benchmarks/performance_page.py`)."""
    stamp = {"date": datetime.date.today().isoformat(), "gpu": gpu_name(), "commit": measured_commit()}
    payload = {**{key: value for key, value in stamp.items() if value is not None}, **payload}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    text = json.dumps(payload, indent=2) + "\n"
    path.write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], path.name).write_text(text)
    return path


# The units results are labelled with: "... (TB/s)", "... us", "..._ms", "..._s (empty caches)".
_UNIT = re.compile(r"(?:^|(?<=[ _(]))(TB/s|GB/s|TFLOP/s|TBps|us|ms|s)(?=$|[ )_])")


def _unit(label: str) -> str:
    """The last unit a label names ("value" when it names none)."""
    found = _UNIT.findall(label)
    return found[-1] if found else "value"


def _panels(payload: dict) -> dict[str, dict[str, float]]:
    """The numbers of a result, one panel per workload (a nested dict) or per unit (flat
    entries); ratios ("a / b") are left to the JSON: they share no axis with what they divide."""
    panels: dict[str, dict[str, float]] = {}
    for key, value in payload.items():
        if isinstance(value, dict):
            numbers = {k: v for k, v in value.items() if isinstance(v, (int, float)) and " / " not in k}
            if numbers:
                panels[key.strip()] = numbers
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and " / " not in key:
            panels.setdefault(_unit(key), {})[key.strip()] = value
    return panels


def plot_result(json_path: Path) -> Path | None:
    """Draw the result in `json_path` as bar charts, one per workload (asyncdsl beside each peer
    measured in the same run), into a PNG next to it (and into $OUT when set).  Returns the PNG's
    path, or None when matplotlib is not installed (pip install 'asyncdsl[plot]')."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    payload = json.loads(Path(json_path).read_text())
    panels = _panels(payload)
    figure, axes = plt.subplots(len(panels), 1,
                                figsize=(10, 0.6 + sum(0.32 * len(p) + 0.6 for p in panels.values())),
                                squeeze=False,
                                gridspec_kw={"height_ratios": [len(p) + 1 for p in panels.values()]})
    for axis, (title, numbers) in zip(axes[:, 0], panels.items()):
        labels = list(numbers)
        colours = ["tab:blue" if label.startswith("asyncdsl") else "tab:gray" for label in labels]
        axis.barh(range(len(labels)), list(numbers.values()), color=colours)
        axis.set_yticks(range(len(labels)))
        axis.set_yticklabels(labels, fontsize=7)
        axis.invert_yaxis()
        axis.set_title(title, fontsize=9)
        axis.tick_params(axis="x", labelsize=7)
    figure.suptitle(
        f"{Path(json_path).stem} on {payload.get('gpu', 'the GPU')} (asyncdsl in blue)", fontsize=10)
    figure.tight_layout()
    png = Path(json_path).with_suffix(".png")
    figure.savefig(png, dpi=110)
    if os.environ.get("OUT"):
        figure.savefig(Path(os.environ["OUT"], png.name), dpi=110)
    plt.close(figure)
    return png
