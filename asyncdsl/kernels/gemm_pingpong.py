"""bf16 matrix multiply with ping-pong consumers: c = a @ b, float32 accumulation, bf16 out.

The persistent, warp-specialized GEMM of `asyncdsl.kernels.gemm_cooperative`, scheduled the other way round:
each consumer warpgroup owns whole (BM, BN) tiles, the CTA's tiles taken in turn
(`PersistentTiles.taken_in_turn`), and the two consumers take turns (`asyncdsl.turns`) to run
their K loops (`mma_loop.ping_pong_k_loop`).  While one issues its tile's wgmmas, the other
converts and stores its previous tile: the tensor cores do not wait for the epilogue, which the
cooperative kernel pays on every tile.  The price is a smaller tile per K step (128 x 128 by
default), so more bytes of a and b per flop.
"""

from __future__ import annotations

from asyncdsl.blocks.epilogues import store_in_pieces, store_ring
from asyncdsl.blocks.gemm_config import check_tiles
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import ping_pong_k_loop
from asyncdsl.blocks.mma_operands import check_16_bit, check_operands, tensor_core_layout
from asyncdsl.blocks.persistent_tiles import PersistentTiles
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.gemm_cooperative import example_inputs

__all__ = ["EXAMPLE_ARGS", "example_inputs", "matmul_pingpong"]  # inputs: the GEMM's small integers


@kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384, profile_events=32768)
def matmul_pingpong(a, b, c, CTAS: constexpr, BM: constexpr = 128, BN: constexpr = 128,
                    BK: constexpr = 64, STAGES: constexpr = 4, SNAKE: constexpr = 16):
    check_tiles(BM, BN, BK, STAGES)
    check_operands(a, b, c, CTAS)
    check_16_bit(a, b, c)
    (M, K), N = a.shape, b.shape[1]
    k_steps = ad.cdiv(K, BK)
    tiles = PersistentTiles(M, N, BM, BN, CTAS, SNAKE)

    a_ring = ad.smem((STAGES, BM, BK), a.dtype, **tensor_core_layout(BM))
    b_ring = ad.smem((STAGES, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=2, consumers=1)  # each slot is one consumer's
    k_loops = ad.turns((0, 1))

    def load(work, kk, slot, landed):
        ad.async_copy(a.at[ad.ds(work.row, BM), ad.ds(kk * BK, BK)], a_ring.at[slot], barrier=landed)
        ad.async_copy(b.at[ad.ds(kk * BK, BK), ad.ds(work.col, BN)], b_ring.at[slot], barrier=landed)

    with ad.warpgroup_role(2, registers=40):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((BM, BN), ad.float32, layout=ad.WGMMA)
        for work in tiles.taken_in_turn(me):
            first = work.index * k_steps
            ping_pong_k_loop(acc, ring, k_loops, first, k_steps,
                             lambda slot: (a_ring.at[slot], b_ring.at[slot]))
            with ad.region("epilogue"):
                ad.wgmma_wait(0)
                ring.release(first + k_steps - 1)
                store_in_pieces(acc, c_out, me, c, work.row, work.col)
        ad.await_async_copy(0)


EXAMPLE_ARGS = {
    "matmul_pingpong": ((ArraySpec((192, 320), ad.bfloat16), ArraySpec((320, 512), ad.bfloat16),
                         ArraySpec((192, 512), ad.bfloat16)), {"CTAS": 2}),
}
