"""A mixture-of-experts feed-forward layer (top-k routing, permutation by a gather, grouped gate
and up GEMMs, SwiGLU, grouped down GEMM, weighted un-permutation; bf16) built on asyncdsl's
grouped GEMM (`asyncdsl.examples.moe_layer`) against the same layer built on `torch._grouped_mm`
and torch's SwiGLU, in one run, on random inputs: the routing, gathers and sums are the same
torch code in both, so the difference is the GEMMs and the activation.  Timed on the device (the
whole layer, one call after an L2 flush, median of rounds, contenders in turns); both outputs
against a float64 reference of the layer.

    python benchmarks/moe_layer.py [TOKENSxHIDDENxFFNxEXPERTSxTOP_K ...]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import TflopsTable, relative_error, rounds_of_gpu_ms, shape_arguments, tflops  # noqa: E402
from matmul import DEVICE_ROUNDS  # noqa: E402

SHAPES = ((16384, 4096, 14336, 8, 2), (4096, 4096, 14336, 8, 2))


def torch_layer(x, w_router, w_gate, w_up, w_down, top_k: int):
    """The layer on `torch._grouped_mm`, step for step as `asyncdsl.examples.moe_layer`."""
    import torch

    logits = x.float() @ w_router.float()
    top, chosen = torch.topk(logits, top_k, dim=1)
    weights = torch.softmax(top, dim=1)
    pairs = torch.argsort(chosen.reshape(-1), stable=True)
    tokens = pairs // top_k
    offsets = torch.cumsum(torch.bincount(chosen.reshape(-1), minlength=w_gate.shape[0]), 0).to(torch.int32)
    rows = x[tokens]
    hidden = torch.nn.functional.silu(torch._grouped_mm(rows, w_gate, offs=offsets)) * torch._grouped_mm(
        rows, w_up, offs=offsets)
    out_rows = torch._grouped_mm(hidden, w_down, offs=offsets)
    weighted = out_rows.float() * weights.reshape(-1)[pairs][:, None]
    return torch.zeros(x.shape, device=x.device).index_add_(0, tokens, weighted).to(torch.bfloat16)


def reference(x, w_router, w_gate, w_up, w_down, top_k: int):
    """The layer in float64 on the GPU, expert by expert, from the same routing."""
    import torch

    top, chosen = torch.topk(x.float() @ w_router.float(), top_k, dim=1)
    weights = torch.softmax(top, dim=1).double()
    out = torch.zeros(x.shape, device=x.device, dtype=torch.float64)
    for e in range(w_gate.shape[0]):
        token, choice = torch.nonzero(chosen == e, as_tuple=True)
        rows = x[token].double()
        gate, up = rows @ w_gate[e].double(), rows @ w_up[e].double()
        out.index_add_(0, token, (torch.nn.functional.silu(gate) * up) @ w_down[e].double()
                       * weights[token, choice][:, None])
    return out


def measure(tokens: int, hidden: int, ffn: int, experts: int, top_k: int) -> dict:
    import torch

    from asyncdsl.examples.moe_layer import moe_layer

    def weights(*shape):
        return (torch.randn(shape, device="cuda") / shape[-2] ** 0.5).to(torch.bfloat16)

    x = torch.randn(tokens, hidden, device="cuda").to(torch.bfloat16)
    arrays = (x, weights(hidden, experts), weights(experts, hidden, ffn), weights(experts, hidden, ffn),
              weights(experts, ffn, hidden))
    layers = {"asyncdsl": moe_layer, "torch._grouped_mm": torch_layer}
    exact = reference(*arrays, top_k)
    errors = {name: relative_error(layer(*arrays, top_k), exact) for name, layer in layers.items()}
    times = rounds_of_gpu_ms({name: lambda layer=layer: layer(*arrays, top_k)
                              for name, layer in layers.items()}, rounds=DEVICE_ROUNDS, rep=20)
    return {"TFLOP/s": tflops(2 * tokens * top_k * 3 * hidden * ffn, times), "ms": times,
            "relative error vs float64": errors, "ratio": times["torch._grouped_mm"] / times["asyncdsl"],
            "timing": "device: CUDA events around one layer after a cache flush, median of rounds"}


def main(argv: list[str]) -> None:
    table = TflopsTable()
    for shape in shape_arguments(argv, SHAPES):
        result = measure(*shape)
        table.add("x".join(map(str, shape)), result, f"ratio {result['ratio']:.3f}",
                  {key: f"{value:.2e}" for key, value in result["relative error vs float64"].items()})
    print(table.write("moe_layer"))


if __name__ == "__main__":
    main(sys.argv[1:])
