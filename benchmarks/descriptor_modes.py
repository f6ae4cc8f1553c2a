"""Where TMA descriptors should live: by-value kernel parameters or a GMEM scratch buffer.

For kernels using 1, 4 and 16 descriptors (one per array: every CTA loads a 32x32 f32 tile from
each array and stores it into the next one, rotating the arrays; a load and a store of the same
box share a descriptor), measures in both modes, in one run:
- the host time of a launch with the same arrays as the last one (descriptors cached);
- the host time of a launch with arrays at addresses not seen before (descriptors encoded, and
  for the scratch uploaded), as when a framework hands out fresh tensors every step;
- the device time of the kernel.

    python benchmarks/descriptor_modes.py
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from common import median_gpu_ms, plot_result, write_result  # noqa: E402

TILE = 32
SIZE = 1024  # each input is SIZE x SIZE f32: 1024 CTAs, one tile per input each

KERNEL_SOURCE = '''
import asyncdsl as ad

@ad.kernel(grid=(SIZE // TILE, SIZE // TILE), descriptors=MODE)
def rotate_tiles({inputs}):
    i, j = ad.program_id(0) * TILE, ad.program_id(1) * TILE
    bar = ad.barrier()
    tiles = [ad.smem((TILE, TILE), ad.float32) for _ in range({count})]
    for k, source in enumerate(({inputs},)):
        ad.async_copy(source.at[ad.ds(i, TILE), ad.ds(j, TILE)], tiles[k], barrier=bar, arrive=False)
    bar.arrive_expect_tx({count} * TILE * TILE * 4)
    bar.wait()
    for k, target in enumerate(({inputs},)[1:] + ({inputs},)[:1]):
        ad.async_copy(tiles[k], target.at[ad.ds(i, TILE), ad.ds(j, TILE)])
    ad.await_async_copy(0, read_only=True)
'''


def build(count: int, mode: str):
    inputs = ", ".join(f"a{k}" for k in range(count))
    source = (f"SIZE, TILE, MODE = {SIZE}, {TILE}, {mode!r}\n"
              + KERNEL_SOURCE.format(inputs=inputs, count=count))
    path = os.path.join(tempfile.mkdtemp(prefix="asyncdsl-desc-"), f"gather_{count}_{mode}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(f"gather_{count}_{mode}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rotate_tiles


def fresh_address_launch_seconds(kernel, count: int, launches: int = 300) -> float:
    """Median host time of launches whose arrays were never launched with before."""
    import statistics
    import time

    import torch

    # Views into one big buffer: distinct, 16-byte aligned addresses without allocator noise.
    step = SIZE * SIZE // 64  # elements between consecutive arrays (they overlap; only timing matters)
    pool = torch.zeros(launches * count * step + SIZE * SIZE, device="cuda")
    times = []
    for launch in range(launches):
        base = (launch * count) * step
        arrays = [pool[base + k * step: base + k * step + SIZE * SIZE].view(SIZE, SIZE) for k in range(count)]
        start = time.perf_counter()
        kernel(*arrays)
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times)


def main() -> None:
    import torch

    from asyncdsl.runtime import host_seconds_per_call

    results = {}
    for count in (1, 4, 16):
        for mode in ("grid_constant", "scratch"):
            arrays = [torch.randn(SIZE, SIZE, device="cuda") for _ in range(count)]
            expected = arrays[-1:] + arrays[:-1]
            expected = [a.clone() for a in expected]
            kernel = build(count, mode)
            kernel(*arrays)
            torch.cuda.synchronize()
            assert all(torch.equal(a, e) for a, e in zip(arrays, expected)), (count, mode)
            results[f"{count:2d} descriptors, {mode:13s} host launch us"] = (
                host_seconds_per_call(lambda: kernel(*arrays), repeat=3000) * 1e6
            )
            results[f"{count:2d} descriptors, {mode:13s} kernel us"] = (
                median_gpu_ms(lambda: kernel(*arrays)) * 1e3)
            results[f"{count:2d} descriptors, {mode:13s} host launch, new addresses us"] = (
                fresh_address_launch_seconds(kernel, count) * 1e6
            )
    plot_result(write_result("descriptor_modes", results))
    for key, value in results.items():
        print(f"{key:50s} {value:8.2f}")


if __name__ == "__main__":
    main()
