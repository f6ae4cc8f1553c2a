"""Attention forward (bf16, (B, H, S, D)), `asyncdsl.kernels.attention(q, k, v, causal=)`, against
torch's scaled_dot_product_attention with each backend it has on the GPU (cuDNN, flash) and JAX
Mosaic GPU's Pallas attention (`attention_mgpu`, the fastest of a few configurations), in one
run, on the same random normal inputs, causal and not.  TFLOP/s = 4·B·H·S²·D (halved when
causal) / time per call, taken as `matmul.py` takes it: the wall time of launches in a row, the
contenders taking turns in a random order (`common.interleaved_ms`).

Errors are measured against float64 attention computed on the GPU for a sample of query rows
(the first and last 64 of a few heads: the last ones see every key when causal), the largest
absolute difference over them.

    python benchmarks/attention.py [BxHxSxD ...]
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import interleaved_ms, plot_result, write_result  # noqa: E402

# (B, H, S, D): batch·heads of 16·16, 4·32, 8·16 and 8·8.
SHAPES = ((16, 16, 4096, 128), (4, 32, 8192, 128), (8, 16, 16384, 64), (8, 8, 4096, 256))
SAMPLE_HEADS = 3
SAMPLE_ROWS = 64


def float64_rows(q, k, v, causal: bool, rows: list[int]):
    """Attention in float64 for the query rows `rows` of the first SAMPLE_HEADS heads of batch 0."""
    import torch

    qs = q[0, :SAMPLE_HEADS, rows].double()
    ks, vs = k[0, :SAMPLE_HEADS].double(), v[0, :SAMPLE_HEADS].double()
    logits = qs @ ks.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        keys = torch.arange(k.shape[2], device=q.device)
        logits = logits.masked_fill(keys[None, None, :] > torch.tensor(rows, device=q.device)[None, :, None],
                                    float("-inf"))
    return torch.softmax(logits, dim=-1) @ vs


def measure(shape: tuple[int, int, int, int], causal: bool) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import asyncdsl.kernels as K

    b, h, s, d = shape
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    outputs = {}
    contenders = {}
    for name, backend in (("torch SDPA cuDNN", SDPBackend.CUDNN_ATTENTION),
                          ("torch SDPA flash", SDPBackend.FLASH_ATTENTION)):
        def sdpa(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        try:
            outputs[name] = sdpa()  # timed below without keeping (or copying) the output
            torch.cuda.synchronize()
        except RuntimeError as error:  # a backend that does not take this shape on this GPU
            print(f"{name} unavailable for {shape}: {str(error).splitlines()[0][:160]}")
            del outputs[name]
            continue
        contenders[name] = (sdpa, torch.cuda.synchronize)
    # What a user gets: the library's host function, allocating o and lse each call as SDPA does.
    contenders["asyncdsl"] = (lambda: K.attention(q, k, v, causal=causal), torch.cuda.synchronize)
    mosaic = None
    try:
        from mosaic_attention_peer import mosaic_attention_runner

        mosaic = mosaic_attention_runner(q, k, v, causal)
    except Exception as error:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
        print(f"mosaic attention peer failed: {type(error).__name__}: {error}")
    if mosaic is not None:
        run, wait, mosaic_output, mosaic_config = mosaic
        contenders["mosaic pallas"] = (run, wait)
    times = interleaved_ms(contenders, rounds=5, launches=10)
    outputs["asyncdsl"], _ = K.attention(q, k, v, causal=causal)
    if mosaic is not None:
        outputs["mosaic pallas"] = mosaic_output()
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    rows = [*range(SAMPLE_ROWS), *range(s - SAMPLE_ROWS, s)]
    exact = float64_rows(q, k, v, causal, rows)
    errors = {name: float((out[0, :SAMPLE_HEADS, rows].double() - exact).abs().max())
              for name, out in outputs.items()}
    tflops = {name: flops / ms / 1e9 for name, ms in times.items()}
    best_peer = max(value for name, value in tflops.items() if name != "asyncdsl")
    return {"TFLOP/s": tflops, "ratio to the best peer": tflops["asyncdsl"] / best_peer,
            "max abs error vs float64 (sampled rows)": errors,
            **({"mosaic configuration": mosaic_config} if mosaic is not None else {})}


def main(argv: list[str]) -> None:
    shapes = [tuple(int(x) for x in a.split("x")) for a in argv] or SHAPES
    payload: dict = {"unit": "TFLOP/s"}
    details = {}
    ratios = []
    for shape in shapes:
        for causal in (False, True):
            name = "x".join(map(str, shape)) + (" causal" if causal else "")
            row = details[name] = measure(shape, causal)
            payload[f"{name} (TFLOP/s)"] = row["TFLOP/s"]
            ratios.append(row["ratio to the best peer"])
            print(name, {k: round(v) for k, v in row["TFLOP/s"].items()},
                  f"ratio={row['ratio to the best peer']:.3f}",
                  {k: f"{v:.1e}" for k, v in row["max abs error vs float64 (sampled rows)"].items()},
                  flush=True)
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    payload["asyncdsl / best peer, geometric mean over the rows"] = geomean
    payload["details"] = details
    print(f"geometric mean ratio to the best peer: {geomean:.3f}")
    path = write_result("attention", payload)
    plot_result(path)


if __name__ == "__main__":
    main(sys.argv[1:])
