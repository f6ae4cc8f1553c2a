"""Block-scaled fp8 matrix multiply (DeepSeek-V3's recipe): `c = gemm_fp8_blockscaled(a, a_scales,
b, b_scales)`, c[m, n] = Σ_kb (Σ_{k in block kb} a[m, k] b[n, k]) · a_scales[m, kb] ·
b_scales[n // 128, kb], in bfloat16.

a is (M, K) and b is (N, K), float8 e4m3, K contiguous.  a_scales holds a float32 scale for each
row of a and each 128-wide block of K, (M, K/128) as indexed, stored M-major: each K block's
scales of all rows are contiguous, the (K/128, M) array transposed (as DeepGEMM and torch's
blockwise `_scaled_mm` take them).  A row-major (M, K/128) array is copied into that layout.
b_scales (N/128, K/128) holds one float32 scale for each 128 x 128 block of b, row-major.  K/128
and N/128 round up: a partial block has a scale of its own.

Promotion: each 128-deep slice of K is one wgmma whose float32 sum (the tensor cores keep 14
significant bits of fp8 products, docs/hardware.md §14.2) is multiplied by its row's and block's
scale and added, rounded once (`fma`), into a float32 total in registers
(`mma_loop.block_scaled_mma_loop`).  The scales go through the load ring beside the slices: a
BM-long column of a_scales and an 8 x 4 box of b_scales a step, whose first row holds the tile's
scale of the step's block among four (TMA lands in 128-byte slots and reads from 16-byte-aligned
starts).

Tiles: the cooperative GEMM's (a producer, two consumers), BM x BN with BN dividing 128 so that a
tile meets one block of b's scales; 64-row tiles split by columns between the consumers for small
M, split K adding in order (`split_k_sum.add_in_order`) when the tiles are fewer than the SMs.
With `pair=True` (`matmul_fp8_blockscaled_2cta`) clusters of two CTAs take tiles one above the
other and multicast each slice of b they share, a quarter less from L2 a step; each CTA loads
its own box of b's scales (128 bytes, which TMA would not split).
"""

from __future__ import annotations

from asyncdsl.blocks.epilogues import store_in_pieces, store_ring, store_rows
from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.blocks.grouped_tiles import GroupedTiles
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import block_scaled_mma_loop
from asyncdsl.blocks.mma_operands import check_block_scales, check_fp8_matrices, tensor_core_layout
from asyncdsl.blocks.persistent_tiles import PersistentTiles
from asyncdsl.blocks.shapes import product_shape
from asyncdsl.blocks.split_k_sum import add_in_order, check_running, part_number
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.block_scales import check_scale_shapes, tma_layout
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.gemm_cooperative import INTERPRETED_CTAS
from asyncdsl.kernels.gemm_fp8_blockscaled_choice import BLOCK, choose, constexprs
from asyncdsl.kernels.outputs import apart, empty, partial_sums

# A step's box of b_scales: 8 rows of blocks of b (the tile's first; a TMA slot is 128 bytes) by the
# 4 blocks of K that make the 16-byte-aligned piece holding the step's
B_SCALES_BOX = (8, 4)


@on_stream
def gemm_fp8_blockscaled(a, a_scales, b, b_scales, *, out=None, config: GemmConfig | None = None,
                         pair: bool = False, ctas: int | None = None, stream=None):
    """c (M, N) bfloat16 = a (M, K) times b (N, K)ᵀ, float8 e4m3, each 128-deep slice of the product
    scaled by a_scales (M, K/128) float32 (one a row and K block, M-major: see the module) and
    b_scales (N/128, K/128) float32 (one a 128 x 128 block of b).  `config` overrides the one
    `choose` picks for the shape; `pair` runs it in clusters of two CTAs sharing b's slices (not
    with split K)."""
    m, n, k = product_shape(a, b, b_is_transposed=True)
    check_scale_shapes(a, a_scales, b, b_scales, BLOCK)
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a) // 2 * 2)
    config = config or choose(m, n, k, ctas)
    c = empty(a, (m, n), ad.bfloat16) if out is None else apart(out, a=a, a_scales=a_scales, b=b,
                                                                  b_scales=b_scales)
    sa, sb = tma_layout(a_scales), tma_layout(b_scales.T)
    if pair and (config.SPLIT_K > 1 or config.SHARE != "b" or ctas % 2):
        raise ad.ArgumentError(f"pair: clusters of two CTAs share b's slices, on an even count of CTAs and "
                               f"without split K, got SPLIT_K={config.SPLIT_K}, SHARE={config.SHARE!r} and "
                               f"{ctas} CTAs", user_location())
    if config.SPLIT_K > 1:
        partial, flags = _workspace(a, m, n, config, stream)
        launch(matmul_fp8_blockscaled_split_k, a, sa, b, sb, c, partial, flags, stream=stream, CTAS=ctas,
               **constexprs(config))
    else:
        kernel = matmul_fp8_blockscaled_2cta if pair else matmul_fp8_blockscaled
        launch(kernel, a, sa, b, sb, c, stream=stream, CTAS=ctas, **constexprs(config))
    return c


def _workspace(a, m: int, n: int, config: GemmConfig, stream) -> tuple:
    """Split K's float32 partial sums and flags, one per consumer's part of a tile
    (`outputs.partial_sums`)."""
    return partial_sums(a, stream, ("fp8 block-scaled split K", m, n, config.SPLIT_K, config.BM, config.BN),
                        (config.SPLIT_K - 1, m, n), 2 * -(-m // config.BM) * -(-n // config.BN))


@kernel(grid=lambda a, a_scales, b, b_scales, c, CTAS, **_: (CTAS,), block=384)
def matmul_fp8_blockscaled(a, a_scales, b, b_scales, c, CTAS: constexpr, BM: constexpr = 128,
                           BN: constexpr = 128, STAGES: constexpr = 5, SPLIT: constexpr = "m",
                           SNAKE: constexpr = 16):
    """The product in BM x BN tiles; a_scales (K/128, M') and b_scales (N/128, K'/128) as
    `tma_layout` makes them (M' and K'/128 multiples of 4)."""
    blockscaled(a, a_scales, b, b_scales, c, CTAS,
                GemmConfig(BM=BM, BN=BN, BK=BLOCK, STAGES=STAGES, SPLIT=SPLIT, SNAKE=SNAKE))


# The same kernel in clusters of two CTAs, which take tiles one above the other and share
# (multicast) every slice of b.
matmul_fp8_blockscaled_2cta = kernel(grid=lambda a, a_scales, b, b_scales, c, CTAS, **_: (CTAS,), block=384,
                                     cluster=(2, 1, 1), name="matmul_fp8_blockscaled_2cta")(
    matmul_fp8_blockscaled.fn)


@kernel(grid=lambda a, a_scales, b, b_scales, c, partial, flags, CTAS, **_: (CTAS,), block=384)
def matmul_fp8_blockscaled_split_k(a, a_scales, b, b_scales, c, partial, flags, CTAS: constexpr,
                                   SPLIT_K: constexpr = 2, BM: constexpr = 128, BN: constexpr = 128,
                                   STAGES: constexpr = 5, SPLIT: constexpr = "m", SNAKE: constexpr = 16):
    """The product with SPLIT_K units a tile, their totals added in order through `partial`
    (float32 (SPLIT_K - 1, M, N)) and `flags` (int32 zeros, two a tile, left at zero)."""
    blockscaled(a, a_scales, b, b_scales, c, CTAS,
                GemmConfig(BM=BM, BN=BN, BK=BLOCK, STAGES=STAGES, SPLIT=SPLIT, SNAKE=SNAKE, SPLIT_K=SPLIT_K),
                running=(partial, flags))


def blockscaled(a, a_scales, b, b_scales, c, CTAS, config: GemmConfig, running=None, grouped=None) -> None:
    """The body of the kernels: a producer warpgroup loads each step's slices of a and b and its
    scales; two consumers each own a part of the tile (`config.part`) and its float32 total.
    `grouped` (G, bounds): groups of a's rows (`GroupedTiles`' bounds, ragged), each times its
    own (N, K) part of b (stacked (G·N, K), N a multiple of 128) and of b_scales; the groups'
    rows start anywhere, so a's scales are read by the consumers (TMA would need 16-byte-aligned
    starts) and rows past a group's end stored from registers."""
    config.check()
    groups = grouped[0] if grouped else 1
    check_fp8_matrices(a, b.at[ad.ds(0, b.shape[0] // groups), :] if grouped else b, c, CTAS)  # one group's b
    check_block_scales(a, a_scales, b, b_scales, BLOCK)
    BM, BN, STAGES, SPLIT_K = config.BM, config.BN, config.STAGES, config.SPLIT_K
    (pm, pn), (a_parts, b_parts) = config.part, config.parts()
    if BLOCK % BN or pm % 64 or pn % 64:
        raise ad.TraceError(f"BN must divide {BLOCK} (a tile meets one block of b's scales) and each "
                            f"consumer's part be a multiple of 64 x 64 (the epilogue's pieces), got BM={BM}, "
                            f"BN={BN}, SPLIT={config.SPLIT!r}")
    (M, K), N = a.shape, b.shape[0] // groups
    k_steps = ad.cdiv(ad.cdiv(K, BLOCK), SPLIT_K)  # steps past K read zeros (and zero scales)
    if grouped and (N % BLOCK or SPLIT_K > 1):
        raise ad.TraceError(f"grouped: each group's N must be a multiple of {BLOCK} and K whole, got N={N}, "
                            f"SPLIT_K={SPLIT_K}")
    tiles: GroupedTiles | PersistentTiles
    pair = ad.cluster_shape()[0]
    if pair > 1 and (grouped or SPLIT_K > 1 or config.SHARE != "b"):
        raise ad.TraceError(f"in clusters of two the CTAs share b's slices, not grouped nor with split K; "
                            f"got SPLIT_K={SPLIT_K}, SHARE={config.SHARE!r}{', grouped' if grouped else ''}")
    if grouped:
        tiles = GroupedTiles(grouped[0], grouped[1], N, BM, BN, CTAS, ragged=True)
    else:
        tiles = PersistentTiles(M, N, BM, BN, CTAS, config.SNAKE, SPLIT_K)  # pairs: tiles one above the other
    shared = "x" if pair > 1 else None  # b's slices, multicast to both CTAs of a pair
    if running is not None:  # split K: never grouped (refused above)
        assert isinstance(tiles, PersistentTiles)
        check_running(running, c, 2 * tiles.m_tiles * tiles.n_tiles, SPLIT_K,
                      tiles.units(tiles.m_tiles * tiles.n_tiles, SPLIT_K), tiles.clusters, 1)

    a_ring = ad.smem((STAGES, a_parts, pm, BLOCK), a.dtype, **tensor_core_layout(pm, BLOCK))
    b_ring = ad.smem((STAGES, b_parts, pn, BLOCK), b.dtype, **tensor_core_layout(pn, BLOCK))
    a_scale_ring = None if grouped else ad.smem((STAGES, a_parts, pm), ad.float32)
    b_scale_ring = ad.smem((STAGES, *B_SCALES_BOX), ad.float32)
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=(1 if grouped else 2) * a_parts + b_parts + 1, consumers=2,
                       collective=shared)

    def load(work, kk, slot, landed):
        k_block, b_col = work.split * k_steps + kk, work.col + (work.group * N if grouped else 0)
        for h in range(a_parts):
            rows = ad.ds(work.row + h * pm, pm)
            ad.async_copy(a.at[rows, ad.ds(k_block * BLOCK, BLOCK)], a_ring.at[slot, h], barrier=landed)
            if not grouped:
                ad.async_copy(a_scales.at[k_block, rows], a_scale_ring.at[slot, h], barrier=landed)
        for h in range(b_parts):
            ad.async_copy(b.at[ad.ds(b_col + h * pn, pn), ad.ds(k_block * BLOCK, BLOCK)],
                          b_ring.at[slot, h], barrier=landed, collective=shared)
        rows, blocks = B_SCALES_BOX
        ad.async_copy(b_scales.at[ad.ds(b_col // BLOCK, rows), ad.ds(k_block // blocks * blocks, blocks)],
                      b_scale_ring.at[slot], barrier=landed)

    with ad.warpgroup_role(2, registers=40):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        a_part, b_part = (me, 0) if a_parts == 2 else (0, me)
        accs = [ad.registers((pm, pn), ad.float32, layout=ad.WGMMA) for _ in range(2)]
        total = ad.registers((pm, pn), ad.float32, layout=ad.WGMMA)

        def scale(slot, k_block, row):  # this part's rows' scales times the tile's block's
            rows = (ad.load(a_scales.at[k_block, ad.ds(row, pm)], layout=ad.WGMMA_ROW) if grouped
                    else a_scale_ring.at[slot, a_part].load(layout=ad.WGMMA_ROW))
            landed = b_scale_ring.at[slot, 0].load()  # the tile's scales of 4 K blocks, k_block's among them
            picked = ad.iota(landed.shape, ad.int32, 0) == k_block % B_SCALES_BOX[1]
            return (rows * ad.where(picked, landed, 0.0).sum())[:, None]

        for work in tiles:
            row, col = work.row + a_part * pm, work.col + b_part * pn
            first = work.split * k_steps
            block_scaled_mma_loop(accs, total, ring, work.index * k_steps, k_steps,
                                  lambda slot: (a_ring.at[slot, a_part], b_ring.at[slot, b_part].T),
                                  lambda slot, kk, first=first, row=row: scale(slot, first + kk, row))
            if grouped:
                with ad.when(row + pm <= work.end):
                    store_in_pieces(total, c_out, me, c, row, col)
                with ad.when(row + pm > work.end):
                    store_rows(total, c, row, col, work.end - row)
            elif running is None:
                store_in_pieces(total, c_out, me, c, row, col)
            else:
                partial, flags = running
                flag = flags.at[part_number(row, col, (pm, pn), tiles.n_tiles * b_parts)]
                add_in_order(total, partial, flag, work.split, SPLIT_K, c, c_out, me, row, col)
        ad.await_async_copy(0)


def problem_specs(m: int, n: int, k: int) -> tuple:
    """The arguments of an m x n x k product: a (m, k) and b (n, k) in e4m3, their block scales
    as the kernel reads them, a bf16 c."""
    fp8, f32 = ad.float8_e4m3fn, ad.float32
    k_blocks = -(-k // BLOCK)
    return (ArraySpec((m, k), fp8), ArraySpec((k_blocks, -(-m // 4) * 4), f32), ArraySpec((n, k), fp8),
            ArraySpec((-(-n // BLOCK), -(-k_blocks // 4) * 4), f32), ArraySpec((m, n), ad.bfloat16))


EXAMPLE_ARGS = {
    # ragged at both ends: M, N and K not multiples of the tiles
    "matmul_fp8_blockscaled": (problem_specs(200, 320, 400), {"CTAS": 3}),
    # pairs of 128-row tiles sharing b, the last pair's lower tile past M
    "matmul_fp8_blockscaled_2cta": (problem_specs(384, 256, 512), {"CTAS": 4}),
    # 64-row tiles, the consumers halving the columns, K in two
    "matmul_fp8_blockscaled_split_k": ((*problem_specs(64, 256, 1024), ArraySpec((1, 64, 256), ad.float32),
                                        ArraySpec((4,), ad.int32)),
                                       {"CTAS": 8, "SPLIT_K": 2, "BM": 64, "SPLIT": "n", "STAGES": 7}),
}
