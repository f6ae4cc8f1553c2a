"""Host-side timing of calls such as kernel launches (benchmarks proper live in `benchmarks/`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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
