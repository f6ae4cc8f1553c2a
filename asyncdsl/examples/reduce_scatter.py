"""Reduce-scatter across devices: device r ends up with the sum over devices of their chunk r.

Each device holds `x` of `devices * rows` rows; chunk `pe` (rows `pe * rows` ..) belongs to
device `pe`.  Each device loads every chunk into shared memory with TMA and adds it into device
`pe`'s `out` with a TMA reduce-add, waits until those writes are done, and adds one to device
`pe`'s counter; then it waits until its own counter reaches the device count, after which its
`out` holds the sum.  Additions from different devices land in an order the run decides, so the
example sums int32 (exact in any order) and compares bit for bit with numpy.

Interpreter only for now (`kernel.interpret(..., devices=N)`); the GPU needs NVSHMEM.

    python -m asyncdsl.examples.reduce_scatter
"""

from __future__ import annotations

import sys

import numpy as np

import asyncdsl as ad


@ad.kernel(grid=(1,), block=128)
def reduce_scatter(x, out, counter):
    devices = ad.num_devices()
    rows = out.shape[0]
    chunk = ad.smem(out.shape, x.dtype)
    loaded = ad.barrier()
    for pe in range(devices):
        ad.async_copy(x.at[ad.ds(pe * rows, rows), :], chunk, barrier=loaded)
        loaded.wait()
        ad.async_copy(chunk, out.peer(pe), reduction="add")
        ad.await_async_copy()  # written before announced, and the buffer free for the next chunk
        ad.signal(counter.peer(pe).at[0], 1, op="add")
    ad.wait_signal(counter.at[0], "eq", devices)


def run(devices: int, rows: int = 32, columns: int = 64, seed: int = 0) -> bool:
    """Reduce-scatter random int32 arrays on `devices` emulated devices; whether each device's
    output is bit for bit numpy's sum of its chunk."""
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-2**20, 2**20, (devices * rows, columns), dtype=np.int32) for _ in range(devices)]
    outs = [np.zeros((rows, columns), np.int32) for _ in range(devices)]
    counters = [np.zeros(1, np.int32) for _ in range(devices)]
    reduce_scatter.interpret(xs, outs, counters, devices=devices)
    total = np.sum(xs, axis=0, dtype=np.int32)
    return all(
        out.tobytes() == total[rank * rows:(rank + 1) * rows].tobytes() for rank, out in enumerate(outs)
    ) and all(c[0] == devices for c in counters)


def main() -> int:
    failures = 0
    for devices in (2, 4):
        ok = run(devices)
        failures += not ok
        print(f"reduce_scatter on {devices} emulated devices: {'bit-exact' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
