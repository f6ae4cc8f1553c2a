"""(B, H, S, D) -> (B, S, H, D) bandwidth: asyncdsl's TMA permute against torch, in one run.

Bytes moved = read + write of the tensor; random bf16 inputs; outputs poisoned and checked.

    python benchmarks/permute_bhsd.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import median_gpu_ms, plot_result, write_result  # noqa: E402

SHAPES = ((8, 16, 4096, 128), (4, 32, 8192, 64), (16, 8, 2048, 128))


def main() -> None:
    import torch

    from asyncdsl.examples.permute_bhsd import permute_bhsd

    results = {}
    for shape in SHAPES:
        b, h, s, d = shape
        x = torch.randn(shape, device="cuda").to(torch.bfloat16)
        nbytes = 2 * x.numel() * x.element_size()
        expected = x.permute(0, 2, 1, 3).contiguous()
        y_torch = torch.empty_like(expected)
        torch_ms = median_gpu_ms(lambda: y_torch.copy_(x.permute(0, 2, 1, 3)))
        contiguous_ms = median_gpu_ms(lambda: x.permute(0, 2, 1, 3).contiguous())
        row = {"torch copy_(permute) TB/s": nbytes / torch_ms / 1e9,
               "torch permute().contiguous() TB/s": nbytes / contiguous_ms / 1e9}
        best = None
        for block_s in (8, 16, 32):
            if block_s * h * d * 2 > 200 * 1024:
                continue
            y = torch.full_like(expected, float("nan"))
            permute_bhsd(x, y, BS=block_s)
            torch.cuda.synchronize()
            assert torch.equal(y, expected), (shape, block_s)
            ms = median_gpu_ms(lambda: permute_bhsd(x, y, BS=block_s))
            row[f"asyncdsl BS={block_s} TB/s"] = nbytes / ms / 1e9
            best = max(best or 0, row[f"asyncdsl BS={block_s} TB/s"])
        row["asyncdsl best / torch copy_"] = best / row["torch copy_(permute) TB/s"]
        results[f"B,H,S,D={shape} bf16"] = row
    plot_result(write_result("permute_bhsd", results))
    for name, row in results.items():
        print(name)
        for key, value in row.items():
            print(f"    {key:36s} {value:7.3f}")


if __name__ == "__main__":
    main()
