"""Grouped GEMM: c_g = a_g @ b_g for G problems of different row counts, one launch:
`c = asyncdsl.kernels.gemm_grouped(a, b, rows)`.

a stacks the groups' rows (ΣM_g, K), b the groups' weights (G, K, N), c the products (ΣM_g, N);
`rows` (M_0, M_1, ...) are constexprs, each a multiple of 128 (a tile may not run into the next
group's rows: TMA clips only at the array's end).  The cooperative GEMM's structure (a
producer, two consumers halving each 128 x BN tile, a load ring, 64 x 64 epilogue pieces)
walking `GroupedTiles`: each tile's group picks the rows of b its slices come from.
"""

from __future__ import annotations

from asyncdsl.blocks.epilogues import store_in_pieces, store_ring
from asyncdsl.blocks.grouped_tiles import GroupedTiles
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import drain, mma_loop
from asyncdsl.blocks.mma_operands import check_16_bit, tensor_core_layout
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_host
from asyncdsl.kernels.gemm import INTERPRETED_CTAS, _sms, example_inputs
from asyncdsl.kernels.outputs import empty

__all__ = ["EXAMPLE_ARGS", "example_inputs", "gemm_grouped", "matmul_grouped"]  # inputs: small integers


def gemm_grouped(a, b, rows, *, out=None, ctas: int | None = None, stream=None):
    """c (ΣM_g, N): each group's rows of a (ΣM_g, K) times its b[g] (b: (G, K, N) bfloat16)."""
    groups, k, n = b.shape
    c = empty(a, (a.shape[0], n), a.dtype) if out is None else out
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else _sms(a) // 2 * 2)
    launch(matmul_grouped, a, b.reshape(groups * k, n), c, stream=stream, CTAS=ctas, ROWS=tuple(rows))
    return c


@kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384)
def matmul_grouped(a, b, c, CTAS: constexpr, ROWS: constexpr, BN: constexpr = 256, BK: constexpr = 64,
                   STAGES: constexpr = 4):
    BM = 128
    (M, K), N = a.shape, b.shape[1]
    if not isinstance(ROWS, tuple) or not ROWS or sum(ROWS) != M or b.shape[0] != len(ROWS) * K:
        raise ad.TraceError(f"ROWS must be the groups' row counts, summing to a's {M} rows, with b "
                            f"({len(ROWS) if isinstance(ROWS, tuple) else '?'} * {K}, N) their weights "
                            f"stacked; got ROWS={ROWS!r} and b {tuple(b.shape)}")
    if tuple(c.shape) != (M, N) or N % 8 or isinstance(CTAS, bool) or not isinstance(CTAS, int) \
            or CTAS < 1:
        raise ad.TraceError(f"c must be (ΣM_g, N) = {(M, N)} (N a multiple of 8) and CTAS a positive int, "
                            f"got c {tuple(c.shape)} and CTAS={CTAS!r}")
    check_16_bit(a, b, c)
    half, k_steps = BM // 2, ad.cdiv(K, BK)
    firsts = [sum(ROWS[:g]) for g in range(len(ROWS))]
    tiles = GroupedTiles(len(ROWS), lambda g, before: (firsts[g], firsts[g] + ROWS[g]), N, BM, BN, CTAS)
    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half))
    b_ring = ad.smem((STAGES, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=3, consumers=2)

    def load(work, kk, slot, landed):
        for h in range(2):
            ad.async_copy(a.at[ad.ds(work.row + h * half, half), ad.ds(kk * BK, BK)],
                          a_ring.at[slot, h], barrier=landed)
        # group g's weights are rows g·K.. of the stacked b; a slice's rows past them meet the
        # columns of a past K, which read zeros
        ad.async_copy(b.at[ad.ds(work.group * K + kk * BK, BK), ad.ds(work.col, BN)], b_ring.at[slot],
                      barrier=landed)

    with ad.warpgroup_role(2, registers=40):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)
        for work in tiles:
            mma_loop(acc, ring, work.index, k_steps, lambda slot: (a_ring.at[slot, me], b_ring.at[slot]))
            drain(ring, work.index, k_steps)
            store_in_pieces(acc, c_out, me, c, work.row + me * half, work.col)
        ad.await_async_copy(0)


EXAMPLE_ARGS = {
    "matmul_grouped": ((ArraySpec((384, 192), ad.bfloat16), ArraySpec((2 * 192, 320), ad.bfloat16),
                        ArraySpec((384, 320), ad.bfloat16)), {"CTAS": 3, "ROWS": (128, 256)}),
}
