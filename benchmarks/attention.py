"""Attention forward (bf16, (B, H, S, D)) against torch's scaled_dot_product_attention (its
fastest backend on the GPU: flash or cuDNN), in one run, on random normal inputs, causal and
not.  TFLOP/s = 4·B·H·S²·D (halved when causal) / time per call, taken as `matmul.py` takes
it: the wall time of launches in a row, the contenders taking turns (`common.interleaved_ms`).

    python benchmarks/attention.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import interleaved_ms, plot_result, write_result  # noqa: E402

SHAPES = ((4, 32, 4096, 128), (4, 32, 8192, 128), (4, 32, 4096, 64))


def measure(shape: tuple[int, int, int, int], causal: bool) -> dict:
    import torch
    import torch.nn.functional as F

    from asyncdsl.examples.attention import attention

    b, h, s, d = shape
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    outputs = {name: torch.full(shape, float("nan"), device="cuda", dtype=torch.bfloat16)
               for name in ("torch", "asyncdsl")}
    contenders = {
        "torch SDPA": (
            lambda: outputs["torch"].copy_(F.scaled_dot_product_attention(q, k, v, is_causal=causal)),
            torch.cuda.synchronize,
        ),
        "asyncdsl": (lambda: attention(q, k, v, outputs["asyncdsl"], CAUSAL=causal), torch.cuda.synchronize),
    }
    times = interleaved_ms(contenders, rounds=5, launches=10)
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    errors = {name: float((out.float() - reference).abs().max()) for name, out in outputs.items()}
    tflops = {name: flops / ms / 1e9 for name, ms in times.items()}
    return {"TFLOP/s": tflops, "ratio to torch SDPA": tflops["asyncdsl"] / tflops["torch SDPA"],
            "max abs error vs float32": errors}


def main() -> None:
    payload: dict = {"unit": "TFLOP/s"}
    details = {}
    for shape in SHAPES:
        for causal in (False, True):
            name = "x".join(map(str, shape)) + (" causal" if causal else "")
            details[name] = measure(shape, causal)
            payload[f"{name} (TFLOP/s)"] = details[name]["TFLOP/s"]
            row = details[name]
            print(name, {k: round(v) for k, v in row["TFLOP/s"].items()},
                  f"ratio={row['ratio to torch SDPA']:.3f}", row["max abs error vs float32"], flush=True)
    payload["details"] = details
    path = write_result("attention", payload)
    plot_result(path)
    print(path)


if __name__ == "__main__":
    main()
