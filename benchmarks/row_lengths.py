"""Softmax, RMSNorm and LayerNorm on rows whose length is no multiple of 128 (`asyncdsl.kernels`'
padded kernels, which read GMEM straight into registers in windows of whole 16-byte vectors a
thread, `asyncdsl/blocks/row_plans.py`), against the Triton kernels of `register_tiles.py`, in
one run: TB/s = bytes read + written / device time (each contender's median over single launches
after an L2 flush, the median of that over 5 rounds in which they take turns in random order),
and each one's largest error against a float32 torch reference.

    python benchmarks/row_lengths.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import rounds_of_gpu_ms, write_result  # noqa: E402

# A multiple of 8 elements (16-byte vectors), a multiple of 4 (8-byte vectors), lengths whose
# windows of whole vectors are 5120, 6144, 7168 and 8192 wide, an odd length (element by element:
# rows are not 16-byte aligned).
SHAPES = ((8192, 1000), (16384, 2100), (4096, 5000), (4096, 6000), (4096, 7000), (4096, 8000), (2048, 12345))


KERNELS = ("softmax", "rms_norm", "layer_norm")


def _contenders(x, w, b):
    """asyncdsl's and Triton's softmax, RMSNorm and LayerNorm of x (weight w, bias b), each
    writing its argument."""
    from triton_peers import triton_layer_norm, triton_rms_norm, triton_softmax

    import asyncdsl.kernels as K

    return {"asyncdsl softmax": lambda y: K.softmax(x, out=y),
            "triton softmax": lambda y: triton_softmax(x, y),
            "asyncdsl rms_norm": lambda y: K.rms_norm(x, w, 1e-6, out=y),
            "triton rms_norm": lambda y: triton_rms_norm(x, w, y, 1e-6),
            "asyncdsl layer_norm": lambda y: K.layer_norm(x, w, b, 1e-5, out=y),
            "triton layer_norm": lambda y: triton_layer_norm(x, w, b, y, 1e-5)}


def main() -> None:
    import torch
    import torch.nn.functional as F

    results = {}
    for m, n in SHAPES:
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 3
        w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        wide = x.float()
        norm = wide * torch.rsqrt((wide ** 2).mean(dim=1, keepdim=True) + 1e-6) * w.float()
        layer = F.layer_norm(wide, (n,), w.float(), b.float(), 1e-5)
        expected = {"softmax": F.softmax(wide, dim=1).to(torch.bfloat16), "rms_norm": norm.to(torch.bfloat16),
                    "layer_norm": layer.to(torch.bfloat16)}
        runs = _contenders(x, w, b)
        outs = {name: torch.full_like(x, float("nan")) for name in runs}
        runs = {name: (lambda f=f, y=outs[name]: f(y)) for name, f in runs.items()}
        for run in runs.values():
            run()
        torch.cuda.synchronize()
        row = {}
        for name, ms in rounds_of_gpu_ms(runs, rounds=5, warmup=5, rep=20).items():
            row[name] = x.numel() * 4 / ms / 1e9
        for name, y in outs.items():
            row[f"{name} max error"] = float((y.float() - expected[name.split()[1]].float()).abs().max())
        for kernel in KERNELS:
            row[f"asyncdsl / triton {kernel}"] = row[f"asyncdsl {kernel}"] / row[f"triton {kernel}"]
        results[f"{m}x{n} bf16 (TB/s)"] = row
        print(f"{m}x{n}", {k: round(v, 4) for k, v in row.items()}, flush=True)
    write_result("row_lengths", results)


if __name__ == "__main__":
    main()
