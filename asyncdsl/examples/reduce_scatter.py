"""Reduce-scatter across devices: device r ends up with the sum over devices of their chunk r.

Every device holds `x` of shape (devices, rows, columns); chunk `x[r]` of every device is summed
into device r's `out` (rows, columns).  Each device *pulls*: CTAS persistent CTAs walk the
(BM, BN) tiles of its chunk, load that tile from every device's `x` with TMA (straight from the
peers' memory) into one ring slot, sum the copies in float32 registers in rank order, round once
to the output type and store the tile with TMA.  The order of the sum is fixed, so the result is
the same on every run and bit for bit numpy's `sum` over devices in float32, rounded once.
A device announces that its `x` is ready by setting its slot of every device's `ready` flags to
`epoch` (its first CTA does, at the start: work queued before the kernel wrote `x`), and every
CTA waits for all of them before reading a peer; call k of a job passes `epoch=k`.  A device
must not rewrite `x` until its peers' calls have finished reading it (the next call's flags, or
a barrier, order that).

`kernel.interpret(..., devices=N)` emulates N devices; on GPUs it runs in an NVSHMEM job
(`asyncdsl.distributed`), one process per GPU, on symmetric arrays.

    python -m asyncdsl.examples.reduce_scatter
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

import asyncdsl as ad
import asyncdsl.distributed as dist
from asyncdsl.examples.pipelined_copy import strided_tiles


@ad.kernel(grid=lambda x, out, ready, epoch, CTAS, **_: (CTAS,), block=128)
def reduce_scatter(x, out, ready, epoch: int, CTAS: ad.constexpr = 1, BM: ad.constexpr = 32,
                   BN: ad.constexpr = 64, STAGES: ad.constexpr = 2):
    devices, rank = ad.num_devices(), ad.device_id()
    rows, columns = out.shape
    if x.shape != (devices, rows, columns) or ready.shape != (devices,):
        raise ad.TraceError(f"reduce_scatter into {rows}x{columns} on {devices} devices takes x of shape "
                            f"{(devices, rows, columns)} and ready flags of shape {(devices,)}")
    cta = ad.program_id(0)
    with ad.when(cta == 0):
        for pe in range(devices):
            ad.signal(ready.peer(pe).at[rank], epoch)
    for pe in range(devices):
        ad.wait_signal(ready.at[pe], "ge", epoch)

    mine, window = strided_tiles(cta, rows, columns, BM, BN, CTAS)
    ring = ad.smem((STAGES, devices, BM, BN), x.dtype)
    result = ad.smem((BM, BN), out.dtype)
    landed = ad.barrier(num=STAGES)

    def load(t):
        slot = t % STAGES
        for step in range(devices):
            pe = (rank + 1 + step) % devices  # the devices read different peers at a time
            ad.async_copy(x.peer(pe).at[(rank, *window(t))], ring.at[slot, pe],
                          barrier=landed[slot], arrive=False)
        landed[slot].arrive_expect_tx(devices * BM * BN * x.dtype.itemsize)

    for t in range(STAGES):  # fill the ring
        with ad.when(mine > t):
            load(t)
    for t in ad.range(mine):
        slot = t % STAGES
        landed[slot].wait()
        total = ring.at[slot, 0][...].astype(ad.float32)
        for pe in range(1, devices):
            total = total + ring.at[slot, pe][...].astype(ad.float32)
        ad.await_async_copy(0, read_only=True)  # the previous tile's store has read `result`
        result[...] = total.astype(out.dtype)
        ad.fence_async_smem()
        ad.async_copy(result, out.at[window(t)])
        with ad.when(t + STAGES < mine):
            load(t + STAGES)  # every thread has read the slot: its sum is in registers
    ad.await_async_copy(0)


def reference(xs: list[np.ndarray], rank: int, dtype) -> np.ndarray:
    """Device `rank`'s output: the float32 sum over devices in rank order, rounded once."""
    total = xs[0][rank].astype(np.float32)
    for x in xs[1:]:
        total = total + x[rank].astype(np.float32)
    return total.astype(dtype)


def run(devices: int, rows: int = 40, columns: int = 72, seed: int = 0, CTAS: int = 3) -> bool:
    """Reduce-scatter random bfloat16 arrays on `devices` emulated devices, twice (epochs 1 and
    2); whether each device's output is bit for bit the reference."""
    rng = np.random.default_rng(seed)
    ready = [np.zeros(devices, np.int32) for _ in range(devices)]
    for epoch in (1, 2):
        xs = [rng.standard_normal((devices, rows, columns)).astype(ml_dtypes.bfloat16)
              for _ in range(devices)]
        outs = [np.full((rows, columns), np.nan, ml_dtypes.bfloat16) for _ in range(devices)]
        reduce_scatter.interpret(xs, outs, ready, epoch, CTAS=CTAS, devices=devices)
        for rank, out in enumerate(outs):
            if (out.view(np.uint16).tobytes()
                    != reference(xs, rank, ml_dtypes.bfloat16).view(np.uint16).tobytes()):
                return False
    return all((r == 2).all() for r in ready)


def on_gpus(rows: int = 1000, columns: int = 520, seed: int = 0, CTAS: int = 8) -> bool:
    """In an NVSHMEM job: reduce-scatter random bf16 arrays across its GPUs, twice; whether this
    PE's output is bit for bit the reference."""
    import torch

    devices, rank = dist.world_size(), dist.rank()
    generator = torch.Generator().manual_seed(seed)
    ready = dist.symmetric_empty((devices,), torch.int32)
    ready.zero_()
    dist.barrier()  # every PE's flags are down before anyone raises one
    ok = True
    for epoch in (1, 2):
        xs = [torch.randn((devices, rows, columns), generator=generator).to(torch.bfloat16)
              for _ in range(devices)]
        x = dist.symmetric_like(xs[rank].cuda())
        out = torch.full((rows, columns), float("nan"), dtype=torch.bfloat16, device="cuda")
        reduce_scatter(x, out, ready, epoch, CTAS=CTAS)
        torch.cuda.synchronize()
        expected = reference([t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) for t in xs], rank,
                             ml_dtypes.bfloat16)
        ok &= out.cpu().view(torch.int16).numpy().tobytes() == expected.view(np.int16).tobytes()
        dist.barrier()  # nobody frees its x while a peer may still read it
        dist.free(x)
    return ok


def main() -> int:
    failures = 0
    for devices in (2, 4):
        ok = run(devices)
        failures += not ok
        print(f"reduce_scatter on {devices} emulated devices: {'bit-exact' if ok else 'MISMATCH'}")
    gpus = dist.gpus_available()
    if gpus:
        ok = all(dist.spawn(on_gpus, gpus))
        failures += not ok
        print(f"reduce_scatter on {gpus} GPU(s) (NVSHMEM): {'bit-exact' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
