"""Grouped GEMM for mixture-of-experts (the groups' row ends on the device) in one run, on random
inputs: bf16 against `torch._grouped_mm` (CUTLASS's grouped GEMM on SM90), block-scaled fp8
against `torch._scaled_grouped_mm` (rowwise scales: torch has no block-scaled grouped GEMM, so
it stands in for speed, not for the same numbers).  Shapes are groups x rows a group x N x K, the
groups even or uneven with the same total (sizes drawn from a Zipf law, some groups empty).
TFLOP/s = 2·(total rows)·N·K / time.

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

from common import OutputRotation, TflopsTable, poisoned_outputs, relative_error, rotated_ms  # noqa: E402
from common import shape_arguments, tflops  # noqa: E402
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

    total, kb = groups * rows, -(-k // 128)
    a = torch.randn(total, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(groups, k, n, device="cuda").to(torch.bfloat16)
    a8 = torch.randn(total, k, device="cuda").to(torch.float8_e4m3fn)
    b8 = torch.randn(groups, n, k, device="cuda").to(torch.float8_e4m3fn)  # K-major, as both take it
    a_scales = (torch.rand(kb, total, device="cuda") + 0.5).t()
    b_scales = torch.rand(groups, n // 128, kb, device="cuda") + 0.5
    row_scales, column_scales = a_scales.mean(1).contiguous(), b_scales.mean(2).repeat_interleave(128, 1)
    a_wide = a8.double() * a_scales.double().repeat_interleave(128, 1)[:, :k]
    b_wide = b8.double() * b_scales.double().repeat_interleave(128, 1).repeat_interleave(128, 2)[:, :, :k]
    rotation = OutputRotation(lambda: torch.empty((total, n), device="cuda", dtype=torch.bfloat16),
                              OUTPUT_BUFFERS)
    result: dict = {"TFLOP/s": {}, "relative error vs float64": {},
                    "fp8 peer": "torch._scaled_grouped_mm with a scale a row of a and of b[g] (rowwise: "
                                "fewer scales than the block-scaled product, not the same numbers)"}
    not_run: dict[str, str] = {}  # the peers this torch cannot run on these shapes, and why
    for routing, sizes in (("even", [rows] * groups), ("uneven", uneven(groups, rows))):
        offsets = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
        launchers = {f"asyncdsl {routing}": lambda c, offsets=offsets: K.grouped_gemm(a, b, offsets, out=c),
                     f"asyncdsl fp8 {routing}": lambda c, offsets=offsets: K.grouped_gemm_fp8_blockscaled(
                         a8, a_scales, b8, b_scales, offsets, out=c)}
        if hasattr(torch, "_grouped_mm"):  # no out=: its own output each call (the caching allocator's)
            launchers[f"torch._grouped_mm {routing}"] = lambda c, offsets=offsets: torch._grouped_mm(
                a, b, offs=offsets)
        if hasattr(torch, "_scaled_grouped_mm"):
            launchers[f"torch._scaled_grouped_mm {routing}"] = lambda c, offsets=offsets: (
                torch._scaled_grouped_mm(a8, b8.transpose(-2, -1), row_scales, column_scales, offs=offsets,
                                         out_dtype=torch.bfloat16))
        exact = {"": torch.empty(total, n, device="cuda", dtype=torch.float64)}
        exact["fp8"] = torch.empty_like(exact[""])
        first = 0
        for g, end in enumerate(np.cumsum(sizes).tolist()):
            exact[""][first:end] = a[first:end].double() @ b[g].double()
            exact["fp8"][first:end] = a_wide[first:end] @ b_wide[g].t()
            first = end
        outputs = poisoned_outputs(torch, launchers, (total, n), torch.bfloat16, not_run)
        result["relative error vs float64"] |= {
            name: relative_error(out, exact["fp8" if " fp8 " in name else ""])
            for name, out in outputs.items() if not name.startswith("torch._scaled")}
        times, result["timing"] = rotated_ms(torch, launchers, rotation, DEVICE_ROUNDS)
        result["TFLOP/s"] |= tflops(2 * total * n * k, times)
        result[f"sizes {routing}"] = sizes
    if not_run:
        result["peers not run"] = not_run
    flops = result["TFLOP/s"]
    result["ratio"] = {f"{kind}{routing}": flops[f"asyncdsl {kind}{routing}"] / flops[f"{peer} {routing}"]
                       for kind, peer in (("", "torch._grouped_mm"), ("fp8 ", "torch._scaled_grouped_mm"))
                       for routing in ("even", "uneven") if f"{peer} {routing}" in flops}
    result["uneven / even time (asyncdsl)"] = {kind or "bf16": flops[f"asyncdsl {kind}even"]
                                               / flops[f"asyncdsl {kind}uneven"] for kind in ("", "fp8 ")}
    return result


def main(argv: list[str]) -> None:
    table = TflopsTable()
    for shape in shape_arguments(argv, SHAPES):
        result = measure(*shape)
        table.add("x".join(map(str, shape)), result,
                  *({key: f"{value:.3f}" for key, value in result[entry].items()}
                    for entry in ("ratio", "uneven / even time (asyncdsl)")))
    print(table.write("grouped_gemm"))


if __name__ == "__main__":
    main(sys.argv[1:])
