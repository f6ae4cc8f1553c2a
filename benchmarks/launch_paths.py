"""Host time of one kernel call, asyncdsl against Triton and torch in the same run.

Rows (median host microseconds per call; the GPU is never waited for):
- asyncdsl's tile copy (2 tensor maps) called as users call it, `tile_copy(x, y, BM=.., BN=..)`,
  with the same torch tensors every time and with tensors at addresses never seen before; the
  same through `tile_copy.prepare(x, y, BM=.., BN=..)` (a call of a fixed layout); and both on
  asyncdsl's own arrays (`DeviceArray`) over the same memory;
- the kernels of benchmarks/descriptor_modes.py with 1, 4 and 16 tensor maps, same arrays and
  new addresses;
- what the call is made of: the prepared launch alone (runtime, no frontend) and cuda-python's
  bare `cuLaunchKernelEx` with the same configuration and parameters (the floor), and the same
  driver call through ctypes (how much of the floor is cuda-python's argument conversion);
- Triton's TMA tile copy with host descriptors built once and built per call, and `torch.add`.

A cProfile of the warm call (same arrays) is stored with the results: where the time goes.

    python benchmarks/launch_paths.py
"""

from __future__ import annotations

import cProfile
import ctypes
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from common import plot_result, write_result  # noqa: E402
from descriptor_modes import build, fresh_address_launch_seconds  # noqa: E402

SHAPE = (128, 128)  # one 128 x 128 f32 tile: a one-CTA kernel, so the launch is all there is


def new_address_pairs(torch, count: int) -> list:
    """`count` pairs of SHAPE tensors at addresses no launch has used: views 1 KiB apart into
    one buffer (they overlap; only the host time matters)."""
    elements = SHAPE[0] * SHAPE[1]
    step = 256
    pool = torch.zeros(2 * count * step + elements, device="cuda")
    return [
        (pool[(2 * i) * step:(2 * i) * step + elements].view(SHAPE),
         pool[(2 * i + 1) * step:(2 * i + 1) * step + elements].view(SHAPE))
        for i in range(count)
    ]


def median_seconds_each(calls) -> float:
    """The median host time of calls made once each (a list of zero-argument functions)."""
    clock = time.perf_counter_ns
    samples = []
    for call in calls:
        start = clock()
        call()
        samples.append(clock() - start)
    return statistics.median(samples) * 1e-9


def profile_of(call, repeat: int = 20000, top: int = 12) -> dict[str, float]:
    """Own time per call (us) of the functions that take most of `call`, from cProfile."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        call()
    profiler.disable()
    stats = pstats.Stats(profiler).sort_stats("tottime")
    rows = {}
    for (path, line, function), (_, _, own, _, _) in list(stats.stats.items()):
        rows[f"{os.path.basename(path)}:{line}({function})"] = own / repeat * 1e6
    return dict(sorted(rows.items(), key=lambda item: -item[1])[:top])


def main() -> None:
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    from triton_peers import triton_copy, triton_tile_copy

    from asyncdsl.examples.tile_copy import tile_copy
    from asyncdsl.runtime import device_array, driver, host_seconds_per_call, load_kernel

    x = torch.randn(SHAPE, device="cuda")
    y = torch.empty_like(x)
    tile_copy(x, y, BM=128, BN=128)
    tile_copy(x, y, BM=128, BN=128)
    torch.cuda.synchronize()
    assert torch.equal(x, y)
    loaded = load_kernel(tile_copy.compile(x, y, BM=128, BN=128).binary)
    prepared = loaded.prepare((1, 1, 1))
    addresses = (x.data_ptr(), y.data_ptr())
    prepared.launch(addresses, 0)
    cu = driver.api()
    bare = (prepared._config, prepared._function, prepared._params_address)
    raw_launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
    raw_launch.argtypes = [ctypes.c_void_p] * 4
    raw_launch.restype = ctypes.c_int
    raw = (prepared._config.getPtr(), int(prepared._function), prepared._params_address, None)
    assert raw_launch(*raw) == 0

    pairs = new_address_pairs(torch, 3000)
    encodes_before = [cache.encode_count for cache in loaded.tensor_maps]
    new_addresses = median_seconds_each([lambda a=a, b=b: tile_copy(a, b, BM=128, BN=128) for a, b in pairs])
    assert [cache.encode_count for cache in loaded.tensor_maps] == encodes_before  # patched, not encoded

    source_descriptor = TensorDescriptor.from_tensor(x, [128, 128])
    target_descriptor = TensorDescriptor.from_tensor(y, [128, 128])
    triton_copy(x, y)
    triton_tile_copy[(1, 1)](source_descriptor, target_descriptor, 128, 128)

    prepared_call = tile_copy.prepare(x, y, BM=128, BN=128)
    fresh_pairs = new_address_pairs(torch, 3000)
    prepared_new_addresses = median_seconds_each(
        [lambda a=a, b=b: prepared_call(a, b) for a, b in fresh_pairs])
    xa, ya = device_array(x), device_array(y)  # asyncdsl's own arrays over the same memory
    tile_copy(xa, ya, BM=128, BN=128)
    prepared_arrays = tile_copy.prepare(xa, ya, BM=128, BN=128)

    results = {
        "asyncdsl tile_copy, 2 descriptors, same arrays": host_seconds_per_call(
            lambda: tile_copy(x, y, BM=128, BN=128), repeat=5000),
        "asyncdsl tile_copy, 2 descriptors, new addresses": new_addresses,
        "asyncdsl tile_copy prepared, same arrays": host_seconds_per_call(lambda: prepared_call(x, y)),
        "asyncdsl tile_copy prepared, new addresses": prepared_new_addresses,
        "asyncdsl tile_copy on asyncdsl arrays, same arrays": host_seconds_per_call(
            lambda: tile_copy(xa, ya, BM=128, BN=128), repeat=5000),
        "asyncdsl tile_copy prepared on asyncdsl arrays, same arrays": host_seconds_per_call(
            lambda: prepared_arrays(xa, ya)),
    }
    for count in (1, 4, 16):
        arrays = [torch.randn(1024, 1024, device="cuda") for _ in range(count)]
        kernel = build(count, "grid_constant")
        kernel(*arrays)
        results[f"asyncdsl {count:2d} descriptors, same arrays"] = host_seconds_per_call(
            lambda kernel=kernel, arrays=arrays: kernel(*arrays), repeat=3000)
        results[f"asyncdsl {count:2d} descriptors, new addresses"] = fresh_address_launch_seconds(
            kernel, count, 1000)
    results.update({
        "asyncdsl prepared launch alone (runtime, same arrays)": host_seconds_per_call(
            lambda: prepared.launch(addresses, 0)),
        "cuda-python cuLaunchKernelEx (the floor)": host_seconds_per_call(
            lambda: cu.cuLaunchKernelEx(*bare, 0)),
        "ctypes cuLaunchKernelEx (no cuda-python conversion)": host_seconds_per_call(
            lambda: raw_launch(*raw)),
        "Triton tile copy, descriptors built once": host_seconds_per_call(
            lambda: triton_tile_copy[(1, 1)](source_descriptor, target_descriptor, 128, 128)),
        "Triton tile copy, descriptors built per call": host_seconds_per_call(lambda: triton_copy(x, y)),
        "torch.add": host_seconds_per_call(lambda: torch.add(x, 1, out=y)),
    })
    torch.cuda.synchronize()
    table = {f"{name} (us)": seconds * 1e6 for name, seconds in results.items()}
    profile = profile_of(lambda: tile_copy(x, y, BM=128, BN=128))
    plot_result(write_result("launch_paths", {**table, "profile of the warm call, own us per call": profile}))
    for name, value in table.items():
        print(f"{name:60s} {value:7.2f}")
    floor = table["ctypes cuLaunchKernelEx (no cuda-python conversion) (us)"]
    print("\nagainst the bare cuLaunchKernelEx through ctypes:")
    for name in ("asyncdsl tile_copy, 2 descriptors, same arrays",
                 "asyncdsl tile_copy, 2 descriptors, new addresses",
                 "asyncdsl tile_copy prepared, same arrays", "asyncdsl tile_copy prepared, new addresses"):
        print(f"  {name:58s} {table[name + ' (us)'] / floor:5.2f}x")
    print("\nwhere a warm call's host time goes (cProfile, own us per call, inflated by profiling):")
    for name, value in profile.items():
        print(f"  {name:58s} {value:7.2f}")


if __name__ == "__main__":
    main()
