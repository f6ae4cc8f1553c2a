"""Attention backward (bf16, (B, H, S, D)), `asyncdsl.kernels.attention_backward(q, k, v, o, lse,
do, causal=)`, default and `deterministic=True`, against torch's scaled_dot_product_attention
backward with the cuDNN backend (and the flash backend where it runs), in one run, on the same
random normal inputs, causal and not: the forward's 8 rows.  TFLOP/s = 10·B·H·S²·D (halved when
causal: five products of the forward's two sizes) / time per call, taken as `attention.py` takes
it: the wall time of launches in a row, the contenders taking turns in a random order
(`common.interleaved_ms`).  torch's time is its backward alone (`torch.autograd.grad` of a kept
forward graph); the library's is its host function, the δ and dq conversion kernels included.

Errors are the largest absolute differences of dq, dk, dv from float64 gradients of the first
head of batch 0 computed on the GPU.

    python benchmarks/attention_backward.py [BxHxSxD ...]
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import interleaved_ms, plot_result, write_result  # noqa: E402

# (B, H, S, D): the forward benchmark's rows.
SHAPES = ((16, 16, 4096, 128), (4, 32, 8192, 128), (8, 16, 16384, 64), (8, 8, 4096, 256))


def float64_head(q, k, v, do, causal: bool):
    """dq, dk, dv of head 0 of batch 0 in float64."""
    import torch

    q64, k64, v64 = (x[0, 0].double().requires_grad_() for x in (q, k, v))
    logits = q64 @ k64.T / math.sqrt(q.shape[-1])
    if causal:
        logits = logits.masked_fill(torch.ones_like(logits, dtype=torch.bool).triu(1), float("-inf"))
    (torch.softmax(logits, dim=-1) @ v64).backward(do[0, 0].double())
    return q64.grad, k64.grad, v64.grad


def measure(shape: tuple[int, int, int, int], causal: bool) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import asyncdsl.kernels as K

    b, h, s, d = shape
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    contenders, gradients = {}, {}
    for name, backend in (("torch SDPA cuDNN", SDPBackend.CUDNN_ATTENTION),
                          ("torch SDPA flash", SDPBackend.FLASH_ATTENTION)):
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        try:
            with sdpa_kernel([backend]):
                out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
                gradients[name] = torch.autograd.grad(out, leaves, do, retain_graph=True)
            torch.cuda.synchronize()
        except RuntimeError as error:  # a backend that does not take this shape on this GPU
            print(f"{name} unavailable for {shape}: {str(error).splitlines()[0][:160]}")
            continue

        def backward(out=out, leaves=leaves):
            return torch.autograd.grad(out, leaves, do, retain_graph=True)
        contenders[name] = (backward, torch.cuda.synchronize)
    o, lse = K.attention(q, k, v, causal=causal)
    for name, deterministic in (("asyncdsl", False), ("asyncdsl deterministic", True)):
        def ours(deterministic=deterministic):
            return K.attention_backward(q, k, v, o, lse, do, causal=causal, deterministic=deterministic)
        gradients[name] = ours()
        contenders[name] = (ours, torch.cuda.synchronize)
    times = interleaved_ms(contenders, rounds=5, launches=10)
    flops = 10 * b * h * s * s * d / (2 if causal else 1)
    exact = float64_head(q, k, v, do, causal)
    errors = {name: {axis: float((grad[0, 0].double() - wanted).abs().max())
                     for axis, grad, wanted in zip(("dq", "dk", "dv"), found, exact)}
              for name, found in gradients.items()}
    tflops = {name: flops / ms / 1e9 for name, ms in times.items()}
    row = {"TFLOP/s": tflops, "max abs error vs float64 (head 0)": errors}
    if "asyncdsl" in tflops and "torch SDPA cuDNN" in tflops:
        row["ratio to cuDNN"] = tflops["asyncdsl"] / tflops["torch SDPA cuDNN"]
        row["deterministic cost"] = times["asyncdsl deterministic"] / times["asyncdsl"] - 1
    return row


def main(argv: list[str]) -> None:
    shapes = [tuple(int(x) for x in a.split("x")) for a in argv] or SHAPES
    payload: dict = {"unit": "TFLOP/s"}
    details = {}
    ratios, costs = [], []
    for shape in shapes:
        for causal in (False, True):
            name = "x".join(map(str, shape)) + (" causal" if causal else "")
            row = details[name] = measure(shape, causal)
            payload[f"{name} (TFLOP/s)"] = row["TFLOP/s"]
            if "ratio to cuDNN" in row:
                ratios.append(row["ratio to cuDNN"])
                costs.append(row["deterministic cost"])
            print(name, {k: round(v) for k, v in row["TFLOP/s"].items()},
                  *(f"ratio={row['ratio to cuDNN']:.3f} deterministic cost={row['deterministic cost']:+.1%}",)
                  if "ratio to cuDNN" in row else (),
                  {k: {a: f"{e:.1e}" for a, e in v.items()} for k, v in
                   row["max abs error vs float64 (head 0)"].items()}, flush=True)
    if ratios:
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        payload["asyncdsl / cuDNN, geometric mean over the rows"] = geomean
        payload["deterministic mode's largest cost"] = max(costs)
        print(f"geometric mean ratio to cuDNN: {geomean:.3f}; deterministic cost at most {max(costs):+.1%}")
    payload["details"] = details
    path = write_result("attention_backward", payload)
    plot_result(path)


if __name__ == "__main__":
    main(sys.argv[1:])
