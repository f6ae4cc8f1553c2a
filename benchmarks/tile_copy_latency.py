"""Cold and warm cost of the tile-copy example against Triton's TMA copy, in one run.

- cold: a fresh process, empty caches (the driver's JIT cache too), from the first call to the
  finished kernel (trace, passes, PTX, machine code, load, tensor maps, launch, sync); then a
  second fresh process on the caches the first one filled.
- warm host launch: median host time of one more call with the same arrays.
- copy bandwidth: 4096x4096 f32 (read + write bytes over device time) vs torch's copy_.

    python benchmarks/tile_copy_latency.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import empty_dir, fresh_process_seconds, median_gpu_ms, plot_result, write_result  # noqa: E402

ASYNCDSL_COLD = r"""
import time, torch
import asyncdsl as ad
from asyncdsl.examples.tile_copy import tile_copy
x = torch.randn(4096, 4096, device="cuda"); y = torch.empty_like(x); torch.cuda.synchronize()
t0 = time.perf_counter()
tile_copy(x, y, BM=128, BN=128)
torch.cuda.synchronize()
t = time.perf_counter() - t0
assert torch.equal(x, y)
print(t)
"""

TRITON_COLD = r"""
import time, torch
from triton_peers import triton_copy
x = torch.randn(4096, 4096, device="cuda"); y = torch.empty_like(x); torch.cuda.synchronize()
t0 = time.perf_counter()
triton_copy(x, y)
torch.cuda.synchronize()
t = time.perf_counter() - t0
assert torch.equal(x, y)
print(t)
"""


def warm_numbers() -> dict:
    import torch
    import triton
    from triton_peers import triton_copy
    from triton_peers import triton_tile_copy as triton_kernel

    from asyncdsl.examples.tile_copy import tile_copy
    from asyncdsl.runtime import host_seconds_per_call

    x = torch.randn(4096, 4096, device="cuda")
    y = torch.full_like(x, float("nan"))
    tile_copy(x, y, BM=128, BN=128)
    torch.cuda.synchronize()
    assert torch.equal(x, y)
    y2 = torch.full_like(x, float("nan"))
    triton_copy(x, y2)
    torch.cuda.synchronize()
    assert torch.equal(x, y2)

    small = torch.randn(128, 128, device="cuda")
    small_out = torch.empty_like(small)
    from triton.tools.tensor_descriptor import TensorDescriptor

    sd, dd = (TensorDescriptor.from_tensor(small, [128, 128]),
              TensorDescriptor.from_tensor(small_out, [128, 128]))
    host = {
        "asyncdsl_launch_us": host_seconds_per_call(
            lambda: tile_copy(small, small_out, BM=128, BN=128)) * 1e6,
        "triton_launch_us (descriptors built per call)": host_seconds_per_call(
            lambda: triton_copy(small, small_out)) * 1e6,
        "triton_launch_us (descriptors reused)": host_seconds_per_call(
            lambda: triton_kernel[(1, 1)](sd, dd, 128, 128)) * 1e6,
        "torch_add_launch_us": host_seconds_per_call(lambda: torch.add(small, 1, out=small_out)) * 1e6,
    }
    torch.cuda.synchronize()
    nbytes = 2 * x.numel() * x.element_size()
    device = {
        "asyncdsl_copy_ms": median_gpu_ms(lambda: tile_copy(x, y, BM=128, BN=128)),
        "triton_copy_ms": median_gpu_ms(lambda: triton_copy(x, y2)),
        "torch_copy_ms": median_gpu_ms(lambda: y.copy_(x)),
    }
    device.update({k.replace("_ms", "_TBps"): nbytes / (v * 1e-3) / 1e12 for k, v in list(device.items())})
    return {**host, **device, "triton_version": triton.__version__, "torch_version": torch.__version__}


def main() -> None:
    # Each contender's caches, new and empty, then filled by its first process.  The driver's JIT
    # cache (CUDA_CACHE_PATH) is one: it keeps the machine code of asyncdsl's kernels.
    asyncdsl_caches = {"ASYNCDSL_CACHE_DIR": empty_dir(), "CUDA_CACHE_PATH": empty_dir()}
    triton_caches = {"TRITON_CACHE_DIR": empty_dir(), "CUDA_CACHE_PATH": empty_dir()}
    cold = {
        "asyncdsl_cold_s (empty caches)": fresh_process_seconds(ASYNCDSL_COLD, asyncdsl_caches),
        "triton_cold_s (empty caches)": fresh_process_seconds(TRITON_COLD, triton_caches),
    }
    cold["asyncdsl_cold_s (warm disk cache)"] = fresh_process_seconds(ASYNCDSL_COLD, asyncdsl_caches)
    cold["triton_cold_s (warm disk cache)"] = fresh_process_seconds(TRITON_COLD, triton_caches)
    results = {**cold, **warm_numbers()}
    path = write_result("tile_copy_latency", results)
    plot_result(path)
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:{width}s}  {value:.4g}" if isinstance(value, float) else f"{key:{width}s}  {value}")
    print(f"written {path}")


if __name__ == "__main__":
    main()
