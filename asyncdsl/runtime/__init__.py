"""The asyncdsl runtime: load compiled kernels with cuda-python and launch them on GPU arrays.

    kernel = load_kernel(binary)                      # cubin from the disk cache or compiled once
    args = [device_array(x, "x"), device_array(y, "y")]
    kernel.launch(grid, args, stream=torch.cuda.current_stream())

Nothing here imports cuda-python, torch or CuPy until it is needed; `has_gpu()` answers without
raising on machines that have no driver or no GPU.
"""

from asyncdsl.runtime.arrays import DeviceArray, device_array
from asyncdsl.runtime.binary_cache import BINARY_FORMAT, BinaryCache
from asyncdsl.runtime.buffers import empty, to_device, to_host
from asyncdsl.runtime.driver import DeviceFacts, device_facts, has_gpu
from asyncdsl.runtime.launch import LoadedKernel, clear_loaded_kernels, launch_grid, load_kernel
from asyncdsl.runtime.module_cache import cache_directory
from asyncdsl.runtime.persistent import persistent_grid
from asyncdsl.runtime.streams import stream_handle
from asyncdsl.runtime.symmetric import world_size
from asyncdsl.runtime.tensormap import validate_spec
from asyncdsl.runtime.timing import host_seconds_per_call

__all__ = [
    "BINARY_FORMAT",
    "BinaryCache",
    "DeviceArray",
    "DeviceFacts",
    "LoadedKernel",
    "cache_directory",
    "clear_loaded_kernels",
    "device_array",
    "device_facts",
    "empty",
    "has_gpu",
    "host_seconds_per_call",
    "launch_grid",
    "load_kernel",
    "persistent_grid",
    "stream_handle",
    "to_device",
    "to_host",
    "validate_spec",
    "world_size",
]
