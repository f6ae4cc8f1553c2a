"""Tile copy: every CTA moves one tile of a 2-D array GMEM -> SMEM -> GMEM with TMA.

The load completes on an mbarrier (its expect-tx is the whole box, also where the box runs past
the array's edge: TMA fills those elements with zeros), every thread waits for it, then one thread
stores the tile back (clipped at the edge) and waits only until the store has read shared
memory, so the CTA can exit while the writes drain.

    python -m asyncdsl.examples.tile_copy          # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.shapes import check_shape


@ad.kernel(grid=lambda src, dst, BM, BN: (ad.cdiv(src.shape[0], BM), ad.cdiv(src.shape[1], BN)))
def tile_copy(src, dst, BM: ad.constexpr, BN: ad.constexpr):
    check_shape("dst", dst, src.shape, "a copy of src")
    row, col = ad.program_id(0) * BM, ad.program_id(1) * BN
    tile = ad.smem((BM, BN), src.dtype)
    loaded = ad.barrier()
    ad.async_copy(src.at[ad.ds(row, BM), ad.ds(col, BN)], tile, barrier=loaded)
    loaded.wait()
    ad.async_copy(tile, dst.at[ad.ds(row, BM), ad.ds(col, BN)])
    ad.await_async_copy(0, read_only=True)  # SMEM may be released once the store has read it


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {
    "tile_copy": ((ad.ArraySpec((1000, 528), ad.float32),) * 2, {"BM": 64, "BN": 64}),
}

# (dtype, tile rows, tile cols): a tile row must be a multiple of 16 bytes.
CASES = (
    (ad.float32, 64, 64),
    (ad.bfloat16, 64, 128),
    (ad.float16, 128, 64),
    (ad.int8, 64, 128),
    (ad.float8_e4m3fn, 32, 256),
)


def random_array(shape, dtype: ad.DType, rng: np.random.Generator) -> np.ndarray:
    """Random values of every bit pattern class the dtype has (its bytes are what is copied)."""
    raw = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype.numpy).reshape(shape)


def main(shape=(1000, 528)) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    where = "GPU" if has_gpu() else "interpreter"
    failures = 0
    for dtype, bm, bn in CASES:
        src = random_array(shape, dtype, rng)
        dst = (np.full_like(src, 0x5A, dtype=src.dtype) if dtype.itemsize == 1
               else random_array(shape, dtype, rng))
        start = time.perf_counter()
        if has_gpu():
            from asyncdsl.runtime import to_device, to_host

            src_d, dst_d = to_device(src), to_device(dst)
            tile_copy(src_d, dst_d, BM=bm, BN=bn)
            dst = to_host(dst_d)
        else:
            tile_copy.interpret(src, dst, BM=bm, BN=bn)
        elapsed = time.perf_counter() - start
        ok = src.view(np.uint8).tobytes() == dst.view(np.uint8).tobytes()
        failures += not ok
        print(f"tile_copy {dtype.name:14s} {shape} tiles {bm}x{bn} on the {where}: "
              f"{'bit-exact' if ok else 'MISMATCH'} ({elapsed * 1e3:.1f} ms incl. compile)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
