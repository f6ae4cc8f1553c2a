"""Kernels with profiler regions, shared by the CPU and GPU profiler tests.

`profiled_pipelined_copy` is `asyncdsl.examples.pipelined_copy` with each step in a region (the
example itself stays free of them); `specialized_copy` is a producer warpgroup feeding a consumer
warpgroup through a two-slot ring, the shape of a warp-specialized kernel.
"""

from __future__ import annotations

import asyncdsl as ad

# The regions each warpgroup of `specialized_copy` enters per tile, in program order.
PRODUCER_REGIONS = ("wait slot", "load")
CONSUMER_REGIONS = ("wait tile", "store")


@ad.kernel(grid=lambda src, dst, BM, BN, STAGES, CTAS: (CTAS,), profile_events=4096)
def profiled_pipelined_copy(src, dst, BM: ad.constexpr, BN: ad.constexpr, STAGES: ad.constexpr,
                            CTAS: ad.constexpr):
    tiles_per_row = ad.cdiv(src.shape[1], BN)
    tiles = ad.cdiv(src.shape[0], BM) * tiles_per_row
    cta = ad.program_id(0)
    mine = (tiles - cta + CTAS - 1) // CTAS
    ring = ad.smem((STAGES, BM, BN), src.dtype)
    landed = ad.barrier(num=STAGES)

    def window(t):
        tile = cta + t * CTAS
        return ad.ds(tile // tiles_per_row * BM, BM), ad.ds(tile % tiles_per_row * BN, BN)

    with ad.region("fill"):
        for t in range(STAGES):
            with ad.when(mine > t):
                ad.async_copy(src.at[window(t)], ring.at[t], barrier=landed[t])
    with ad.region("stream"):
        for t in ad.range(mine):
            slot = t % STAGES
            with ad.region("wait load"):
                landed[slot].wait()
            with ad.region("store"):
                ad.async_copy(ring.at[slot], dst.at[window(t)])
            refill = t + STAGES - 1
            with ad.when((t >= 1) & (refill < mine)):
                with ad.region("refill"):
                    ad.await_async_copy(1, read_only=True)
                    ad.async_copy(src.at[window(refill)], ring.at[refill % STAGES],
                                  barrier=landed[refill % STAGES])
    with ad.region("drain"):
        ad.await_async_copy(0, read_only=True)


@ad.kernel(grid=lambda x, y, B: (x.shape[0] // B,), block=256)
def specialized_copy(x, y, B: ad.constexpr):
    """Warpgroup 0 loads tiles of a row block into a two-slot ring; warpgroup 1 stores them."""
    wg = ad.warpgroup_idx()
    row = ad.program_id(0) * B
    bufs = ad.smem((2, B, B), x.dtype)
    full = ad.barrier(num=2)
    empty = ad.barrier(num=2)
    with ad.when(wg == 1):
        empty[0].arrive()  # both slots start empty
        empty[1].arrive()
    for k in ad.range(x.shape[1] // B):
        slot = k % 2
        with ad.when(wg == 0):
            with ad.region("wait slot"):
                empty[slot].wait()
            with ad.region("load"):
                ad.async_copy(x.at[ad.ds(row, B), ad.ds(k * B, B)], bufs.at[slot], barrier=full[slot])
        with ad.when(wg == 1):
            with ad.region("wait tile"):
                full[slot].wait()
            with ad.region("store"):
                ad.async_copy(bufs.at[slot], y.at[ad.ds(row, B), ad.ds(k * B, B)])
                ad.await_async_copy(0, read_only=True)
            empty[slot].arrive()


EXAMPLE_ARGS = {
    "specialized_copy": ((ad.ArraySpec((64, 128), ad.float32),) * 2, {"B": 32}),
    "profiled_pipelined_copy": (
        (ad.ArraySpec((256, 256), ad.float32),) * 2,
        {"BM": 64, "BN": 64, "STAGES": 3, "CTAS": 4},
    ),
}
