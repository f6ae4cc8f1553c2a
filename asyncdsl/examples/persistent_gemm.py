"""A warp-specialized, persistent GEMM from blocks: c = a @ b in bf16, the design of
`asyncdsl.kernels.gemm` in one screen.

`wgmma_gemm.py` waits for every copy before its wgmma and for every wgmma before the next copy.
Here the two overlap, and the CTAs stay resident:

- `PersistentTiles`: CTAS CTAs (one an SM) walk the (BM, BN) tiles of c with a stride, in a
  planar snake so that the CTAs running at once share their slices of a and b in L2.  Every
  role of a CTA walks the same tiles by the same arithmetic.
- a ring of STAGES shared-memory slots (`ad.Pipeline` keeps a full and an empty barrier a slot);
  warpgroup 2, the producer (40 registers a thread: it only issues copies), fills them with
  `load_ring.produce`, one step of K a slot, each slot's copies landing on its full barrier;
- warpgroups 0 and 1, the consumers (232 registers: the accumulators), each take half of the
  tile's rows: `mma_loop` waits for a slot, issues a wgmma on it, keeps one in flight and
  releases the slot of the one before, so the producer refills it while the tensor cores work;
- `store_in_pieces` converts each consumer's accumulator to bf16 in 64 x 64 pieces, through two
  shared-memory slots, each stored by TMA while the next is converted (and while the producer
  already loads the next tile's slices).

    python -m asyncdsl.examples.persistent_gemm     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.epilogues import store_in_pieces, store_ring
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import drain, mma_loop
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.blocks.persistent_tiles import PersistentTiles
from asyncdsl.kernels.gemm_cooperative import example_inputs  # small integers: exact sums


@ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384)
def persistent_gemm(a, b, c, CTAS: ad.constexpr, BM: ad.constexpr = 128, BN: ad.constexpr = 256,
                    BK: ad.constexpr = 64, STAGES: ad.constexpr = 4):
    (M, K), N = a.shape, b.shape[1]
    half, k_steps = BM // 2, ad.cdiv(K, BK)
    tiles = PersistentTiles(M, N, BM, BN, CTAS, snake=16)
    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half))  # [slot][consumer]
    b_ring = ad.smem((STAGES, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=3, consumers=2)  # three copies fill a slot, two consumers free it

    def load(work, kk, slot, landed):  # one K step of a tile: each consumer's half of a, all of b
        for h in range(2):
            ad.async_copy(a.at[ad.ds(work.row + h * half, half), ad.ds(kk * BK, BK)],
                          a_ring.at[slot, h], barrier=landed)
        ad.async_copy(b.at[ad.ds(kk * BK, BK), ad.ds(work.col, BN)], b_ring.at[slot], barrier=landed)

    with ad.warpgroup_role(2, registers=40):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)
        for work in tiles:
            mma_loop(acc, ring, work.index, k_steps, lambda slot: (a_ring.at[slot, me], b_ring.at[slot]))
            drain(ring, work.index, k_steps)  # the last wgmma, still in flight
            store_in_pieces(acc, c_out, me, c, work.row + me * half, work.col)
        ad.await_async_copy(0)  # the CTA's stores are done before it ends


EXAMPLE_ARGS = {
    "persistent_gemm": ((ad.ArraySpec((300, 320), ad.bfloat16), ad.ArraySpec((320, 520), ad.bfloat16),
                         ad.ArraySpec((300, 520), ad.bfloat16)), {"CTAS": 3}),
}


def main(shape=(300, 520, 320)) -> int:
    """Run the kernel on small integers, a CTA an SM on the GPU (3 CTAs interpreted), and
    compare with numpy bit for bit."""
    from asyncdsl.runtime import device_facts, has_gpu, to_device, to_host

    m, n, k = shape
    specs = [ad.ArraySpec(shape, ad.bfloat16) for shape in ((m, k), (k, n), (m, n))]
    a, b, c = example_inputs(specs, np.random.default_rng(0))
    if has_gpu():
        c_gpu = to_device(c)
        persistent_gemm(to_device(a), to_device(b), c_gpu, CTAS=device_facts(0).multiprocessor_count)
        c, where = to_host(c_gpu), "GPU"
    else:
        persistent_gemm.interpret(a, b, c, CTAS=3)
        where = "interpreter"
    ok = np.array_equal(c.view(np.uint16), (a.astype(np.float64) @ b.astype(np.float64)).astype(
        ml_dtypes.bfloat16).view(np.uint16))
    print(f"persistent_gemm {m}x{n}x{k} on the {where}: {'exact' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
