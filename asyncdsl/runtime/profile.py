"""Launching a kernel compiled for profiling: its profile buffer, and its time by CUDA events.

The buffer depends on the grid (a record per CTA and warpgroup, `asyncdsl.hw.profile`), so each
profiled launch allocates its own, zeroes it on the launch's stream, hands its address to the
kernel's parameter, and reads it back after the launch; CUDA events recorded around the launch
give the kernel time to compare the trace with.  A profiled launch waits for the GPU: profiling is
for looking, not for production.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from asyncdsl.hw.profile import buffer_bytes
from asyncdsl.kernel_binary import ProfileBufferParam
from asyncdsl.runtime import driver
from asyncdsl.runtime.arrays import DeviceArray
from asyncdsl.runtime.streams import stream_handle

if TYPE_CHECKING:
    from asyncdsl.runtime.launch import LoadedKernel

# A loaded kernel has one parameter cell for its profile buffer: profiled launches take turns.
_one_at_a_time = threading.Lock()


@dataclass(frozen=True)
class ProfiledLaunch:
    """What one profiled launch left: the profile buffer as u32 words, the grid it ran on, and the
    time between CUDA events recorded just before and after it on its stream."""

    words: np.ndarray
    grid: tuple[int, int, int]
    event_ns: float


def profile_param(kernel: LoadedKernel) -> ProfileBufferParam:
    found = [param for param in kernel.binary.params if isinstance(param, ProfileBufferParam)]
    if not found:
        raise ValueError(f"kernel {kernel.name!r} was not compiled for profiling")
    return found[0]


def launch_profiled(
    kernel: LoadedKernel,
    cell: ctypes.c_uint64,
    grid: tuple[int, int, int],
    arrays: Sequence[DeviceArray],
    stream: Any = None,
    scalars: Sequence[int | float] = (),
) -> ProfiledLaunch:
    """Launch `kernel` once on `grid` (checked, in blocks) with its profile buffer in `cell`, wait
    for it, and read the buffer back."""
    param = profile_param(kernel)
    block = kernel.binary.block
    ctas = grid[0] * grid[1] * grid[2]
    size = buffer_bytes(param.events_per_warpgroup, ctas, block[0] * block[1] * block[2] // 128)
    handle = stream_handle(stream)
    cu = driver.api()
    driver.activate(kernel.device)
    with _one_at_a_time:
        address = int(driver.check(cu.cuMemAlloc(size), "cuMemAlloc"))
        start, end = (driver.check(cu.cuEventCreate(0), "cuEventCreate") for _ in range(2))
        try:
            driver.check(cu.cuMemsetD32Async(address, 0, size // 4, handle), "cuMemsetD32Async")
            cell.value = address
            driver.check(cu.cuEventRecord(start, cu.CUstream(handle)), "cuEventRecord")
            kernel.launch(grid, arrays, stream, scalars)
            driver.check(cu.cuEventRecord(end, cu.CUstream(handle)), "cuEventRecord")
            driver.check(cu.cuEventSynchronize(end), "cuEventSynchronize")
            milliseconds = driver.check(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")
            words = np.empty(size // 4, dtype=np.uint32)
            driver.check(cu.cuMemcpyDtoH(words.ctypes.data, address, size), "cuMemcpyDtoH")
        finally:
            cell.value = 0
            cu.cuEventDestroy(start)
            cu.cuEventDestroy(end)
            cu.cuMemFree(address)
    return ProfiledLaunch(words, grid, float(milliseconds) * 1e6)
