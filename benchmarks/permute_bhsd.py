"""(B, H, S, D) -> (B, S, H, D) bandwidth: asyncdsl's TMA permute (`asyncdsl.kernels.permute_bhsd`,
with the block it picks and with each of 8, 16 and 32 sequence positions a CTA) against torch, in
one run.

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

    import asyncdsl.kernels as K

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
        for block_s in (None, 8, 16, 32):  # None: the block the host function picks
            if block_s and block_s * h * d * 2 > 200 * 1024:
                continue
            y = torch.full_like(expected, float("nan"))
            K.permute_bhsd(x, block_s=block_s, out=y)
            torch.cuda.synchronize()
            assert torch.equal(y, expected), (shape, block_s)
            ms = median_gpu_ms(lambda: K.permute_bhsd(x, block_s=block_s, out=y))
            name = f"asyncdsl BS={block_s} TB/s" if block_s else "asyncdsl (its own block) TB/s"
            row[name] = nbytes / ms / 1e9
            best = max(best or 0, row[name])
        row["asyncdsl (its own block) / torch copy_"] = (row["asyncdsl (its own block) TB/s"]
                                                         / row["torch copy_(permute) TB/s"])
        row["asyncdsl best / torch copy_"] = best / row["torch copy_(permute) TB/s"]
        results[f"B,H,S,D={shape} bf16"] = row
    plot_result(write_result("permute_bhsd", results))
    for name, row in results.items():
        print(name)
        for key, value in row.items():
            print(f"    {key:36s} {value:7.3f}")


if __name__ == "__main__":
    main()
