"""All-gather across devices: every device ends up with every device's shard, in rank order.

Each device loads its shard (rows x columns) into shared memory with one TMA load, stores it with
TMA into every device's `out` (its own included) at rows `rank * rows`, waits until those writes
are done, and raises its flag on every device; then it waits until every device's flag is up in
its own `flags`, after which its `out` holds all the shards.

Interpreter only for now: `kernel.interpret(..., devices=N)` emulates N devices in one process.
The GPU needs NVSHMEM's symmetric heap for the peer stores and signals
(`passes/to_ptx/distributed.py`).

    python -m asyncdsl.examples.all_gather
"""

from __future__ import annotations

import sys

import numpy as np

import asyncdsl as ad


@ad.kernel(grid=(1,), block=128)
def all_gather(shard, out, flags):
    devices, rank = ad.num_devices(), ad.device_id()
    rows = shard.shape[0]
    tile = ad.smem(shard.shape, shard.dtype)
    loaded = ad.barrier()
    ad.async_copy(shard, tile, barrier=loaded)
    loaded.wait()
    for pe in range(devices):
        ad.async_copy(tile, out.peer(pe).at[ad.ds(rank * rows, rows), :])
    ad.await_async_copy()  # the writes are done before any flag announces them
    for pe in range(devices):
        ad.signal(flags.peer(pe).at[rank], 1)
    for source in range(devices):
        ad.wait_signal(flags.at[source], "ge", 1)


def run(devices: int, shape=(64, 64), dtype=np.float32, seed: int = 0) -> bool:
    """All-gather random shards on `devices` emulated devices; whether every device's output
    is bit for bit the concatenation numpy makes."""
    rng = np.random.default_rng(seed)
    shards = [rng.standard_normal(shape).astype(dtype) for _ in range(devices)]
    outs = [np.zeros((devices * shape[0], shape[1]), dtype) for _ in range(devices)]
    flags = [np.zeros(devices, np.int32) for _ in range(devices)]
    all_gather.interpret(shards, outs, flags, devices=devices)
    expected = np.concatenate(shards)
    return all(out.tobytes() == expected.tobytes() for out in outs) and all((f == 1).all() for f in flags)


def main() -> int:
    failures = 0
    for devices in (2, 4):
        ok = run(devices)
        failures += not ok
        print(f"all_gather on {devices} emulated devices: {'bit-exact' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
