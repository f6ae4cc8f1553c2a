"""A matrix multiply on the tensor cores with one warpgroup: c = a @ b, bf16 in, float32 sums,
bf16 out.  The smallest GEMM that uses Hopper's machinery; `persistent_gemm.py` builds the fast
one from blocks.

Each CTA (one warpgroup, 128 threads) owns a (BM, BN) tile of c and walks K in BK-deep steps:

1. Two TMA copies bring the step's (BM, BK) slice of a and (BK, BN) slice of b into shared
   memory, laid out as the tensor cores read them (`tensor_core_layout`: 128-byte rows,
   swizzled).  Both arrive on one mbarrier (two arrivals a phase), which also counts their
   bytes; `landed.wait(parity=...)` returns once they are there (the parity flips every step:
   the barrier's phase).
2. `ad.wgmma` multiplies the two slices into the float32 accumulator, a register tile in the
   layout the tensor cores write (`ad.WGMMA`); the first step overwrites it (accumulate=False).
   wgmma runs asynchronously: `ad.wgmma_wait(0)` waits until it is done, so the next step's
   copies may overwrite the slices it read.
3. The accumulator is rounded to bf16 once and stored from registers.  Loads past the edges of
   a and b read zeros and stores past c are skipped, so any M, N and K (multiples of 8) work.

Nothing overlaps here: the copies wait for the wgmma and the wgmma for the copies.  A ring of
slots filled by a producer warpgroup while consumers multiply (`asyncdsl.blocks.load_ring`,
`asyncdsl.blocks.mma_loop`) is what makes it fast.

    python -m asyncdsl.examples.wgmma_gemm      # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.kernels.gemm_cooperative import example_inputs  # small integers: exact sums


@ad.kernel(grid=lambda a, b, c, BM=64, BN=128, **_: (ad.cdiv(c.shape[0], BM), ad.cdiv(c.shape[1], BN)),
           block=128)
def wgmma_gemm(a, b, c, BM: ad.constexpr = 64, BN: ad.constexpr = 128, BK: ad.constexpr = 64):
    row, col = ad.program_id(0) * BM, ad.program_id(1) * BN
    a_slice = ad.smem((BM, BK), a.dtype, **tensor_core_layout(BM))
    b_slice = ad.smem((BK, BN), b.dtype, **tensor_core_layout(BK))
    landed = ad.barrier(arrival_count=2)  # one arrival a copy, each with its bytes
    acc = ad.registers((BM, BN), ad.float32, layout=ad.WGMMA)
    for kk in ad.range(ad.cdiv(a.shape[1], BK)):
        ad.async_copy(a.at[ad.ds(row, BM), ad.ds(kk * BK, BK)], a_slice, barrier=landed)
        ad.async_copy(b.at[ad.ds(kk * BK, BK), ad.ds(col, BN)], b_slice, barrier=landed)
        landed.wait(parity=kk % 2)
        ad.wgmma(acc, a_slice, b_slice, accumulate=kk > 0)
        ad.wgmma_wait(0)
    ad.store(c.at[ad.ds(row, BM), ad.ds(col, BN)], acc[...].astype(c.dtype))


EXAMPLE_ARGS: dict[str, tuple[tuple[ad.ArraySpec, ...], dict[str, object]]] = {
    "wgmma_gemm": ((ad.ArraySpec((200, 320), ad.bfloat16), ad.ArraySpec((320, 264), ad.bfloat16),
                    ad.ArraySpec((200, 264), ad.bfloat16)), {}),
}


def main(shape=(200, 264, 320)) -> int:
    from asyncdsl.runtime import has_gpu, to_device, to_host

    m, n, k = shape
    specs = [ad.ArraySpec(shape, ad.bfloat16) for shape in ((m, k), (k, n), (m, n))]
    a, b, c = example_inputs(specs, np.random.default_rng(0))
    if has_gpu():
        c_gpu = to_device(c)
        wgmma_gemm(to_device(a), to_device(b), c_gpu)
        c, where = to_host(c_gpu), "GPU"
    else:
        wgmma_gemm.interpret(a, b, c)  # numpy arrays, on the CPU
        where = "interpreter"
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    ok = np.array_equal(c.view(np.uint16), expected.view(np.uint16))
    print(f"wgmma_gemm {m}x{n}x{k} on the {where}: {'exact' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
