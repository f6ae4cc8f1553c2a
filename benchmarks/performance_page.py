"""Write docs/performance.md: for every workload, the latest same-run table of asyncdsl against its
best peer, built from the benchmark's result file (results/NAME.json) and shown with its pictures.

    python benchmarks/performance_page.py

Each benchmark overwrites its own result file (git keeps the earlier runs), so running a benchmark
and then this script brings the page up to date; tests/test_performance_page.py fails while the
page differs from what this writes.  A ratio is asyncdsl's speed over the peer's, from one run:
above 1 asyncdsl is faster (for times, the peer's time over asyncdsl's).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


@dataclass(frozen=True)
class Row:
    """One line of a table: asyncdsl's figure against one peer's, in `unit`."""

    label: str
    ours: float
    peer: str
    theirs: float
    unit: str
    higher_is_better: bool = True

    @property
    def ratio(self) -> float:
        return self.ours / self.theirs if self.higher_is_better else self.theirs / self.ours


@dataclass(frozen=True)
class Workload:
    title: str
    result: str  # results/<result>.json
    script: str
    against: str  # the peers, in words
    rows: Callable[[dict], list[Row]]
    pictures: tuple[str, ...]


def _unit(key: str) -> str:
    found = re.search(r"\(([^()]*)\)\s*$", key)
    return found.group(1) if found else ""


def _best(figures: dict, names) -> tuple[str, float]:
    present = [(figures[name], name) for name in names if name in figures]
    value, name = max(present)
    return name, value


def best_peer(unit_suffix: str, ours: str | None, peers: tuple[str, ...]) -> Callable[[dict], list[Row]]:
    """Rows of `{"SHAPE (UNIT)": {contender: figure}}`: asyncdsl (`ours`, or the best contender
    named asyncdsl... when None) against the best of `peers`."""
    def rows(payload: dict) -> list[Row]:
        found = []
        for key, figures in payload.items():
            if not (isinstance(figures, dict) and key.endswith(f"({unit_suffix})")):
                continue
            if ours is None:
                mine = max(value for name, value in figures.items()
                           if name.startswith("asyncdsl") and " / " not in name)
            else:
                mine = figures[ours]
            peer, theirs = _best(figures, peers)
            found.append(Row(key[: -len(unit_suffix) - 2].strip(), mine, peer, theirs, unit_suffix))
        return found
    return rows


def first_against_peers(payload: dict) -> list[Row]:
    """Rows of `{"CASE (TFLOP/s)": {contender: figure}}` whose first contender is asyncdsl's
    kernel: against the best contender from elsewhere, or where a case has none (a paged cache
    against the same cache gathered first), against the best of asyncdsl's others."""
    found = []
    for key, figures in payload.items():
        if not (isinstance(figures, dict) and key.endswith("(TFLOP/s)")):
            continue
        mine_name, mine = next(iter(figures.items()))
        others = [name for name in figures if not name.startswith("asyncdsl")]
        peer, theirs = _best(figures, others or [name for name in figures if name != mine_name])
        found.append(Row(key[:-len(" (TFLOP/s)")], mine, peer, theirs, "TFLOP/s"))
    return found


def fp8_rows(payload: dict) -> list[Row]:
    """Each shape against both forms of `torch._scaled_mm`, asyncdsl's figure being its fastest
    configuration within 1.5x that form's error."""
    found = []
    for key, figures in payload.items():
        if isinstance(figures, dict) and key.endswith("(TFLOP/s)"):
            for peer in ("torch._scaled_mm", "torch._scaled_mm fast_accum"):
                found.append(Row(key[:-len(" (TFLOP/s)")], figures[f"asyncdsl (against {peer})"], peer,
                                 figures[peer], "TFLOP/s"))
    return found


def row_length_rows(payload: dict) -> list[Row]:
    found = []
    for key, figures in payload.items():
        if isinstance(figures, dict) and key.endswith("(TB/s)"):
            shape = key[:-len(" (TB/s)")]
            for kernel in ("softmax", "rms_norm", "layer_norm"):
                found.append(Row(f"{kernel} {shape}", figures[f"asyncdsl {kernel}"], f"triton {kernel}",
                                 figures[f"triton {kernel}"], "TB/s"))
    return found


def permute_rows(payload: dict) -> list[Row]:
    found = []
    for key, figures in payload.items():
        if isinstance(figures, dict) and key.startswith("B,H,S,D="):
            speeds = {name[:-len(" TB/s")]: value for name, value in figures.items()
                      if name.endswith(" TB/s")}
            mine = max(value for name, value in speeds.items() if name.startswith("asyncdsl"))
            peer, theirs = _best(speeds, [name for name in speeds if not name.startswith("asyncdsl")])
            found.append(Row(key[len("B,H,S,D="):], mine, peer, theirs, "TB/s"))
    return found


def pairs(unit: str, higher_is_better: bool, *lines: tuple[str, str, str, str]):
    """Rows from flat figures: (label, asyncdsl's key, the peer's name, the peer's key)."""
    def rows(payload: dict) -> list[Row]:
        return [Row(label, payload[mine], peer, payload[theirs], unit, higher_is_better)
                for label, mine, peer, theirs in lines]
    return rows


def first_call_rows(payload: dict) -> list[Row]:
    figures = payload["bf16 GEMM 8192^3, first call (s)"]
    return [Row(label, figures[f"asyncdsl, {case} (s)"], "Triton", figures[f"Triton, {case} (s)"], "s", False)
            for label, case in (("fresh process, empty caches", "empty caches"),
                                ("fresh process, warm disk cache", "warm disk cache"))]


def descriptor_rows(payload: dict) -> list[Row]:
    """asyncdsl's default placement (by-value parameters) against its other one (a GMEM scratch)."""
    found = []
    for count in (" 1", " 4", "16"):
        for what in ("host launch", "kernel", "host launch, new addresses"):
            mine = payload[f"{count} descriptors, grid_constant {what} us"]
            theirs = payload[f"{count} descriptors, scratch       {what} us"]
            label = f"{count.strip()} descriptor{'' if count == ' 1' else 's'}, {what}"
            found.append(Row(label, mine, "scratch", theirs, "us", False))
    return found


def profiler_rows(payload: dict) -> list[Row]:
    return [Row(f"{key[:-len(' (ms)')]}, profiled", figures["profiled"], "the same unprofiled",
                figures["plain"], "ms", False)
            for key, figures in payload.items() if isinstance(figures, dict) and key.endswith("(ms)")]


def against_peak(payload: dict) -> list[Row]:
    peak = payload["dense bf16 peak (TFLOP/s)"]
    return [Row(name, value, "dense bf16 peak", peak, "TFLOP/s")
            for name, value in payload["tensor-core rate (TFLOP/s)"].items()]


def collective_rows(payload: dict) -> list[Row]:
    found = []
    for key, figures in payload.items():
        if isinstance(figures, dict) and key.endswith("MiB"):
            for collective in ("all-gather", "reduce-scatter"):
                found.append(Row(f"{collective} {key}", figures[f"{collective} asyncdsl (GB/s)"], "NCCL",
                                 figures[f"{collective} NCCL (GB/s)"], "GB/s"))
        elif isinstance(figures, dict) and key.startswith("all-gather GEMM"):
            found.append(Row(f"{key}, fused", figures["fused asyncdsl (TFLOP/s)"], "NCCL all-gather + cuBLAS",
                             figures["NCCL all-gather + cuBLAS (TFLOP/s)"], "TFLOP/s"))
    return found


def decode_rows(payload: dict) -> list[Row]:
    """Paged decode: KV bytes read a second against the same run's device copy (bytes read and
    written a second), then against the fastest peer, which reads the cache gathered dense."""
    found = []
    for key, figures in payload.items():
        if not (isinstance(figures, dict) and key.endswith("(TB/s)")):
            continue
        name = key[: -len(" (TB/s)")]
        found.append(Row(name, figures["asyncdsl"], "device copy", figures["device copy"], "TB/s"))
        peers = [peer for peer in figures if not peer.startswith("asyncdsl") and peer != "device copy"]
        if peers:
            peer, theirs = _best(figures, peers)
            found.append(Row(f"{name}, against peers", figures["asyncdsl"], peer, theirs, "TB/s"))
    return found


def training_rows(payload: dict) -> list[Row]:
    """The model's training step on asyncdsl's operators against transformers' own (eager SDPA,
    and `torch.compile` where it ran): tokens a second, then peak memory."""
    found = []
    ours = [name for name in payload if name.startswith("asyncdsl") and isinstance(payload[name], dict)]
    peers = [(name, label) for name, label in (("sdpa", "transformers, SDPA"),
                                               ("compile", "transformers, torch.compile"))
             if isinstance(payload.get(name), dict)]
    for mine in ours:
        for peer, label in peers:
            found.append(Row(f"{mine}, tokens/s", payload[mine]["tokens/s"], label,
                             payload[peer]["tokens/s"], "tokens/s"))
        for peer, label in peers[:1]:
            found.append(Row(f"{mine}, peak memory", payload[mine]["peak memory GiB"], label,
                             payload[peer]["peak memory GiB"], "GiB", False))
    return found


def warm_up_rows(payload: dict) -> list[Row]:
    """A workload's kernels ready: asyncdsl's ways against its slower ones (no peer compiles
    these kernels)."""
    # "workload of 17 kernels (s)", or "llama.workload of 40 kernels (s)" for a saved workload
    # (first_call.py --workload PATH): a file's name is kept in the rows' labels
    kernels = next(key for key in payload if re.fullmatch(r".+ of \d+ kernels \(s\)", key))
    workload = payload[kernels]
    empty, disk = payload["GEMM, empty caches (s)"], payload["GEMM, disk cache (s)"]
    shared = payload["8 processes, one empty cache"]
    source, count = kernels[:-len(" (s)")].split(" of ", 1)
    count = count if source == "workload" else f"{source}'s {count}"
    per_cpu = next(key for key in workload if key.startswith("empty caches, a worker per CPU"))  # (CPUs)
    return [
        Row("GEMM's first call in a fresh process, disk cache", disk["first call's work"],
            "the same, empty caches", empty["first call's work"], "s", False),
        Row(f"{count}, empty caches, a worker a CPU", workload[per_cpu],
            "one process", workload["empty caches, 1 process"], "s", False),
        Row(f"{count}, disk cache", workload["disk cache"], "empty caches, one process",
            workload["empty caches, 1 process"], "s", False),
        Row(f"{count}, 8 processes sharing one empty cache, every rank ready",
            shared["seconds until every rank is ready"], "one process alone",
            workload["empty caches, 1 process"], "s", False),
    ]


GEMM_PEERS = ("cuBLAS (torch)", "triton", "mosaic pallas")
WORKLOADS = (
    Workload("bf16 GEMM", "matmul", "matmul.py", "cuBLAS (torch), Triton, Mosaic GPU",
             best_peer("TFLOP/s", "asyncdsl", GEMM_PEERS), ("matmul.png",)),
    Workload("bf16 GEMM, 23 shapes", "matmul_table", "matmul.py --table",
             "cuBLAS (torch), Triton, Mosaic GPU",
             best_peer("TFLOP/s", "asyncdsl", GEMM_PEERS), ("matmul_table-ratios.png", "matmul_table.png")),
    Workload("fp8 GEMM, row-wise scales, bf16 out", "matmul_fp8", "matmul_fp8.py",
             "`torch._scaled_mm` (cuBLASLt), default and fast accumulation", fp8_rows, ("matmul_fp8.png",)),
    Workload("Attention forward", "attention", "attention.py",
             "torch SDPA (cuDNN, flash), Mosaic GPU",
             best_peer("TFLOP/s", "asyncdsl", ("torch SDPA cuDNN", "torch SDPA flash", "mosaic pallas")),
             ("attention.png",)),
    Workload("Attention backward", "attention_backward", "attention_backward.py",
             "torch SDPA backward (cuDNN, flash)",
             best_peer("TFLOP/s", "asyncdsl", ("torch SDPA cuDNN", "torch SDPA flash")),
             ("attention_backward.png",)),
    Workload("Variable-length attention and chunked prefill", "attention_varlen", "attention_varlen.py",
             "torch SDPA (cuDNN, flash; per sequence, nested), flex_attention; a paged cache against "
             "the same cache gathered first", first_against_peers, ("attention_varlen.png",)),
    Workload("Paged decode attention", "paged_decode", "paged_decode.py --sweep",
             "the same run's device copy; torch SDPA and flex_attention on the cache gathered dense",
             decode_rows, ("paged_decode.png",)),
    Workload("Training steps of a 1.1 B Llama model", "llama_train", "llama_train.py",
             "transformers' own LlamaForCausalLM (SDPA, eager and `torch.compile`)", training_rows, ()),
    Workload("Fused row kernels (softmax, RMSNorm, LayerNorm, SwiGLU, fp8 quantisation)", "register_tiles",
             "register_tiles.py", "Triton, torch.compile, torch eager (flushed L2, single launches)",
             best_peer("TB/s", "asyncdsl", ("triton", "torch.compile", "torch eager")),
             ("register_tiles.png",)),
    Workload("Rows of lengths no multiple of 128", "row_lengths", "row_lengths.py", "Triton",
             row_length_rows, ("row_lengths.png",)),
    Workload("Copies", "copy_bandwidth", "copy_bandwidth.py", "torch `copy_`, a Triton TMA copy",
             best_peer("TB/s", None, ("torch copy_", "triton TMA copy 128x128")), ("copy_bandwidth.png",)),
    Workload("(B, H, S, D) to (B, S, H, D) permute", "permute_bhsd", "permute_bhsd.py",
             "torch `permute().contiguous()` and `copy_`", permute_rows, ("permute_bhsd.png",)),
    Workload("Host time of a call", "launch_paths", "launch_paths.py", "Triton", pairs(
        "us", False,
        ("tile copy, same arrays", "asyncdsl tile_copy, 2 descriptors, same arrays (us)",
         "Triton, descriptors built once", "Triton tile copy, descriptors built once (us)"),
        ("tile copy, new addresses", "asyncdsl tile_copy, 2 descriptors, new addresses (us)",
         "Triton, descriptors built per call", "Triton tile copy, descriptors built per call (us)")),
             ("launch_paths.png",)),
    Workload("First call of the tile copy", "tile_copy_latency", "tile_copy_latency.py", "Triton", pairs(
        "s", False,
        ("fresh process, empty caches", "asyncdsl_cold_s (empty caches)", "Triton",
         "triton_cold_s (empty caches)"),
        ("fresh process, warm disk cache", "asyncdsl_cold_s (warm disk cache)", "Triton",
         "triton_cold_s (warm disk cache)")),
             ("tile_copy_latency.png",)),
    Workload("First call of the GEMM", "compile_latency", "compile_latency.py",
             "Triton's persistent TMA matmul (bf16, 8192 x 8192 x 8192)",
             first_call_rows, ("compile_latency.png",)),
    Workload("A workload's kernels ready", "first_call", "first_call.py",
             "asyncdsl's slower ways: empty caches, one process", warm_up_rows, ()),
    Workload("Where TMA descriptors travel", "descriptor_modes", "descriptor_modes.py",
             "asyncdsl's two placements: by-value parameters (the default) against a GMEM scratch",
             descriptor_rows, ("descriptor_modes.png",)),
    Workload("What profiling costs the GEMM", "profiler_overhead", "profiler_overhead.py",
             "the same kernel unprofiled", profiler_rows, ("profiler_overhead.png",)),
    Workload("wgmma chains", "wgmma_chains", "wgmma_chains.py",
             "the dense bf16 peak (an instruction-rate probe)",
             against_peak, ("wgmma_chains.png",)),
    Workload("The attention consumer's tensor-core work, isolated", "attention_mix", "attention_mix.py",
             "the dense bf16 peak", against_peak, ("attention_mix.png",)),
    Workload("Collectives on one GPU (every side a local copy)", "collectives-1gpu", "collectives.py",
             "NCCL (torch.distributed), NCCL's all-gather then cuBLAS", collective_rows,
             ("collectives-1gpu.png",)),
)


def figure(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values))


def provenance(payload: dict) -> str:
    if "commit" in payload:
        commit = f"commit `{payload['commit']}`"
    elif "recorded_in_commit" in payload:
        commit = f"recorded in commit `{payload['recorded_in_commit']}`"
    else:
        commit = "commit not recorded"
    return f"{payload['date']}, {commit}, {payload['gpu']}"


def section(workload: Workload, payload: dict, rows: list[Row]) -> list[str]:
    link = f"../benchmarks/results/{workload.result}.json"
    lines = [f"## {workload.title}", "",
             f"`benchmarks/{workload.script}`, {provenance(payload)}; against {workload.against} "
             f"([JSON]({link})).", "",
             "| | asyncdsl | peer | ratio |", "| --- | --- | --- | --- |"]
    lines += [f"| {row.label} | {figure(row.ours)} {row.unit} | {row.peer}: {figure(row.theirs)} "
              f"{row.unit} | {row.ratio:.3f}× |" for row in rows]
    lines += [""]
    lines += [f"![{workload.title}](../benchmarks/results/{picture})" for picture in workload.pictures]
    return lines + [""]


def page() -> str:
    summary = ["| workload | rows | geometric mean of the ratios | lowest | run |",
               "| --- | --- | --- | --- | --- |"]
    sections = []
    for workload in WORKLOADS:
        payload = json.loads((RESULTS / f"{workload.result}.json").read_text())
        rows = workload.rows(payload)
        ratios = [row.ratio for row in rows]
        anchor = re.sub(r"[^a-z0-9 -]", "", workload.title.lower()).replace(" ", "-")
        summary.append(f"| [{workload.title}](#{anchor}) | {len(rows)} | {geometric_mean(ratios):.3f}× | "
                       f"{min(ratios):.3f}× | {payload['date']} |")
        sections += section(workload, payload, rows)
    lines = [
        "<!-- Written by `python benchmarks/performance_page.py` from benchmarks/results/*.json. -->", "",
        "# Performance", "",
        "Each benchmark runs asyncdsl and its peers in one process on one GPU, and writes its latest "
        "run to `benchmarks/results/NAME.json` (earlier runs are in the repository's history); this "
        "page tables those runs.  A ratio is asyncdsl's speed over the peer's in the same run: above "
        "1 asyncdsl is faster (for times, the peer's time over asyncdsl's).  How each benchmark times "
        "is in [benchmarks/README.md](../benchmarks/README.md); what the measurements taught is in "
        "[docs/hardware.md](hardware.md) and its [notes](notes/).", "",
        *summary, "", *sections,
    ]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    PAGE.write_text(page())
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
