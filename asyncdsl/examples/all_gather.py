"""All-gather across devices: every device ends up with every device's shard, in rank order.

`out` is (devices, rows, columns) on every device; device r's shard lands in `out[r]` everywhere.
CTAS persistent CTAs walk the shard's (BM, BN) tiles with a stride, each through a ring of STAGES
shared-memory slots (as `pipelined_copy` does): a tile is loaded once with TMA and stored with TMA
into every device's `out` (its own included), starting with the next device so that the devices
do not all write to the same one at once.  A slot is refilled once the stores of the tile before
it have read it.  When a CTA's stores are done it adds one to its slot of every device's `flags`,
then waits until each device's slot here reaches `epoch * CTAS`: every CTA of every device has
delivered.  `flags` start at zero and keep counting, so call k of a job passes `epoch=k`.

`kernel.interpret(..., devices=N)` emulates N devices in one process; on GPUs the kernel runs in
an NVSHMEM job (`asyncdsl.distributed`), one process per GPU, on symmetric arrays.

    python -m asyncdsl.examples.all_gather    # 2 and 4 emulated devices, then every GPU here
"""

from __future__ import annotations

import sys

import numpy as np

import asyncdsl as ad
import asyncdsl.distributed as dist
from asyncdsl.examples.pipelined_copy import strided_tiles


@ad.kernel(grid=lambda shard, out, flags, epoch, CTAS, **_: (CTAS,), block=128)
def all_gather(shard, out, flags, epoch: int, CTAS: ad.constexpr = 1, BM: ad.constexpr = 64,
               BN: ad.constexpr = 64, STAGES: ad.constexpr = 4):
    devices, rank = ad.num_devices(), ad.device_id()
    rows, columns = shard.shape
    if out.shape != (devices, rows, columns) or flags.shape != (devices,):
        raise ad.TraceError(f"all_gather of {rows}x{columns} shards on {devices} devices takes out of shape "
                            f"{(devices, rows, columns)} and flags of shape {(devices,)}")
    mine, window = strided_tiles(ad.program_id(0), rows, columns, BM, BN, CTAS)
    ring = ad.smem((STAGES, BM, BN), shard.dtype)
    landed = ad.barrier(num=STAGES)

    for t in range(STAGES):  # fill the ring
        with ad.when(mine > t):
            ad.async_copy(shard.at[window(t)], ring.at[t], barrier=landed[t])
    for t in ad.range(mine):
        slot = t % STAGES
        landed[slot].wait()
        for step in range(devices):
            ad.async_copy(ring.at[slot], out.peer((rank + 1 + step) % devices).at[(rank, *window(t))])
        refill = t + STAGES - 1  # the next tile of the slot the previous tile's stores read
        with ad.when((t >= 1) & (refill < mine)):
            ad.await_async_copy(devices, read_only=True)
            ad.async_copy(shard.at[window(refill)], ring.at[refill % STAGES], barrier=landed[refill % STAGES])
    ad.await_async_copy()  # every write landed before a flag says so
    for pe in range(devices):
        ad.signal(flags.peer(pe).at[rank], 1, op="add")
    for source in range(devices):
        ad.wait_signal(flags.at[source], "ge", epoch * CTAS)


def run(devices: int, shape=(100, 72), dtype=np.float32, seed: int = 0, CTAS: int = 3) -> bool:
    """All-gather random shards on `devices` emulated devices, twice (epochs 1 and 2); whether
    every device's output is bit for bit what numpy stacks."""
    rng = np.random.default_rng(seed)
    flags = [np.zeros(devices, np.int32) for _ in range(devices)]
    for epoch in (1, 2):
        shards = [rng.standard_normal(shape).astype(dtype) for _ in range(devices)]
        outs = [np.full((devices, *shape), np.nan, dtype) for _ in range(devices)]
        all_gather.interpret(shards, outs, flags, epoch, CTAS=CTAS, BM=32, BN=32, STAGES=2, devices=devices)
        expected = np.stack(shards)
        if not all(out.tobytes() == expected.tobytes() for out in outs):
            return False
    return all((f == 2 * CTAS).all() for f in flags)


def on_gpus(shape=(1000, 520), seed: int = 0, CTAS: int = 8) -> bool:
    """In an NVSHMEM job: all-gather random bf16 shards across its GPUs, twice; whether this
    PE's output is bit for bit what numpy stacks."""
    import torch

    devices, rank = dist.world_size(), dist.rank()
    generator = torch.Generator().manual_seed(seed)
    flags = dist.symmetric_empty((devices,), torch.int32)
    flags.zero_()
    out = dist.symmetric_empty((devices, *shape), torch.bfloat16)
    ok = True
    for epoch in (1, 2):
        shards = [torch.randn(shape, generator=generator).to(torch.bfloat16) for _ in range(devices)]
        shard = dist.symmetric_like(shards[rank].cuda())
        out.fill_(float("nan"))
        dist.barrier()  # every PE's out is cleared before anyone writes into it
        all_gather(shard, out, flags, epoch, CTAS=CTAS)
        torch.cuda.synchronize()
        ok &= torch.equal(out.cpu().view(torch.int16), torch.stack(shards).view(torch.int16))
        dist.barrier()  # nobody frees its shard or clears out while a peer still copies
        dist.free(shard)
    return ok and bool((flags == 2 * CTAS).all())


def main() -> int:
    failures = 0
    for devices in (2, 4):
        ok = run(devices)
        failures += not ok
        print(f"all_gather on {devices} emulated devices: {'bit-exact' if ok else 'MISMATCH'}")
    gpus = dist.gpus_available()
    if gpus:
        ok = all(dist.spawn(on_gpus, gpus))
        failures += not ok
        print(f"all_gather on {gpus} GPU(s) (NVSHMEM): {'bit-exact' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
