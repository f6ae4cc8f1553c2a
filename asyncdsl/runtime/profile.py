"""Launching a kernel compiled for profiling: its profile buffer, and its time by CUDA events.

The buffer depends on the grid (a record per CTA and warpgroup, `asyncdsl.hw.profile`), so each
profiled launch allocates its own, zeroes it on the launch's stream, hands its address to the
kernel's parameter, and reads it back after the launch; CUDA events recorded around the launch
give the kernel time to compare the trace with.  A profiled launch waits for the GPU: profiling is
for looking, not for production.

The events must time the kernel, not the host: on an idle stream the start event completes at
once and the end event waits for the host to finish the launch call as well (tens of µs, 12 % of
a 0.3 ms kernel on the H200).  So the stream is held shut while the events and the launch are
enqueued: it waits (`cuStreamWaitValue32`) until a gate word in device memory reaches this
launch's number, which a stream of our own writes (`cuStreamWriteValue32`) once everything is
enqueued, also when the launch failed.  Numbers only grow, so a write that lands before the wait
is reached still opens it.
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
from asyncdsl.runtime.timing import GpuStopwatch

if TYPE_CHECKING:
    from asyncdsl.runtime.launch import LoadedKernel

# A loaded kernel has one parameter cell for its profile buffer: profiled launches take turns.
_one_at_a_time = threading.Lock()


class _Gate:
    """A device word that holds a stream until the host opens it (see the module docstring); one
    per device, used under `_one_at_a_time`."""

    def __init__(self, cu: Any):
        self._cu = cu
        self.address = driver.check(cu.cuMemAlloc(4), "cuMemAlloc")
        driver.check(cu.cuMemsetD32(self.address, 0, 1), "cuMemsetD32")
        # Non-blocking: the legacy default stream (where a launch may wait) must not wait for it.
        self.opener = driver.check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING),
                                   "cuStreamCreate")
        self.opened = 0

    def hold(self, handle: int) -> int:
        """Make stream `handle` wait for the next opening; its number."""
        cu = self._cu
        number = self.opened + 1
        driver.check(cu.cuStreamWaitValue32(cu.CUstream(handle), self.address, number,
                                            cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ),
                     "cuStreamWaitValue32")
        return number

    def open(self, number: int) -> None:
        cu = self._cu
        driver.check(cu.cuStreamWriteValue32(self.opener, self.address, number,
                                             cu.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT),
                     "cuStreamWriteValue32")
        self.opened = number


_gates: dict[int, _Gate] = {}


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
    with _one_at_a_time, GpuStopwatch() as stopwatch:
        address = int(driver.check(cu.cuMemAlloc(size), "cuMemAlloc"))
        gate = _gates.get(kernel.device) or _gates.setdefault(kernel.device, _Gate(cu))
        try:
            driver.check(cu.cuMemsetD32Async(address, 0, size // 4, handle), "cuMemsetD32Async")
            cell.value = address
            number = gate.hold(handle)
            try:
                stopwatch.start(handle)
                kernel.launch(grid, arrays, stream, scalars)
                stopwatch.stop(handle)
            finally:
                gate.open(number)
            milliseconds = stopwatch.milliseconds()
            words = np.empty(size // 4, dtype=np.uint32)
            driver.check(cu.cuMemcpyDtoH(words.ctypes.data, address, size), "cuMemcpyDtoH")
        finally:
            cell.value = 0
            cu.cuMemFree(address)
    return ProfiledLaunch(words, grid, milliseconds * 1e6)
