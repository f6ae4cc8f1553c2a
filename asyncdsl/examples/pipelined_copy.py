"""A persistent, pipelined copy: each CTA streams many tiles through a ring of SMEM slots.

Where `tile_copy` gives every tile its own CTA, here a fixed number of CTAs (about one per SM)
walk the tiles with a stride. Each CTA keeps STAGES tiles in flight: the ring starts with STAGES
loads; then for every tile it waits for the load, starts the store, and refills the slot the
*previous* store read from as soon as that store has finished reading it (`await_async_copy(1,
read_only=True)` lets the newest store keep running). Loads, stores and the waits between them
overlap, which a one-tile-per-CTA copy leaves to the scheduler.

    python -m asyncdsl.examples.pipelined_copy     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.shapes import check_shape
from asyncdsl.blocks.strided_tiles import strided_tiles


@ad.kernel(grid=lambda src, dst, BM, BN, STAGES, CTAS: (CTAS,))
def pipelined_copy(src, dst, BM: ad.constexpr, BN: ad.constexpr, STAGES: ad.constexpr, CTAS: ad.constexpr):
    check_shape("dst", dst, src.shape, "a copy of src")
    rows, columns = src.shape
    mine, window = strided_tiles(ad.program_id(0), rows, columns, BM, BN, CTAS)
    ring = ad.smem((STAGES, BM, BN), src.dtype)
    landed = ad.barrier(num=STAGES)

    for t in range(STAGES):  # fill the ring (unrolled while tracing)
        with ad.when(mine > t):
            ad.async_copy(src.at[window(t)], ring.at[t], barrier=landed[t])
    for t in ad.range(mine):
        slot = t % STAGES
        landed[slot].wait()
        ad.async_copy(ring.at[slot], dst.at[window(t)])
        refill = t + STAGES - 1  # the next tile for the slot the previous store read from
        with ad.when((t >= 1) & (refill < mine)):
            ad.await_async_copy(1, read_only=True)
            ad.async_copy(src.at[window(refill)], ring.at[refill % STAGES], barrier=landed[refill % STAGES])
    ad.await_async_copy(0, read_only=True)


EXAMPLE_ARGS = {
    "pipelined_copy": (
        (ad.ArraySpec((1000, 528), ad.float32),) * 2,
        {"BM": 64, "BN": 64, "STAGES": 3, "CTAS": 7},
    ),
}


def main(shape=(1000, 528)) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    src = rng.standard_normal(shape).astype(np.float32)
    dst = np.full_like(src, np.nan)
    config = EXAMPLE_ARGS["pipelined_copy"][1]
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        dst_d = to_device(dst)
        pipelined_copy(to_device(src), dst_d, **config)
        dst, where = to_host(dst_d), "GPU"
    else:
        pipelined_copy.interpret(src, dst, **config)
        where = "interpreter"
    ok = np.array_equal(src, dst)
    print(f"pipelined_copy {shape} {config} on the {where}: {'bit-exact' if ok else 'MISMATCH'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
