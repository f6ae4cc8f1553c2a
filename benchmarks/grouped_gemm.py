"""Grouped GEMM for mixture-of-experts (bf16, the groups' row ends on the device) against
`torch._grouped_mm` (CUTLASS's grouped GEMM on SM90) in one run, on random inputs: groups x rows
a group x N x K, the groups even or uneven with the same total (sizes drawn from a Zipf law, some
groups empty).  TFLOP/s = 2·(total rows)·N·K / time.

Every contender writes into preallocated outputs (no copy timed) and once into a NaN-poisoned one,
checked against float64 over the groups' rows.  Timed on the device, one launch after an L2 flush,
median of rounds, contenders in turns; the ratio of asyncdsl's uneven time to its even time is
the cost of the imbalance.

    python benchmarks/grouped_gemm.py [GxRxNxK ...]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import OutputRotation, rounds_of_gpu_ms, write_result  # noqa: E402
from matmul import DEVICE_ROUNDS, OUTPUT_BUFFERS  # noqa: E402

SHAPES = ((8, 4096, 7168, 2048), (4, 8192, 4096, 7168), (128, 256, 768, 2048))


def uneven(groups: int, rows: int, seed: int = 0) -> list[int]:
    """groups sizes summing to groups·rows, drawn from a Zipf law (a few large groups), an eighth
    of them (at least one) empty, in a random order, each a multiple of 16 rows (the alignment
    torch's grouped GEMM may ask of its offsets)."""
    import numpy as np

    weights = 1.0 / np.arange(1, groups + 1) ** 1.2
    weights[-max(1, groups // 8):] = 0
    sizes = np.floor(weights / weights.sum() * groups * rows / 16).astype(int) * 16
    sizes[0] += groups * rows - sizes.sum()
    np.random.default_rng(seed).shuffle(sizes)
    return sizes.tolist()


def measure(groups: int, rows: int, n: int, k: int) -> dict:
    import numpy as np
    import torch

    import asyncdsl.kernels as K

    total = groups * rows
    a = torch.randn(total, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(groups, k, n, device="cuda").to(torch.bfloat16)
    rotation = OutputRotation(lambda: torch.empty((total, n), device="cuda", dtype=torch.bfloat16),
                              OUTPUT_BUFFERS)
    result: dict = {"TFLOP/s": {}, "relative error vs float64": {}}
    for routing, sizes in (("even", [rows] * groups), ("uneven", uneven(groups, rows))):
        offsets = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
        launchers = {f"asyncdsl {routing}": lambda c, offsets=offsets: K.grouped_gemm(a, b, offsets, out=c)}
        if hasattr(torch, "_grouped_mm"):  # no out=: its own output each call (the caching allocator's)
            launchers[f"torch._grouped_mm {routing}"] = lambda c, offsets=offsets: torch._grouped_mm(
                a, b, offs=offsets)
        exact = torch.empty(total, n, device="cuda", dtype=torch.float64)
        first = 0
        for g, end in enumerate(np.cumsum(sizes).tolist()):
            exact[first:end] = a[first:end].double() @ b[g].double()
            first = end
        for name, launch in launchers.items():
            out = torch.full((total, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            produced = launch(out)
            out = produced if produced is not None else out
            torch.cuda.synchronize()
            result["relative error vs float64"][name] = float((out.double() - exact).norm() / exact.norm())
        times = rounds_of_gpu_ms({name: lambda launch=launch: launch(rotation.current)
                                  for name, launch in launchers.items()},
                                 rounds=DEVICE_ROUNDS, rep=30, before_round=rotation.advance)
        result["TFLOP/s"] |= {name: 2 * total * n * k / ms / 1e9 for name, ms in times.items()}
        result[f"sizes {routing}"] = sizes
    flops = result["TFLOP/s"]
    result["ratio"] = {routing: flops[f"asyncdsl {routing}"] / flops[f"torch._grouped_mm {routing}"]
                       for routing in ("even", "uneven") if f"torch._grouped_mm {routing}" in flops}
    result["uneven / even time (asyncdsl)"] = flops["asyncdsl even"] / flops["asyncdsl uneven"]
    result["timing"] = ("device: CUDA events around single launches after a cache flush, median of "
                        f"{DEVICE_ROUNDS} rounds")
    return result


def main(argv: list[str]) -> None:
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv] or SHAPES
    payload: dict = {"unit": "TFLOP/s"}
    details = {}
    for shape in shapes:
        name = "x".join(map(str, shape))
        details[name] = result = measure(*shape)
        payload[f"{name} (TFLOP/s)"] = result["TFLOP/s"]
        print(name, {key: round(value) for key, value in result["TFLOP/s"].items()},
              {key: f"{value:.3f}" for key, value in result["ratio"].items()},
              f"uneven/even {result['uneven / even time (asyncdsl)']:.3f}", flush=True)
    payload["details"] = details
    print(write_result("grouped_gemm", payload))


if __name__ == "__main__":
    main(sys.argv[1:])
