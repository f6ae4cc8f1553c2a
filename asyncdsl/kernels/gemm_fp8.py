"""fp8 matrix multiply with scales: c = (a @ bᵀ) · a_scale[:, None] · b_scale[None, :], bf16 out:
`c = asyncdsl.kernels.gemm_fp8(a, b, a_scale, b_scale)`.

a is (M, K) and b is (N, K), both float8 e4m3 (or e5m2) with K contiguous (the tensor cores read
8-bit operands K-major only: b as torch's `_scaled_mm` takes it).  a_scale (M,) and b_scale
(N,) are float32 scales a row.  The tensor cores accumulate the whole K into float32 (their sums
of fp8 products keep 14 significant bits, docs/hardware.md §14.2), or, with `PROMOTE=n`, n
slices of 128 at a time, each sum then added into a float32 total in registers
(`mma_loop.promoted_mma_loop`; tiles at most 192 wide).  The scales are applied once to the sum
in registers, before the conversion to bf16 (`epilogue_functions.tile_scales`).

`matmul_fp8` is the cooperative kernel of `asyncdsl.kernels.gemm_cooperative` with 128-byte slices of K;
`matmul_fp8_pingpong` gives each consumer whole 128 x BN tiles, the two taking turns; the
`_2cta` forms run in clusters of two CTAs that share every b slice (multicast).
"""

from __future__ import annotations

from asyncdsl.blocks.epilogue_functions import tile_scales
from asyncdsl.blocks.epilogues import piece_of, store_in_pieces, store_ring
from asyncdsl.blocks.gemm_config import eviction_policies
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import drain, mma_loop, ping_pong_k_loop, promoted_mma_loop
from asyncdsl.blocks.mma_operands import check_fp8_operands, tensor_core_layout
from asyncdsl.blocks.persistent_tiles import PersistentTiles
from asyncdsl.blocks.shapes import product_shape
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.gemm_cooperative import INTERPRETED_CTAS
from asyncdsl.kernels.outputs import apart, empty


@on_stream
def gemm_fp8(a, b, a_scale, b_scale, *, out=None, ctas: int | None = None, stream=None):
    """c = (a @ bᵀ) · a_scale[:, None] · b_scale[None, :] for float8 a (M, K) and b (N, K), in a
    new bfloat16 (M, N) array or `out`: ping-pong 128 x 128 tiles for K up to 4096, promoted
    128 x 192 tiles for longer K (whose sum on the tensor cores alone loses too much)."""
    m, n, k = product_shape(a, b, b_is_transposed=True)
    c = empty(a, (m, n), ad.bfloat16) if out is None else apart(out, a=a, b=b, a_scale=a_scale,
                                                                  b_scale=b_scale)
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a) // 2 * 2)
    if k <= 4096:
        launch(matmul_fp8_pingpong, a, b, a_scale, b_scale, c, stream=stream, CTAS=ctas)
    else:
        launch(matmul_fp8, a, b, a_scale, b_scale, c, stream=stream, CTAS=ctas, BN=192, PROMOTE=4)
    return c


def store_scaled(total, c_out, me, c, scales, row, col) -> None:
    """Store consumer `me`'s float32 `total` at (row, col) of c, each element times its row's and
    its column's scale (`scales`, from `tile_scales`)."""
    row_scales, column_scales = scales
    store_in_pieces(total, c_out, me, c, row, col,
                    piece=lambda i, j: piece_of(total, i, j) * row_scales[i] * column_scales[j])


@kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384)
def matmul_fp8(a, b, a_scale, b_scale, c, CTAS: constexpr, BM: constexpr = 128, BN: constexpr = 256,
               STAGES: constexpr = 4, SNAKE: constexpr = 16, EVICT_FIRST: constexpr = "",
               PROMOTE: constexpr = 0):
    check_fp8_operands(a, b, a_scale, b_scale, c, CTAS)
    policy = eviction_policies(EVICT_FIRST)
    (M, K), N = a.shape, b.shape[0]
    BK = 128 // a.dtype.itemsize  # one 128-byte swizzled row of K
    half = BM // 2
    if not isinstance(PROMOTE, int) or isinstance(PROMOTE, bool) or PROMOTE < 0:
        raise ad.TraceError(f"PROMOTE is how many K slices the tensor cores sum before each addition into "
                            f"float32, a non-negative int (0: the whole K), got {PROMOTE!r}")
    if PROMOTE and BN > 192:  # two 64 x BN float32 tiles a consumer thread: BN / 2 registers each
        raise ad.TraceError("PROMOTE keeps a float32 total beside the accumulator, which fits the consumers' "
                            f"232 registers a thread for BN <= 192, got BN={BN}")
    # A group longer than K is one group of all of K: no more steps than K's are unrolled.
    group = min(PROMOTE, ad.cdiv(K, BK)) if PROMOTE else 1
    k_steps = ad.cdiv(ad.cdiv(K, BK), group) * group  # whole groups: steps past K read zeros
    tiles = PersistentTiles(M, N, BM, BN, CTAS, SNAKE)
    pair = tiles.pair

    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half, BK))  # [slot][consumer]
    b_ring = ad.smem((STAGES, BN, BK), b.dtype, **tensor_core_layout(BN, BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=3, consumers=2, collective="x" if pair > 1 else None)

    def load(work, kk, slot, landed):
        for h in range(2):
            ad.async_copy(a.at[ad.ds(work.row + h * half, half), ad.ds(kk * BK, BK)], a_ring.at[slot, h],
                          barrier=landed, eviction_policy=policy["a"])
        ad.async_copy(b.at[ad.ds(work.col, BN), ad.ds(kk * BK, BK)], b_ring.at[slot], barrier=landed,
                      collective="x" if pair > 1 else None, eviction_policy=policy["b"])

    with ad.warpgroup_role(2, registers=40):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)
        total = ad.registers((half, BN), ad.float32, layout=ad.WGMMA) if PROMOTE else acc
        for work in tiles:
            row, col = work.row + me * half, work.col
            operands = lambda slot: (a_ring.at[slot, me], b_ring.at[slot].T)
            if PROMOTE:
                promoted_mma_loop(acc, total, ring, work.index, k_steps, group, operands)
                scales = tile_scales(a_scale, b_scale, row, col, half, BN)
            else:
                mma_loop(acc, ring, work.index, k_steps, operands)
                scales = tile_scales(a_scale, b_scale, row, col, half, BN)  # while the last wgmma runs
                drain(ring, work.index, k_steps)
            store_scaled(total, c_out, me, c, scales, row, col)
        ad.await_async_copy(0)


@kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384)
def matmul_fp8_pingpong(a, b, a_scale, b_scale, c, CTAS: constexpr, BN: constexpr = 128,
                        STAGES: constexpr = 6, SNAKE: constexpr = 16, EVICT_FIRST: constexpr = ""):
    """The same product with ping-pong consumers: each owns whole 128 x BN tiles and the two take
    turns to run their K loops, so that one's epilogue (conversion, scales, stores) overlaps the
    other's wgmmas; at fp8 speed a K loop is half as long as at bf16 and the epilogue weighs
    twice as much."""
    check_fp8_operands(a, b, a_scale, b_scale, c, CTAS)
    if BN not in (64, 128):  # a 128 x BN float32 accumulator: BN registers a thread
        raise ad.TraceError(f"BN must be 64 or 128 (the accumulator of a 128 x BN tile in one warpgroup's "
                            f"registers), got {BN!r}")
    policy = eviction_policies(EVICT_FIRST)
    BM, BK = 128, 128 // a.dtype.itemsize
    (M, K), N = a.shape, b.shape[0]
    k_steps = ad.cdiv(K, BK)
    tiles = PersistentTiles(M, N, BM, BN, CTAS, SNAKE)
    pair = tiles.pair

    a_ring = ad.smem((STAGES, BM, BK), a.dtype, **tensor_core_layout(BM, BK))
    b_ring = ad.smem((STAGES, BN, BK), b.dtype, **tensor_core_layout(BN, BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=2, consumers=1, collective="x" if pair > 1 else None)
    k_loops = ad.turns((0, 1))

    def load(work, kk, slot, landed):
        ad.async_copy(a.at[ad.ds(work.row, BM), ad.ds(kk * BK, BK)], a_ring.at[slot], barrier=landed,
                      eviction_policy=policy["a"])
        ad.async_copy(b.at[ad.ds(work.col, BN), ad.ds(kk * BK, BK)], b_ring.at[slot], barrier=landed,
                      collective="x" if pair > 1 else None, eviction_policy=policy["b"])

    with ad.warpgroup_role(2, registers=40):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((BM, BN), ad.float32, layout=ad.WGMMA)
        for work in tiles.taken_in_turn(me):
            first = work.index * k_steps
            ping_pong_k_loop(acc, ring, k_loops, first, k_steps,
                             lambda slot: (a_ring.at[slot], b_ring.at[slot].T))
            scales = tile_scales(a_scale, b_scale, work.row, work.col, BM, BN)  # while the last wgmma runs
            ad.wgmma_wait(0)
            ring.release(first + k_steps - 1)
            store_scaled(acc, c_out, me, c, scales, work.row, work.col)
        ad.await_async_copy(0)


matmul_fp8_2cta = kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384,
                         cluster=(2, 1, 1))(matmul_fp8.fn)
matmul_fp8_pingpong_2cta = kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384,
                                  cluster=(2, 1, 1))(matmul_fp8_pingpong.fn)


def problem_specs(m: int, n: int, k: int) -> tuple:
    """The arguments of an m x n x k product: a (m, k) and b (n, k) in e4m3, their float32
    scales, a bf16 c."""
    fp8 = ad.float8_e4m3fn
    return (ArraySpec((m, k), fp8), ArraySpec((n, k), fp8), ArraySpec((m,), ad.float32),
            ArraySpec((n,), ad.float32), ArraySpec((m, n), ad.bfloat16))


def reference(a, b, a_scale, b_scale):
    """The product in float64, scaled, rounded to bf16 once."""
    import ml_dtypes

    product = a.astype("float64") @ b.astype("float64").T
    return (product * a_scale.astype("float64")[:, None] * b_scale.astype("float64")[None, :]).astype(
        ml_dtypes.bfloat16)


def example_inputs(specs, rng) -> list:
    """Small integers and power-of-two scales: every sum and product exact (the interpreter's
    model of the tensor cores is exact there), c NaN."""
    import ml_dtypes
    import numpy as np

    a, b, a_scale, b_scale, c = specs
    return [rng.integers(-4, 5, a.shape).astype(ml_dtypes.float8_e4m3fn),
            rng.integers(-4, 5, b.shape).astype(ml_dtypes.float8_e4m3fn),
            (2.0 ** rng.integers(-3, 4, a_scale.shape)).astype(np.float32),
            (2.0 ** rng.integers(-3, 4, b_scale.shape)).astype(np.float32),
            np.full(c.shape, np.nan, ml_dtypes.bfloat16)]


EXAMPLE_ARGS = {
    "matmul_fp8": (problem_specs(256, 512, 384), {"CTAS": 3}),
    # rows of tiles in pairs, the last pair past the end of a (TMA clips it)
    "matmul_fp8_2cta": (problem_specs(300, 320, 384), {"CTAS": 4, "BN": 128, "STAGES": 6}),
    # an odd count of tiles a CTA, ragged at both ends
    "matmul_fp8_pingpong": (problem_specs(300, 320, 384), {"CTAS": 2}),
    # pairs of tiles in turn, the last pair past the end of a
    "matmul_fp8_pingpong_2cta": (problem_specs(300, 320, 384), {"CTAS": 2, "BN": 64}),
}
