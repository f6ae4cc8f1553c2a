"""bf16 matrix multiply with ping-pong consumers: c = a @ b, float32 accumulation, bf16 out.

The persistent, warp-specialized kernel of `matmul.py`, scheduled the other way round (CUTLASS's
"ping-pong"): each consumer warpgroup owns whole (BM, BN) tiles, the CTA's tiles taken in turn
(warpgroup 0 the even ones, warpgroup 1 the odd ones), and the two consumers take turns
(`asyncdsl.turns`) to run their K loops.  While one issues its tile's wgmmas, the other converts
and stores its previous tile: the tensor cores do not wait for the epilogue, which the
cooperative kernel (both consumers on one tile, both in the epilogue at once) pays on every tile.
The price is a smaller tile per K step (128 x 128 by default, two wgmmas of 64 x 128 a slice;
64 x 256 is the other shape whose float32 accumulator fits a warpgroup), so more bytes of a and
b per flop.  On the H200 (same runs, TFLOP/s) it is within a few per cent of the cooperative
kernel either way: 679 / 670 against 662 / 657 at 4096 x 8192 x 4096, 659 / 640 against 680 /
671 at 8192^3 (64 x 256: 656 / 661 and 695 / 619); 3 stages instead of 4 lose a third.

- warpgroup 2, the producer, streams the slices of the CTA's tiles in order (tile t's K steps,
  then tile t + 1's), through a ring of STAGES slots;
- consumer w waits for the slots of its own tiles only (the parity of step i's phase is
  (i // STAGES) % 2: the slots between were another consumer's), keeps one wgmma in flight and
  releases each slot when its wgmma is done; it passes the turn once its last wgmma is issued.

    python -m asyncdsl.examples.matmul_pingpong      # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys

import asyncdsl as ad
from asyncdsl.examples.matmul import (
    check_16_bit,
    check_exact,
    check_operands,
    check_tiles,
    example_inputs,
    store_in_pieces,
    tensor_core_layout,
    tile_position,
)

__all__ = ["EXAMPLE_ARGS", "example_inputs", "main", "matmul_pingpong", "ping_pong_k_loop", "ping_pong_tiles"]


@ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384, profile_events=32768)
def matmul_pingpong(a, b, c, CTAS: ad.constexpr, BM: ad.constexpr = 128, BN: ad.constexpr = 128,
                    BK: ad.constexpr = 64, STAGES: ad.constexpr = 4, SNAKE: ad.constexpr = 16):
    check_tiles(BM, BN, BK, STAGES)
    check_operands(a, b, c, CTAS)
    check_16_bit(a, b, c)
    M, K = a.shape
    N = b.shape[1]
    m_tiles, n_tiles = ad.cdiv(M, BM), ad.cdiv(N, BN)
    k_steps = ad.cdiv(K, BK)
    cta, ctas = ad.program_id(0), CTAS
    mine = (m_tiles * n_tiles - cta + ctas - 1) // ctas  # tiles cta, cta + ctas, ...

    a_ring = ad.smem((STAGES, BM, BK), a.dtype, **tensor_core_layout(BM))
    b_ring = ad.smem((STAGES, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = ad.smem((2, 2, 64, 64), c.dtype, **tensor_core_layout(64))  # [consumer][slot]: 64 x 64 pieces
    ring = ad.Pipeline(STAGES, loads=2, consumers=1)  # each slot is one consumer's
    k_loops = ad.turns((0, 1))

    def origin(t):
        m, n = tile_position(cta + t * ctas, m_tiles, n_tiles, SNAKE)
        return m * BM, n * BN

    with ad.warpgroup_role(2, registers=40):
        for t in ad.range(mine):
            row, col = origin(t)
            for kk in ad.range(k_steps):
                slot, landed = ring.produce(t * k_steps + kk)
                with ad.region("load"):
                    ad.async_copy(a.at[ad.ds(row, BM), ad.ds(kk * BK, BK)], a_ring.at[slot], barrier=landed)
                    ad.async_copy(b.at[ad.ds(kk * BK, BK), ad.ds(col, BN)], b_ring.at[slot], barrier=landed)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((BM, BN), ad.float32, layout=ad.WGMMA)
        for t in ping_pong_tiles(mine, me):
            row, col = origin(t)
            first = t * k_steps
            ping_pong_k_loop(acc, ring, k_loops, first, k_steps,
                             lambda slot: (a_ring.at[slot], b_ring.at[slot]))
            with ad.region("epilogue"):
                ad.wgmma_wait(0)
                ring.release(first + k_steps - 1)
                store_in_pieces(acc, c_out, me, c, row, col)
        ad.await_async_copy(0)


def ping_pong_tiles(mine, me):
    """The CTA's tiles (0 .. mine - 1) that consumer `me` owns, the even ones for warpgroup 0 (so
    it takes the extra tile of an odd count) and the odd ones for warpgroup 1: a traced loop."""
    for i in ad.range((mine - me + 1) // 2):
        yield 2 * i + me


def ping_pong_k_loop(acc, ring, k_loops, first, k_steps, operands) -> None:
    """One consumer's K loop over a tile in its turn (`k_loops`): steps first.. first + k_steps
    of `ring`, whose slots in between were the other consumer's (so it waits with the phase
    parity of each step, (step // stages) % 2), one wgmma of `operands(slot)` (a, b) a step, one
    kept in flight, each slot released once the next wgmma has retired it; the last one stays
    in flight and unreleased for the caller (`wgmma_wait(0)`, then release step first +
    k_steps - 1)."""
    with k_loops.turn(), ad.region("k loop"):
        for kk in ad.range(k_steps):
            step = first + kk
            slot = step % ring.stages
            with ad.region("wait loaded"):
                ring.full[slot].wait(parity=(step // ring.stages) % 2)
            ad.wgmma(acc, *operands(slot), accumulate=kk > 0)
            ad.wgmma_wait(1)
            with ad.when(kk > 0):
                ring.release(step - 1)


EXAMPLE_ARGS = {
    "matmul_pingpong": (
        (ad.ArraySpec((192, 320), ad.bfloat16), ad.ArraySpec((320, 512), ad.bfloat16),
         ad.ArraySpec((192, 512), ad.bfloat16)),
        {"CTAS": 2},
    ),
}


def main(shape=(192, 512, 320)) -> int:
    return check_exact(matmul_pingpong, shape, interpreted_ctas=2)


if __name__ == "__main__":
    sys.exit(main())
