"""Copy bandwidth: asyncdsl's one-tile-per-CTA copy and its persistent pipelined copy against
torch's copy_ and Triton's TMA copy, in one run (read + write bytes over median device time).

    python benchmarks/copy_bandwidth.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import median_gpu_ms, plot_result, write_result  # noqa: E402

SHAPES = ((4096, 4096), (16384, 8192))
PIPELINES = (  # BM, BN, STAGES, CTAs per SM
    (64, 128, 4, 1),
    (128, 128, 3, 1),
    (64, 64, 6, 2),
    (32, 128, 4, 2),
    (64, 128, 2, 3),
)


def main() -> None:
    import torch
    from triton_peers import triton_copy

    from asyncdsl.examples.pipelined_copy import pipelined_copy
    from asyncdsl.examples.tile_copy import tile_copy

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = {}
    for shape in SHAPES:
        x = torch.randn(shape, device="cuda")
        nbytes = 2 * x.numel() * x.element_size()
        row = {}

        def timed(name, fn, y):
            y.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            assert torch.equal(y, x), name
            row[name] = nbytes / median_gpu_ms(fn) / 1e9

        y = torch.empty_like(x)
        timed("torch copy_", lambda: y.copy_(x), y)
        timed("triton TMA copy 128x128", lambda: triton_copy(x, y), y)
        timed("asyncdsl tile_copy 128x128", lambda: tile_copy(x, y, BM=128, BN=128), y)
        for bm, bn, stages, per_sm in PIPELINES:
            config = dict(BM=bm, BN=bn, STAGES=stages, CTAS=per_sm * sms)
            timed(f"asyncdsl pipelined {bm}x{bn} x{stages} stages, {per_sm}/SM",
                  lambda: pipelined_copy(x, y, **config), y)
        best = max(v for k, v in row.items() if k.startswith("asyncdsl"))
        row["best asyncdsl / torch copy_"] = best / row["torch copy_"]
        results[f"{shape[0]}x{shape[1]} f32 (TB/s)"] = row
    plot_result(write_result("copy_bandwidth", results))
    for name, row in results.items():
        print(name)
        for key, value in row.items():
            print(f"    {key:45s} {value:6.3f}")


if __name__ == "__main__":
    main()
