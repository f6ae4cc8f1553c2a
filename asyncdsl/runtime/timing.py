"""Timing of calls such as kernel launches, on the host or on the GPU (benchmarks proper, with
their peers, live in `benchmarks/`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Self

from asyncdsl.runtime import driver
from asyncdsl.runtime.buffers import empty


def host_seconds_per_call(call: Callable[[], object], *, repeat: int = 2000, warmup: int = 50) -> float:
    """The median host wall time of one `call()`, in seconds.

    Each call is timed on its own and the median taken, so a rare slow call (a cold cache, the
    garbage collector, a full launch queue) does not move the result.  For a launch this is the
    host launch overhead: the GPU runs the kernels asynchronously and is not waited for."""
    for _ in range(warmup):
        call()
    clock = time.perf_counter_ns
    samples = []
    for _ in range(repeat):
        start = clock()
        call()
        samples.append(clock() - start)
    return statistics.median(samples) * 1e-9


def device_milliseconds(call: Callable[[], object], stream: int, *, device: int = 0, warmup: int = 2,
                        repeat: int = 10) -> float:
    """The median GPU time of one `call()`, which enqueues its work on `stream` (an integer
    handle), between two CUDA events recorded there, in milliseconds.

    Before each timed call the stream overwrites twice the L2 cache's size of scratch memory
    (outside the events), so every call finds its inputs in device memory, not in L2 from the
    call before: the state a kernel meets after other work."""
    cu = driver.api()
    driver.activate(device)
    handle = cu.CUstream(stream)
    flush = _flush_buffer(2 * max(driver.device_facts(device).l2_cache_bytes, 1 << 20), device)
    with GpuStopwatch() as stopwatch:
        for _ in range(warmup):
            call()
        samples = []
        for _ in range(repeat):
            driver.check(cu.cuMemsetD32Async(flush.address, 0, flush.nbytes // 4, handle), "cuMemsetD32Async")
            stopwatch.start(stream)
            call()
            stopwatch.stop(stream)
            samples.append(stopwatch.milliseconds())
    return statistics.median(samples)


class GpuStopwatch:
    """Two CUDA events that time work on a stream: `start` and `stop` record them there (the
    stream an integer handle), `milliseconds` waits for the stop and answers the GPU time between.
    Used in a `with` block, which destroys the events."""

    def __init__(self) -> None:
        self._cu = cu = driver.api()
        self._start, self._stop = (driver.check(cu.cuEventCreate(0), "cuEventCreate") for _ in range(2))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self._cu.cuEventDestroy(self._start)
        self._cu.cuEventDestroy(self._stop)

    def start(self, stream: int) -> None:
        driver.check(self._cu.cuEventRecord(self._start, self._cu.CUstream(stream)), "cuEventRecord")

    def stop(self, stream: int) -> None:
        driver.check(self._cu.cuEventRecord(self._stop, self._cu.CUstream(stream)), "cuEventRecord")

    def milliseconds(self) -> float:
        cu = self._cu
        driver.check(cu.cuEventSynchronize(self._stop), "cuEventSynchronize")
        return float(driver.check(cu.cuEventElapsedTime(self._start, self._stop), "cuEventElapsedTime"))


_flush_buffers: dict = {}  # device -> the scratch `device_milliseconds` overwrites between calls


def _flush_buffer(nbytes: int, device: int):
    buffer = _flush_buffers.get(device)
    if buffer is None or buffer.nbytes < nbytes:
        buffer = _flush_buffers[device] = empty((nbytes // 4,), "uint32", device)
    return buffer
