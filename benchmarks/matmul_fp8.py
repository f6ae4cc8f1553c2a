"""fp8 (e4m3) matrix multiply with per-row scales, bf16 out, against torch._scaled_mm (cuBLASLt's
fp8 GEMM with row-wise scales) in one run, on random inputs; timed as `matmul.py` times its
large problems (launches in a row, contenders taking turns).  TFLOP/s = 2·M·N·K / time.

    python benchmarks/matmul_fp8.py [MxNxK ...]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import interleaved_ms, plot_result, write_result  # noqa: E402

SHAPES = ((8192, 8192, 8192), (8192, 14336, 4096), (8192, 4096, 14336), (2048, 128256, 4096))


def measure(m: int, n: int, k: int) -> dict:
    import torch

    from asyncdsl.examples.matmul_fp8 import matmul_fp8
    from asyncdsl.runtime import device_facts

    sms = device_facts(0).multiprocessor_count
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)  # (N, K): K contiguous, as both take it
    a_scale = torch.rand(m, device="cuda") + 0.5
    b_scale = torch.rand(n, device="cuda") + 0.5
    outputs = {name: torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
               for name in ("torch", "asyncdsl")}

    def scaled_mm():
        outputs["torch"].copy_(torch._scaled_mm(a, b.t(), scale_a=a_scale[:, None], scale_b=b_scale[None, :],
                                                out_dtype=torch.bfloat16))

    contenders = {
        "torch._scaled_mm": (scaled_mm, torch.cuda.synchronize),
        "asyncdsl": (lambda: matmul_fp8(a, b, a_scale, b_scale, outputs["asyncdsl"], CTAS=sms),
                     torch.cuda.synchronize),
    }
    times = interleaved_ms(contenders, rounds=7, launches=20)
    exact = (a.float() @ b.float().t()) * a_scale[:, None] * b_scale[None, :]
    errors = {name: float((out.float() - exact).norm() / exact.norm()) for name, out in outputs.items()}
    tflops = {name: 2 * m * n * k / ms / 1e9 for name, ms in times.items()}
    return {"TFLOP/s": tflops, "ratio to torch._scaled_mm": tflops["asyncdsl"] / tflops["torch._scaled_mm"],
            "relative error vs float32": errors}


def main(argv: list[str]) -> None:
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv] or SHAPES
    payload: dict = {"unit": "TFLOP/s"}
    details = {}
    for m, n, k in shapes:
        name = f"{m}x{n}x{k}"
        details[name] = measure(m, n, k)
        payload[f"{name} (TFLOP/s)"] = details[name]["TFLOP/s"]
        print(name, {key: round(v) for key, v in details[name]["TFLOP/s"].items()},
              f"ratio={details[name]['ratio to torch._scaled_mm']:.3f}", flush=True)
    payload["details"] = details
    path = write_result("matmul_fp8", payload)
    plot_result(path)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
