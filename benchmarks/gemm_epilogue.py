"""GEMM + bias + GELU into bf16, fused in one asyncdsl kernel (`asyncdsl.kernels.gemm_bias_activation`,
the configuration it picks itself) against torch's `addmm` followed by `gelu` (cuBLAS, then an
elementwise kernel) and `torch.compile(mode="max-autotune")` of the same function, in one run.
GELU is the tanh form for all three.  TFLOP/s counts the product only: 2·M·N·K / time.

Times as `benchmarks/matmul.py` takes them: the wall time of 20 launches in a row, median of 7
rounds in which the contenders take turns (`common.interleaved_ms`); the error of each against
float64, measured once before the timing.

    python benchmarks/gemm_epilogue.py [MxNxK ...]     # default: 8192^3 and 4096x14336x4096
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import interleaved_ms, relative_error, shape_arguments, tflops, write_result  # noqa: E402

SHAPES = ((8192, 8192, 8192), (4096, 14336, 4096))


def measure(m: int, n: int, k: int, rounds: int = 7, launches: int = 20) -> dict:
    import torch

    import asyncdsl.kernels as K

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)

    def eager():
        return torch.nn.functional.gelu(torch.addmm(bias, a, b), approximate="tanh")

    compiled = torch.compile(eager, mode="max-autotune")
    exact = torch.nn.functional.gelu(a.double() @ b.double() + bias.double(), approximate="tanh")
    runs = {"torch addmm + gelu": eager, "torch.compile max-autotune": compiled,
            "asyncdsl": lambda: K.gemm_bias_activation(a, b, bias, "gelu")}
    errors = {name: relative_error(run(), exact) for name, run in runs.items()}
    contenders = {name: (run, torch.cuda.synchronize) for name, run in runs.items()}
    speed = tflops(2 * m * n * k, interleaved_ms(contenders, rounds, launches))
    return {"TFLOP/s": speed, "relative error vs float64": errors,
            "ratio to torch addmm + gelu": speed["asyncdsl"] / speed["torch addmm + gelu"],
            "ratio to torch.compile": speed["asyncdsl"] / speed["torch.compile max-autotune"]}


def main(argv: list[str]) -> int:
    results = {}
    for m, n, k in shape_arguments(argv, SHAPES):
        results[f"{m}x{n}x{k}"] = row = measure(m, n, k)
        print(f"{m}x{n}x{k}: " + ", ".join(f"{name} {value:.0f}" for name, value in row["TFLOP/s"].items())
              + f" TFLOP/s; {row['ratio to torch addmm + gelu']:.2f}x addmm+gelu, "
              f"{row['ratio to torch.compile']:.2f}x torch.compile")
    write_result("gemm_epilogue", {"GEMM + bias + GELU (bf16)": results})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
