"""bf16 GEMM scheduled stream-K, for shapes whose tiles do not make whole waves:
`c = asyncdsl.kernels.gemm_stream_k(a, b)`.

The warp-specialized GEMM of `asyncdsl.kernels.gemm_cooperative` (a producer, two consumers halving each
tile by rows, a load ring, 64 x 64 epilogue pieces) walking a `StreamKPlan`: every CTA first
takes its run of K iterations over the last tiles (`StreamKTiles.segments`), then its
data-parallel tiles.  A consumer whose piece of a run ends inside a tile stores its float32 sum
into its unit's workspace slot and adds its iteration count to the tile part's flag; the one
whose piece reaches the tile's end waits until the flag counts every iteration before its
piece, adds the other units' sums in unit order (the same result on every run), sets the flag
back to zero and stores the tile.
"""

from __future__ import annotations

from asyncdsl.blocks.epilogues import store_in_pieces, store_ring
from asyncdsl.blocks.gemm_config import check_tiles
from asyncdsl.blocks.mma_loop import mma_run
from asyncdsl.blocks.mma_operands import check_16_bit, check_operands, tensor_core_layout
from asyncdsl.blocks.shapes import product_shape
from asyncdsl.blocks.stream_k import StreamKPlan, StreamKTiles
from asyncdsl.blocks.tile_order import tile_position
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.gemm_cooperative import INTERPRETED_CTAS
from asyncdsl.kernels.outputs import apart, empty, partial_sums


def plan_for(m: int, n: int, k: int, ctas: int, bm: int = 128, bn: int = 128, bk: int = 64) -> StreamKPlan:
    """The stream-K plan of an m x n x k product in (bm, bn) tiles and bk-deep steps."""
    return StreamKPlan.make(-(-m // bm) * -(-n // bn), -(-k // bk), ctas)


@on_stream
def gemm_stream_k(a, b, *, out=None, ctas: int | None = None, BN: int = 128, stream=None):
    """c = a @ b (bfloat16 a (M, K), b (K, N)) in a new array or `out`, scheduled stream-K; the
    workspace and flags are kept per device, stream and shape (`outputs.partial_sums`)."""
    m, n, k = product_shape(a, b)
    c = empty(a, (m, n), a.dtype) if out is None else apart(out, a=a, b=b)
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a))
    plan = plan_for(m, n, k, ctas, bn=BN)
    workspace, flags = partial_sums(a, stream, ("stream-K", m, n, k, ctas, BN), plan.workspace_shape(128, BN),
                                    2 * plan.tiles)
    launch(matmul_stream_k, a, b, c, workspace, flags, stream=stream, CTAS=ctas, BN=BN)
    return c


@kernel(grid=lambda a, b, c, workspace, flags, CTAS, **_: (CTAS,), block=384)
def matmul_stream_k(a, b, c, workspace, flags, CTAS: constexpr, BN: constexpr = 128, BK: constexpr = 64,
                    STAGES: constexpr = 4, SNAKE: constexpr = 16):
    BM = 128
    check_tiles(BM, BN, BK, STAGES)
    check_operands(a, b, c, CTAS)
    check_16_bit(a, b, c)
    (M, K), N = a.shape, b.shape[1]
    plan = plan_for(M, N, K, CTAS, BM, BN, BK)
    if tuple(workspace.shape) != plan.workspace_shape(BM, BN) or workspace.dtype != ad.float32 \
            or tuple(flags.shape) != (2 * plan.tiles,) or flags.dtype != ad.int32:
        raise ad.TraceError(f"matmul_stream_k takes a float32 workspace {plan.workspace_shape(BM, BN)} and "
                            f"int32 zero flags ({2 * plan.tiles},), got {workspace.dtype} "
                            f"{tuple(workspace.shape)} and {flags.dtype} {tuple(flags.shape)}")
    half, k_iters = BM // 2, plan.k_iters
    m_tiles, n_tiles = ad.cdiv(M, BM), ad.cdiv(N, BN)
    schedule = StreamKTiles(plan)

    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half))
    b_ring = ad.smem((STAGES, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=3, consumers=2)

    def origin(tile):
        m, n = tile_position(tile, m_tiles, n_tiles, SNAKE)
        return m * BM, n * BN

    def pieces():
        """The CTA's work in order: (tile, first K iteration, iterations, first ring step, the
        stream-K segment or None for a whole tile)."""
        for segment in schedule.segments():
            count = segment.k_end - segment.k_begin
            yield segment.tile, segment.k_begin, count, segment.first_step, segment
        for tile, first_step in schedule.data_parallel():
            yield tile, 0, k_iters, first_step, None

    with ad.warpgroup_role(2, registers=40):
        for tile, k_begin, count, first_step, _ in pieces():
            row, col = origin(tile)
            for kk in ad.range(count):
                slot, landed = ring.produce(first_step + kk)
                k_step = k_begin + kk
                for h in range(2):
                    ad.async_copy(a.at[ad.ds(row + h * half, half), ad.ds(k_step * BK, BK)],
                                  a_ring.at[slot, h], barrier=landed)
                ad.async_copy(b.at[ad.ds(k_step * BK, BK), ad.ds(col, BN)], b_ring.at[slot], barrier=landed)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)
        for tile, k_begin, count, first_step, segment in pieces():
            row, col = origin(tile)
            row = row + me * half
            mma_run(acc, ring, first_step, count, lambda slot: (a_ring.at[slot, me], b_ring.at[slot]))
            if segment is None:
                store_in_pieces(acc, c_out, me, c, row, col)
            else:
                fix_up(acc, segment, schedule, lambda unit: workspace.at[unit, ad.ds(me * half, half), :],
                       flags.at[segment.tile * 2 + me],
                       lambda: store_in_pieces(acc, c_out, me, c, row, col))
        ad.await_async_copy(0)


def fix_up(acc, segment, schedule, slot, flag, store) -> None:
    """After a stream-K segment: a piece that ends inside its tile leaves its sum in the unit's
    workspace slot (`slot(unit)`: this consumer's part of it) and counts its iterations in on
    `flag`; the piece that ends the tile waits for the iterations before it, adds the earlier
    units' sums in order, resets the flag and `store()`s."""
    k_iters = schedule.plan.k_iters
    with ad.when(segment.k_end < k_iters):
        ad.store(slot(schedule.cta), acc[...])
        ad.await_async_copy(0)  # a signal announces every earlier write of the warpgroup
        ad.signal(flag, segment.k_end - segment.k_begin, op="add")
    with ad.when(segment.k_end == k_iters):
        with ad.when(segment.k_begin > 0):
            ad.wait_signal(flag, "eq", segment.k_begin)
            ad.signal(flag, 0)  # ready for the next launch
            for unit in ad.range(schedule.first_contributor(segment), schedule.cta):
                acc[...] = acc[...] + ad.load(slot(unit), layout=ad.WGMMA)
        store()


def example_inputs(specs, rng) -> list:
    """Small integers for a and b (exact sums), c and the workspace NaN, the flags zero."""
    import ml_dtypes
    import numpy as np

    a, b, c, workspace, flags = specs
    return [rng.integers(-3, 4, a.shape).astype(ml_dtypes.bfloat16),
            rng.integers(-3, 4, b.shape).astype(ml_dtypes.bfloat16),
            np.full(c.shape, np.nan, ml_dtypes.bfloat16), np.full(workspace.shape, np.nan, np.float32),
            np.zeros(flags.shape, np.int32)]


def _specs(m: int, n: int, k: int, ctas: int) -> tuple:
    plan = plan_for(m, n, k, ctas)
    bf16 = ad.bfloat16
    return (ArraySpec((m, k), bf16), ArraySpec((k, n), bf16), ArraySpec((m, n), bf16),
            ArraySpec(plan.workspace_shape(128, 128), ad.float32), ArraySpec((2 * plan.tiles,), ad.int32))


EXAMPLE_ARGS = {"matmul_stream_k": (_specs(384, 384, 1088, 4), {"CTAS": 4})}  # 4 whole tiles, 5 stream-K
