"""fp8 (e4m3) matrix multiply with per-row scales, bf16 out, against torch._scaled_mm (cuBLASLt's
fp8 GEMM with row-wise scales) in one run, on random inputs, over 8192^3 and the LLM shapes of
`matmul.py`'s table.  TFLOP/s = 2·M·N·K / time.

Two forms of the peer run: `use_fast_accum=True` (the tensor cores accumulate the whole K, as
asyncdsl does without `PROMOTE`) and `use_fast_accum=False` (torch's default: cuBLASLt adds the
tensor cores' partial sums into float32 every few steps, as asyncdsl does with it).  Against each,
the fastest asyncdsl configuration whose relative error against a float64 reference is at most
1.5 times the peer's on the same inputs (the bar of correctness), whatever its numerics; each
ratio comes with the ratio of the errors.  Every contender writes into a preallocated output
(`out=`): no copy is timed.  Problems under `matmul.DEVICE_TIMED_FLOPS` are timed on the device,
one launch after an L2 flush; larger ones as `matmul.py` times them (launches in a row,
contenders taking turns).  Every problem tries 128 x 256 tiles alone and in CTA pairs sharing b;
ping-pong consumers on 128 x 128 tiles (walked in bands of 8, 16 and 32 rows of tiles, and in
pairs) and on 128 x 64 tiles; 128 x 192 tiles promoted every 4 and 16 slices of K and 128 x 128
ones every 16 and 32.  Problems with fewer 128 x 256 tiles than SMs also try narrower tiles
(128 x 128, 128 x 64), with and without `EVICT_FIRST="b"`, and promoted every 16 slices.

    python benchmarks/matmul_fp8.py [MxNxK ...]
"""

from __future__ import annotations

import importlib
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import OutputRotation, interleaved_ms, plot_result, rounds_of_gpu_ms, write_result  # noqa: E402
from matmul import DEVICE_ROUNDS, DEVICE_TIMED_FLOPS, OUTPUT_BUFFERS  # noqa: E402

LLM_SHAPES = tuple((m, n, k) for m, (n, k) in itertools.product(
    (128, 512, 2048, 8192), ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))))
SHAPES = ((8192, 8192, 8192), *LLM_SHAPES)
# CLUSTER 2: in CTA pairs sharing b (`matmul_fp8_2cta`, `matmul_fp8_pingpong_2cta`); SCHEDULE
# "pingpong": `matmul_fp8_pingpong`; PROMOTE: sums of that many K slices added into float32.
CONFIGS = ({"BN": 256, "STAGES": 4}, {"BN": 256, "STAGES": 4, "CLUSTER": 2}, {"SCHEDULE": "pingpong"},
           {"SCHEDULE": "pingpong", "CLUSTER": 2}, {"SCHEDULE": "pingpong", "BN": 64, "STAGES": 8},
           *({"SCHEDULE": "pingpong", "SNAKE": snake} for snake in (8, 32)),
           *({"BN": 192, "STAGES": 4, "PROMOTE": promote} for promote in (4, 16)),
           *({"BN": 128, "STAGES": 6, "PROMOTE": promote} for promote in (16, 32)))
FEW_TILES_CONFIGS = (*({"BN": bn, "STAGES": stages, "EVICT_FIRST": evict}
                       for bn, stages in ((128, 6), (64, 8)) for evict in ("", "b")),
                     *({"BN": bn, "STAGES": stages, "PROMOTE": 16, "EVICT_FIRST": "b"}
                       for bn, stages in ((128, 6), (64, 8))))
PEERS = {"torch._scaled_mm fast_accum": True, "torch._scaled_mm": False}  # name: use_fast_accum
# an asyncdsl configuration counts against a peer if its error is at most this times the peer's
ERROR_BAR = 1.5


def measure(m: int, n: int, k: int) -> dict:
    import torch

    fp8 = importlib.import_module("asyncdsl.kernels.gemm_fp8")
    from asyncdsl.runtime import device_facts

    sms = device_facts(0).multiprocessor_count
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)  # (N, K): K contiguous, as both take it
    a_scale = torch.rand(m, device="cuda") + 0.5
    b_scale = torch.rand(n, device="cuda") + 0.5
    # Timed launches write the rotation's buffers; each contender also writes once into its own
    # poisoned output, checked.
    rotation = OutputRotation(lambda: torch.empty((m, n), device="cuda", dtype=torch.bfloat16),
                              OUTPUT_BUFFERS)
    outputs, launchers = {}, {}

    for name, fast in PEERS.items():
        launchers[name] = lambda c, fast=fast: torch._scaled_mm(
            a, b.t(), scale_a=a_scale[:, None], scale_b=b_scale[None, :], out_dtype=torch.bfloat16,
            use_fast_accum=fast, out=c)
    configs = CONFIGS
    if -(-m // 128) * -(-n // 256) < sms:  # too few tiles for the SMs: narrower tiles too
        configs = (*configs, *FEW_TILES_CONFIGS)
    for config in configs:
        name = ("asyncdsl "
                + " ".join(f"{key.lower()}={value}" for key, value in config.items() if value != ""))
        pairs = config.get("CLUSTER") == 2
        kernel = ((fp8.matmul_fp8_pingpong_2cta if pairs else fp8.matmul_fp8_pingpong)
                  if config.get("SCHEDULE") == "pingpong" else fp8.matmul_fp8_2cta if pairs
                  else fp8.matmul_fp8)
        constexprs = {key: value for key, value in config.items() if key not in ("CLUSTER", "SCHEDULE")}
        ctas = sms // 2 * 2 if pairs else sms
        launchers[name] = lambda c, kernel=kernel, ctas=ctas, constexprs=constexprs: kernel(
            a, b, a_scale, b_scale, c, CTAS=ctas, **constexprs)
    for name, launch in launchers.items():
        outputs[name] = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        launch(outputs[name])
    torch.cuda.synchronize()
    if 2 * m * n * k < DEVICE_TIMED_FLOPS:
        timing = ("device: CUDA events around single launches after a cache flush, median of "
                  f"{DEVICE_ROUNDS} rounds")
        times = rounds_of_gpu_ms(
            {name: lambda launch=launch: launch(rotation.current) for name, launch in launchers.items()},
            rounds=DEVICE_ROUNDS, rep=30, before_round=rotation.advance)
    else:
        timing = "wall clock of 20 launches in a row, contenders taking turns, median of 7 rounds"
        times = interleaved_ms({name: (lambda launch=launch: launch(rotation.current), torch.cuda.synchronize)
                                for name, launch in launchers.items()}, rounds=7, launches=20,
                               before_round=rotation.advance)
    exact = (a.double() @ b.double().t()) * a_scale.double()[:, None] * b_scale.double()[None, :]
    errors = {name: float((out.double() - exact).norm() / exact.norm()) for name, out in outputs.items()}
    tflops = {name: 2 * m * n * k / ms / 1e9 for name, ms in times.items()}
    return compare(tflops, errors) | {"timing": timing}


def compare(tflops: dict[str, float], errors: dict[str, float]) -> dict:
    """Each peer form against the fastest asyncdsl configuration whose error is at most
    `ERROR_BAR` times the peer's: speeds, the configuration, the ratio of speeds and of errors
    (no configuration within the bar: a ratio of 0 and no configuration)."""
    sweep = {name: value for name, value in tflops.items() if name.startswith("asyncdsl")}
    result = {"TFLOP/s": {}, "asyncdsl sweep TFLOP/s": sweep, "best config": {}, "ratio": {},
              "error ratio": {}, "relative error vs float64": errors}
    for peer in PEERS:
        pair = f"asyncdsl / {peer}"
        result["TFLOP/s"][peer] = tflops[peer]
        within = {name: value for name, value in sweep.items() if errors[name] <= ERROR_BAR * errors[peer]}
        best = max(within, key=within.get, default=None)
        result["best config"][pair] = best
        result["TFLOP/s"][f"asyncdsl (against {peer})"] = within.get(best, 0.0)
        result["ratio"][pair] = within.get(best, 0.0) / tflops[peer]
        result["error ratio"][pair] = errors[best] / errors[peer] if best else None
    return result


def main(argv: list[str]) -> None:
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv] or SHAPES
    payload: dict = {"unit": "TFLOP/s"}
    details = {}
    for m, n, k in shapes:
        name = f"{m}x{n}x{k}"
        details[name] = measure(m, n, k)
        payload[f"{name} (TFLOP/s)"] = details[name]["TFLOP/s"]
        print(name, {key: round(v) for key, v in details[name]["TFLOP/s"].items()},
              {key: f"{value:.3f}" for key, value in details[name]["ratio"].items()},
              "errors:",
              {key: value and f"{value:.2f}" for key, value in details[name]["error ratio"].items()},
              details[name]["best config"], flush=True)
    payload["details"] = details
    if not argv:
        for pair in next(iter(details.values()))["ratio"]:
            ratios = [d["ratio"][pair] for d in details.values()]
            payload[f"lowest {pair}"] = min(ratios)
            payload[f"rows at >= 1.0x, {pair}"] = sum(r >= 1.0 for r in ratios)
    path = write_result("matmul_fp8", payload)
    plot_result(path)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
