"""bf16 matrix multiply (f32 accumulation, bf16 out) against cuBLAS (torch.matmul), a persistent
TMA Triton matmul and JAX Mosaic GPU's Pallas `hopper_matmul_mgpu` at its best configuration,
in one run, on random normal inputs.  TFLOP/s = 2·M·N·K / time per launch.

Times are taken the same way for every contender: the wall time of 20 launches in a row,
median of 7 rounds in which the contenders take turns (`common.interleaved_ms`).  On the H200 a
GEMM's speed follows the GPU's clock and power state more than anything else: the same kernel
measured 640-805 TFLOP/s depending on what ran before it, so only turns taken under the same
conditions compare.  The row's asyncdsl figure is what a user gets: `asyncdsl.kernels.gemm(a, b)`
with the configuration it picks itself; the configurations of `CONFIGS` run beside it as a
sweep, reported with the best of them.  The timed launches of every contender (Mosaic's aside) write
the same output buffers, the next of OUTPUT_BUFFERS each round: on small problems where the
output lies moves a kernel's time by several per cent; each contender's error is measured once,
before the timing, in an output of its own poisoned with NaN.

    python benchmarks/matmul.py [MxNxK ...]
    python benchmarks/matmul.py --table     # the 23 shapes of TABLE, fewer rounds, into
                                            # matmul_table.json
    python benchmarks/matmul.py --table-small   # only its rows timed on the device (below), into
                                            # matmul_table_small.json
    python benchmarks/matmul.py --table 1000x1000x1000 128x4096x4096   # those rows, the table's
                                            # contenders, into matmul_table_rows.json
    python benchmarks/matmul.py --table --no-sweep   # the table's peers and asyncdsl's own
                                            # choice only, no configuration sweep beside it

In the table, problems with fewer 128x256 tiles than SMs also get 128x64 tiles and split-K
contenders (`matmul_split_k`: the units of a tile add up in order into the bf16 c, through a
float32 partial array, a slot per split but the last, and flags allocated once, which the kernel
leaves ready for the next call).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

from common import OutputRotation, interleaved_ms, plot_result, rounds_of_gpu_ms, write_result  # noqa: E402

SHAPES = ((8192, 8192, 8192), (4096, 8192, 4096))
# Square sizes, the projections of an 8B-parameter LLM (N, K) at several token counts M, and
# arrays that are not whole tiles.
TABLE = (
    *((s, s, s) for s in (1024, 2048, 4096, 8192, 16384)),
    *((m, n, k) for m in (128, 512, 2048, 8192)
      for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))),
    (3000, 4104, 2056), (1000, 1000, 1000),
)
TABLE_CONFIGS = (
    {"STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"BN": 128, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"CLUSTER": 2, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},  # b shared by a pair
    {"SCHEDULE": "pingpong", "BM": 128, "BN": 128, "STAGES": 4},
    # 128x192 tiles: whole waves where 128x256 leaves a last wave mostly idle (3000x4104: 528
    # tiles, four waves of 132, against 408 = 3.1 waves).  In CTA pairs they go side by side,
    # sharing a (a b slice of three 64-column chunks does not split between two CTAs): 264 pairs,
    # four waves of 66 (measured on the H200 at 3000x4104x2056: 0.89x cuBLAS, against 0.77x alone
    # and 0.83x for pairs of 128x256 tiles sharing b), walked in bands 4 tiles wide (three
    # repeats in one run: 0.91-0.92x, against 0.89-0.90x in the default bands of 16).
    {"BN": 192, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"CLUSTER": 2, "BN": 192, "SHARE": "a", "SNAKE": 4, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64",
     "IN_FLIGHT": 1},
    # 256x128 tiles (each consumer 128x128) in CTA pairs one above the other sharing each b slice:
    # 3000x4104 is 12x33 = 396 tiles, three waves of 132 (measured on the H200 at 3000x4104x2056,
    # same run: 0.95x cuBLAS, against 0.91x for the 128x192 pairs and 0.84x for 256x128 alone).
    {"CLUSTER": 2, "BM": 256, "BN": 128, "SHARE": "b", "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64",
     "IN_FLIGHT": 1},
)
# Problems with fewer 128x256 tiles than SMs also try narrower tiles, deeper rings and split K.
# A CTA with few tiles waits on memory: the slices in flight (a ring of STAGES) bound its
# bandwidth, and narrower tiles have smaller slices, so more of them fit (measured on the H200:
# 128x64 tiles with 8 stages 0.93x cuBLAS at 1024^3 against 0.88x with 4; 128x128 ping-pong with
# 6 stages 1.00x at 512x4096x4096 against 0.86x).
FEW_TILES_CONFIGS = (
    {"BN": 64, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"BN": 64, "STAGES": 8, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    # The same bytes in flight in half as many slices 128 deep in K: half the barrier round trips
    # per tile (measured on the H200: 1.09x the 8-stage ring at 1024^3 and at 1000^3).
    {"BN": 64, "BK": 128, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"BN": 128, "STAGES": 6, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    # The same ring 128 deep (measured on the H200 at 128x14336x4096: 0.94x cuBLAS, the best
    # plain configuration there, against 0.87x for 128x64 tiles 128 deep).
    {"BN": 128, "BK": 128, "STAGES": 3, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    # The same with b's slices giving way first in L2 (see the one-consumer rings below).
    {"BN": 128, "BK": 128, "STAGES": 3, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1,
     "EVICT_FIRST": "b"},
    {"SCHEDULE": "pingpong", "BM": 128, "BN": 128, "STAGES": 5},
    {"SCHEDULE": "pingpong", "BM": 128, "BN": 128, "STAGES": 6},
    # 128x64 tiles in CTA pairs side by side sharing each a slice (multicast: half the a traffic
    # from L2), walked in bands 4 tiles wide (measured on the H200 at 1000^3, same run, CUDA
    # events: 0.93x cuBLAS against 0.81x alone; at 1024^3 0.87x against 0.94x alone).
    {"CLUSTER": 2, "BN": 64, "BK": 128, "SHARE": "a", "SNAKE": 4, "STAGES": 4, "SPLIT": "m",
     "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    # One consumer warpgroup a CTA owning whole tiles (`matmul_narrow`), the tiles cuBLAS picks
    # for these rows (its kernel names, same run): at M = 128, 64x64 tiles make 128 CTAs without
    # splitting K (0.99x cuBLAS at 128x4096x4096 against 0.90x for split K); 128x64 tiles with 8
    # stages 0.99-1.03x at 1024^3 against 0.89x for two consumers; pairs of 64x128 tiles one above
    # the other sharing b 0.96x at 1000^3 against 0.94x (two runs, CUDA events, contenders taking turns).
    {"CONSUMERS": 1, "BM": 64, "BN": 64, "BK": 128, "STAGES": 6},
    # The same with L2 told to give up the slices of b (or of a and b) first: after a kernel that
    # left L2 full of dirty lines (the cache flush before each timed launch), keeping slices read
    # once or twice only pushes those lines out, whose write-backs then compete with the reads
    # (measured on the H200, same run: 1.06x cuBLAS at 128x4096x4096 against 0.91x, 1.08-1.12x at
    # 128x4096x14336 against 0.97x; on a clean L2 all within 1 %: docs/hardware.md §18).
    {"CONSUMERS": 1, "BM": 64, "BN": 64, "BK": 128, "STAGES": 6, "EVICT_FIRST": "b"},
    {"CONSUMERS": 1, "BM": 64, "BN": 64, "BK": 128, "STAGES": 6, "EVICT_FIRST": "ab"},
    {"CONSUMERS": 1, "BM": 128, "BN": 64, "STAGES": 8},
    {"CONSUMERS": 1, "CLUSTER": 2, "BM": 64, "BN": 128, "BK": 128, "STAGES": 4},
    # 64x128 tiles 64 deep in 8 stages alone (1.00-1.02x cuBLAS at 1024^3 in two repeats, the
    # best there), and 128x64 tiles in pairs side by side sharing a, 128 deep in 4 stages
    # (0.94-0.99x at 1000^3; same run, CUDA events, docs/notes/2026-12-03-gemm-table-shapes.md).
    {"CONSUMERS": 1, "BM": 64, "BN": 128, "BK": 64, "STAGES": 8},
    # The same tiles 128 deep in 4 stages: the same bytes in flight, half the barrier round trips
    # (0.993x cuBLAS at 1024^3 against 0.980x for 64 deep in 8, one run; at 1000^3 0.88x against
    # 0.84x, where pairs sharing a stay ahead: docs/notes/2026-12-03-gemm-table-shapes.md).
    {"CONSUMERS": 1, "BM": 64, "BN": 128, "BK": 128, "STAGES": 4},
    {"CONSUMERS": 1, "CLUSTER": 2, "BM": 128, "BN": 64, "BK": 128, "STAGES": 4, "SHARE": "a"},
)
# Split K: with tiles BN wide and slices BK deep (and the deepest ring that fits beside them),
# alone or in CTA pairs side by side sharing each a slice, as many units per tile as fit in one
# wave, at most MAX_SPLIT_K (the last unit of a tile reads the parts of all the others).
# (256, 64, 4) is left out: the slowest in every row measured (0.58x cuBLAS at 128x4096x4096 with
# 4 splits), and with 4 splits its last unit's sum of three parts beside a 64x256 accumulator spills.
SPLIT_K_RINGS = ((64, 64, 8), (64, 128, 4), (128, 64, 6))  # (BN, BK, STAGES)
MAX_SPLIT_K = 4
CONFIGS = (
    {"STAGES": 3, "SPLIT": "m", "EPILOGUE": "tma", "IN_FLIGHT": 1},
    {"STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 0},
    {"CLUSTER": 2, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"SCHEDULE": "pingpong", "BM": 128, "BN": 128, "STAGES": 4},  # asyncdsl/kernels/gemm_pingpong.py
    # 128x192 tiles: 96 accumulator registers a consumer thread against 128, which ptxas compiles
    # in two thirds of the time (benchmarks/compile_latency.py times the first call of both).
    {"BN": 192, "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
    {"CLUSTER": 2, "BN": 192, "SHARE": "a", "STAGES": 4, "SPLIT": "m", "EPILOGUE": "tma64", "IN_FLIGHT": 1},
)


def _tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2 * m * n * k / ms / 1e9


def _relative_error(c, exact) -> float:
    return float((c.float() - exact).norm() / exact.norm())


# Below this many FLOPs a launch takes well under a millisecond, and wall-clock rounds would time
# the hosts' launch costs: such rows are timed on the device (CUDA events around single launches
# after a cache flush, the contenders taking turns over rounds, `rounds_of_gpu_ms`; Mosaic by its
# own CUPTI profiler, back to back without an L2 flush).  Above it, launches in a row let each host
# enqueue the next launch while the GPU runs the last (every contender's run() is asynchronous),
# and the interleaved rounds give all contenders the same clocks.
DEVICE_TIMED_FLOPS = 2 * 4096 * 4096 * 4096 + 1  # 0.2 ms at 700 TFLOP/s
OUTPUT_BUFFERS = 3  # the timed launches' outputs, taken in turn round by round
DEVICE_ROUNDS = 9  # three rounds on each output buffer: where the output lies moves 10 us rows by ~5 %


def measure(m: int, n: int, k: int, configs=CONFIGS, rounds: int = 7, launches: int = 20,
            device_ms: int = 100) -> dict:
    import torch
    from triton_peers import triton_matmul

    from asyncdsl.kernels.gemm_cooperative import (
        matmul,
        matmul_2cta,
        matmul_narrow,
        matmul_narrow_2cta,
        matmul_split_k,
        matmul_split_k_2cta,
        split_k_flags,
    )
    import asyncdsl.kernels as K
    from asyncdsl.kernels.gemm_pingpong import matmul_pingpong
    from asyncdsl.runtime import device_facts

    sms = device_facts(0).multiprocessor_count
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    exact = a.float() @ b.float()  # the reference the errors are measured against
    outputs, checks = {}, []
    rotation = OutputRotation(lambda: torch.empty((m, n), device="cuda", dtype=torch.bfloat16),
                              OUTPUT_BUFFERS)

    def on_torch_stream(name, launch):
        c = outputs[name] = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        checks.append(lambda: launch(c))  # once, into its own poisoned output, for the errors
        return lambda: launch(rotation.current), torch.cuda.synchronize

    contenders = {
        "cuBLAS (torch)": on_torch_stream("cuBLAS (torch)", lambda c: torch.matmul(a, b, out=c)),
        "triton": on_torch_stream("triton", lambda c: triton_matmul(a, b, c, num_sms=sms)),
    }
    try:
        from mosaic_peer import mosaic_matmul_runner

        runner = mosaic_matmul_runner(m, n, k)
        if runner is not None:
            contenders["mosaic pallas"] = runner
    except Exception as error:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
        print(f"mosaic peer unavailable: {error}")
    tiles = -(-m // 128) * -(-n // 256)
    if configs is TABLE_CONFIGS and tiles < sms:  # too few tiles for the SMs: narrower, and split K
        configs = (*configs, *FEW_TILES_CONFIGS)
        partial = torch.empty(MAX_SPLIT_K - 1, m, n, device="cuda", dtype=torch.float32)
        for (bn, bk, stages), pair in itertools.product(SPLIT_K_RINGS, (1, 2)):
            splits = min(MAX_SPLIT_K, sms // pair // (-(-m // 128) * -(-n // (bn * pair))))
            if splits < 2:
                continue
            flags = torch.zeros(split_k_flags(m, n, bn, pair), device="cuda", dtype=torch.int32)
            kernel = matmul_split_k if pair == 1 else matmul_split_k_2cta
            name = (f"asyncdsl split_k={splits} bn={bn} bk={bk} stages={stages}"
                    + (" cluster=2 share=a" if pair == 2 else ""))
            contenders[name] = on_torch_stream(
                name, lambda c, kernel=kernel, bn=bn, bk=bk, splits=splits, stages=stages, flags=flags: (
                    kernel(a, b, c, partial, flags, CTAS=sms // 2 * 2, SPLIT_K=splits, BN=bn, BK=bk,
                           STAGES=stages)))
    for config in configs:
        name = "asyncdsl " + " ".join(f"{key.lower()}={value}" for key, value in config.items())
        pair = config.get("CLUSTER", 1) == 2
        if config.get("CONSUMERS") == 1:
            kernel = matmul_narrow_2cta if pair else matmul_narrow
        else:
            kernel = matmul_2cta if pair else matmul
        if config.get("SCHEDULE") == "pingpong":
            kernel = matmul_pingpong
        constexprs = {key: value for key, value in config.items()
                      if key not in ("CLUSTER", "SCHEDULE", "CONSUMERS")}
        contenders[name] = on_torch_stream(
            name,
            lambda c, kernel=kernel, constexprs=constexprs: kernel(a, b, c, CTAS=sms // 2 * 2, **constexprs))
    # What a user gets: the host function with the configuration it picks itself.
    chosen = "asyncdsl.kernels.gemm"
    contenders[chosen] = on_torch_stream(chosen, lambda c: K.gemm(a, b, out=c))
    # The same with its configuration timed among `candidates` on the first call (before the timing).
    tuned = "asyncdsl.kernels.gemm(tune=True)"
    contenders[tuned] = on_torch_stream(tuned, lambda c: K.gemm(a, b, out=c, tune=True))
    for check in checks:
        check()
    torch.cuda.synchronize()
    if 2 * m * n * k < DEVICE_TIMED_FLOPS:
        timing = ("device: CUDA events around single launches after a cache flush, median of "
                  f"{DEVICE_ROUNDS} rounds in which the contenders take turns (Mosaic: CUPTI)")
        times = rounds_of_gpu_ms(
            {name: run for name, (run, _) in contenders.items() if name != "mosaic pallas"},
            rounds=DEVICE_ROUNDS, rep=device_ms, before_round=rotation.advance)
        if "mosaic pallas" in contenders:
            from mosaic_peer import mosaic_matmul_ms

            times["mosaic pallas"] = mosaic_matmul_ms(m, n, k)
    else:
        timing = (f"wall clock of {launches} launches in a row, contenders taking turns, median "
                  f"of {rounds} rounds")
        times = interleaved_ms(contenders, rounds, launches, before_round=rotation.advance)
    tflops = {name: _tflops(m, n, k, ms) for name, ms in times.items()}
    errors = {name: _relative_error(c, exact) for name, c in outputs.items()}
    sweep = {name: value for name, value in tflops.items() if name.startswith("asyncdsl ")}
    best = max(sweep, key=sweep.get) if sweep else None
    row = {name: value for name, value in tflops.items() if name not in sweep}
    row["asyncdsl"] = row.pop("asyncdsl.kernels.gemm")
    row["asyncdsl tuned"] = row.pop("asyncdsl.kernels.gemm(tune=True)")
    peers = max(v for key, v in row.items() if key in ("cuBLAS (torch)", "mosaic pallas"))
    from asyncdsl.kernels.gemm_choice import plan

    return {"TFLOP/s": row, "asyncdsl sweep TFLOP/s": sweep, "best config": best, "timing": timing,
            "asyncdsl's own choice": repr(plan(m, n, k, sms // 2 * 2)),
            "ratio to max(cuBLAS, mosaic)": row["asyncdsl"] / peers,
            "ratio to cuBLAS": row["asyncdsl"] / row["cuBLAS (torch)"],
            "ratio to cuBLAS, tuned": row["asyncdsl tuned"] / row["cuBLAS (torch)"],
            "relative error vs float32": errors}


def plot_ratios(json_path: Path) -> Path | None:
    """One picture of a table run: each contender's TFLOP/s over cuBLAS's, per shape."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    payload = json.loads(Path(json_path).read_text())
    shapes = list(payload["details"])
    rows = [payload["details"][s]["TFLOP/s"] for s in shapes]
    # The contenders that ran (a run without JAX has no Mosaic figures: no empty legend entry).
    names = [name for name in ("asyncdsl", "mosaic pallas", "triton") if any(name in row for row in rows)]
    figure, axis = plt.subplots(figsize=(11, 4.5))
    for offset, name in enumerate(names):
        ratios = [row.get(name, 0) / row["cuBLAS (torch)"] for row in rows]
        width = 0.8 / len(names)
        axis.bar([i + (offset - (len(names) - 1) / 2) * width for i in range(len(shapes))], ratios,
                 width, label=name,
                 color={"asyncdsl": "tab:blue", "mosaic pallas": "tab:orange", "triton": "tab:gray"}[name])
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(range(len(shapes)))
    axis.set_xticklabels(shapes, rotation=60, ha="right", fontsize=7)
    axis.set_ylabel("TFLOP/s / cuBLAS (same run)")
    axis.legend(fontsize=8)
    axis.set_title(f"bf16 GEMM on {payload.get('gpu', 'the GPU')}, {payload.get('date', '')}", fontsize=10)
    figure.tight_layout()
    png = Path(json_path).with_name(Path(json_path).stem + "-ratios.png")
    figure.savefig(png, dpi=110)
    return png


def main(argv: list[str]) -> None:
    table = "--table" in argv or "--table-small" in argv
    given = [tuple(int(x) for x in s.split("x")) for s in argv if not s.startswith("--")]
    shapes = given or SHAPES
    whole_table = table and not given  # the geometric mean and the row count cover the whole table
    if whole_table:
        small = "--table-small" in argv  # only the device-timed rows
        shapes = [s for s in TABLE if not small or 2 * math.prod(s) < DEVICE_TIMED_FLOPS]
    payload: dict = {"unit": "TFLOP/s"}
    details = {}
    for m, n, k in shapes:
        name = f"{m}x{n}x{k}"
        configs = () if "--no-sweep" in argv else TABLE_CONFIGS if table else CONFIGS
        details[name] = (measure(m, n, k, configs, rounds=5, launches=10, device_ms=30) if table
                         else measure(m, n, k, configs))
        payload[f"{name} (TFLOP/s)"] = {**details[name]["TFLOP/s"], **details[name]["asyncdsl sweep TFLOP/s"]}
        row = details[name]["TFLOP/s"]
        print(name, " ".join(f"{key}={value:.0f}" for key, value in row.items()),
              f"asyncdsl/cuBLAS={details[name]['ratio to cuBLAS']:.3f}", flush=True)
    payload["details"] = details
    if whole_table:
        ratios = [d["ratio to cuBLAS"] for d in details.values()]
        payload["geometric mean of asyncdsl / cuBLAS"] = math.prod(ratios) ** (1 / len(ratios))
        payload["rows at >= 0.95x cuBLAS"] = sum(r >= 0.95 for r in ratios)
        tuned = [d["ratio to cuBLAS, tuned"] for d in details.values()]
        payload["geometric mean of asyncdsl tuned / cuBLAS"] = math.prod(tuned) ** (1 / len(tuned))
    kind = ("matmul_table_small" if "--table-small" in argv else "matmul_table") if whole_table else (
        "matmul_table_rows" if table else "matmul")
    path = write_result(kind, payload)
    plot_result(path)
    if table:
        plot_ratios(path)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
