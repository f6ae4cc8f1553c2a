"""(B, H, S, D) -> (B, S, H, D): the head/sequence swap of attention layouts, done by TMA.

Each CTA takes one batch and a block of BS sequence positions across all heads. Its load views
`x[b, :, s0:s0+BS, :]` (H, BS, D) through `TransposeTransform((1, 0, 2))`, so the box lands in
shared memory as (BS, H, D), which is exactly `y[b, s0:s0+BS, :, :]`: the store is a plain box.
The permutation is done by the copy engine's addressing; no thread touches the data.

    python -m asyncdsl.examples.permute_bhsd      # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import numpy as np

import asyncdsl as ad
from asyncdsl.examples.shapes import check_shape


@ad.kernel(grid=lambda x, y, BS: (x.shape[0], ad.cdiv(x.shape[2], BS)))
def permute_bhsd(x, y, BS: ad.constexpr):
    if len(x.shape) != 4:
        raise ad.TraceError(f"x must be (B, H, S, D), got shape {tuple(x.shape)}")
    batches, heads, length, dim = x.shape
    check_shape("y", y, (batches, length, heads, dim), "x's (B, H, S, D) as (B, S, H, D)")
    batch, s0 = ad.program_id(0), ad.program_id(1) * BS
    tile = ad.smem((BS, heads, dim), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(
        x.at[batch, :, ad.ds(s0, BS), :], tile, barrier=loaded, transforms=ad.TransposeTransform((1, 0, 2))
    )
    loaded.wait()
    ad.async_copy(tile, y.at[batch, ad.ds(s0, BS), :, :])
    ad.await_async_copy(0, read_only=True)


EXAMPLE_ARGS = {
    "permute_bhsd": (
        (ad.ArraySpec((2, 16, 1000, 64), ad.bfloat16), ad.ArraySpec((2, 1000, 16, 64), ad.bfloat16)),
        {"BS": 32},
    ),
}


def main(shape=(2, 16, 1000, 64), block_s=32) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(ad.bfloat16.numpy)
    y = np.full((shape[0], shape[2], shape[1], shape[3]), np.nan, dtype=x.dtype)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        x_d, y_d = to_device(x), to_device(y)
        permute_bhsd(x_d, y_d, BS=block_s)
        y = to_host(y_d)
        where = "GPU"
    else:
        permute_bhsd.interpret(x, y, BS=block_s)
        where = "interpreter"
    ok = np.array_equal(y.view(np.uint16), x.transpose(0, 2, 1, 3).view(np.uint16))
    print(f"permute_bhsd {shape} -> {y.shape} on the {where}: {'bit-exact' if ok else 'MISMATCH'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
