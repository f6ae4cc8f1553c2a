"""Grouped GEMM for mixture-of-experts layers, the group sizes on the device (no host sync, one
kernel for every routing): `c = grouped_gemm(a, b, offsets)` with `torch._grouped_mm`'s meaning,
and `c = grouped_gemm_masked(a, b, counts)` for a fixed capacity per group (decode under CUDA
graphs); block-scaled fp8 forms of both, `grouped_gemm_fp8_blockscaled(a, a_scales, b, b_scales,
offsets)` and `grouped_gemm_fp8_blockscaled_masked(...)`, with `gemm_fp8_blockscaled`'s scales
and b (G, N, K) K-major.

Contiguous layout: a (rows, K) holds the groups' rows one group after the other, offsets (G,)
int32 their cumulative ends (group g: rows offsets[g-1] .. offsets[g], from 0), b (G, K, N) the
groups' weights, c (rows, N); rows past offsets[G-1] are left as they were.  Masked layout: a
(G, capacity, K), counts (G,) int32, c (G, capacity, N), each group's first counts[g] rows
multiplied, the others left as they were.  Groups of any size, zero included; a size past the
rows there are is clamped to them.

The cooperative GEMM's structure (a producer, two consumers halving 128 x BN tiles, a load ring)
walking `GroupedTiles` over sizes read by `asyncdsl.load_index`: a tile's group picks the rows
of b; a consumer whose 64 rows run past its group's end stores the rows that are its group's
from registers (`epilogues.store_rows`), the others through TMA.
"""

from __future__ import annotations

from asyncdsl.blocks.epilogues import store_in_pieces, store_ring, store_rows
from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.blocks.grouped_tiles import GroupedTiles
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import drain, mma_loop
from asyncdsl.blocks.mma_operands import check_16_bit, tensor_core_layout
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.block_scales import check_scale_shapes, tma_layout
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.gemm_cooperative import INTERPRETED_CTAS
from asyncdsl.kernels.gemm_fp8_blockscaled import BLOCK, blockscaled
from asyncdsl.kernels.outputs import apart, checked_out, empty

LAYOUTS = ("offsets", "masked")


@on_stream
def grouped_gemm(a, b, offsets, *, out=None, ctas: int | None = None, stream=None):
    """c (rows, N): rows offsets[g-1] .. offsets[g] of a (rows, K) times b[g] (b (G, K, N)),
    bfloat16 or float16; offsets (G,) int32 on the device with a."""
    k = a.shape[-1]
    if len(b.shape) != 3 or b.shape[1] != k or tuple(offsets.shape) != (b.shape[0],):
        raise ad.ArgumentError(f"b must be (G, K, N) with K = {k} of a {tuple(a.shape)} and offsets (G,), "
                               f"got b {tuple(b.shape)} and offsets {tuple(offsets.shape)}", user_location())
    groups, _, n = b.shape
    c = empty(a, (a.shape[0], n), a.dtype) if out is None else apart(out, a=a, b=b, offsets=offsets)
    _launch(a, b.reshape(groups * k, n), c, offsets, "offsets", ctas, stream)
    return c


@on_stream
def grouped_gemm_masked(a, b, counts, *, out=None, ctas: int | None = None, stream=None):
    """c (G, capacity, N): the first counts[g] rows of a[g] (a (G, capacity, K)) times b[g]
    (b (G, K, N)); counts (G,) int32 on the device with a."""
    groups, capacity, k = a.shape
    if len(b.shape) != 3 or tuple(b.shape[:2]) != (groups, k):
        raise ad.ArgumentError(f"b must be (G, K, N) = ({groups}, {k}, N) for a (G, capacity, K) = "
                               f"{tuple(a.shape)}, got {tuple(b.shape)}", user_location())
    n = b.shape[2]
    shape, rows = (groups, capacity, n), groups * capacity
    c = empty(a, shape, a.dtype) if out is None else apart(checked_out(out, shape), a=a, b=b, counts=counts)
    _launch(a.reshape(rows, k), b.reshape(groups * k, n), c.reshape(rows, n), counts, "masked", ctas, stream)
    return c


def _launch(a, b, c, sizes, layout, ctas, stream) -> None:
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a))
    bn = 128 if c.shape[1] <= 1024 else 256
    launch(matmul_grouped_sizes, a, b, c, sizes, stream=stream, CTAS=ctas, LAYOUT=layout, BN=bn)


def group_bounds(sizes, rows: int, groups: int, layout: str):
    """bounds(g, before): (first row, end) of group g, read from `sizes` (offsets or counts, int32
    on the device) where the tile scheduler asks, clamped to the `rows` of a; `before` is where
    group g - 1 ended."""
    capacity = rows // groups

    def offsets(g, before):
        return before, ad.load_index(sizes.at[g]).min(rows).max(before)

    def counts(g, before):
        return g * capacity, ad.load_index(sizes.at[g]).max(0).min(capacity) + g * capacity

    return offsets if layout == "offsets" else counts


@kernel(grid=lambda a, b, c, sizes, CTAS, **_: (CTAS,), block=384)
def matmul_grouped_sizes(a, b, c, sizes, CTAS: constexpr, LAYOUT: constexpr = "offsets",
                         BN: constexpr = 256, BK: constexpr = 64, STAGES: constexpr = 4):
    """c's groups of rows, each a's same rows times its group's weights: a (rows, K), b the
    groups' (K, N) weights stacked (G·K, N), c (rows, N), `sizes` (G,) int32: cumulative row ends
    (LAYOUT "offsets") or the row counts of groups of rows // G rows each ("masked")."""
    BM = 128
    (M, K), N = a.shape, b.shape[1]
    groups = b.shape[0] // K if K else 0
    if LAYOUT not in LAYOUTS:
        raise ad.TraceError(f"LAYOUT must be one of {LAYOUTS}, got {LAYOUT!r}")
    if groups < 1 or b.shape[0] != groups * K or tuple(sizes.shape) != (groups,) \
            or sizes.dtype != ad.int32 or (LAYOUT == "masked" and M % groups):
        raise ad.TraceError(f"b must be the groups' (K, N) weights stacked, (G * {K}, N), and sizes int32 "
                            f"(G,) (masked: G dividing a's {M} rows), got b {tuple(b.shape)} and sizes "
                            f"{sizes.dtype} {tuple(sizes.shape)}")
    if tuple(c.shape) != (M, N) or isinstance(CTAS, bool) or not isinstance(CTAS, int) or CTAS < 1:
        raise ad.TraceError(f"c must be (rows, N) = {(M, N)} and CTAS a positive int, got c "
                            f"{tuple(c.shape)} and CTAS={CTAS!r}")
    check_16_bit(a, b, c)
    half, k_steps = BM // 2, ad.cdiv(K, BK)
    tiles = GroupedTiles(groups, group_bounds(sizes, M, groups, LAYOUT), N, BM, BN, CTAS, ragged=True)
    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half))
    b_ring = ad.smem((STAGES, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=3, consumers=2)

    def load(work, kk, slot, landed):
        for h in range(2):  # rows past the group's end are the next group's: their products are not stored
            ad.async_copy(a.at[ad.ds(work.row + h * half, half), ad.ds(kk * BK, BK)], a_ring.at[slot, h],
                          barrier=landed)
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
            row = work.row + me * half
            with ad.when(row + half <= work.end):
                store_in_pieces(acc, c_out, me, c, row, work.col)
            with ad.when(row + half > work.end):
                store_rows(acc, c, row, work.col, work.end - row)
        ad.await_async_copy(0)


@on_stream
def grouped_gemm_fp8_blockscaled(a, a_scales, b, b_scales, offsets, *, out=None, ctas: int | None = None,
                                  stream=None):
    """c (rows, N) bfloat16: rows offsets[g-1] .. offsets[g] of a (rows, K) times b[g]ᵀ (b (G, N,
    K)), float8 e4m3, block-scaled as `gemm_fp8_blockscaled`: a_scales (rows, K/128), b_scales
    (G, N/128, K/128); N a multiple of 128."""
    if len(b.shape) != 3:
        raise ad.ArgumentError(f"b must be (G, N, K), got {tuple(b.shape)}", user_location())
    groups, n, k = b.shape
    c = empty(a, (a.shape[0], n), ad.bfloat16) if out is None else apart(
        out, a=a, a_scales=a_scales, b=b, b_scales=b_scales, offsets=offsets)
    _launch_fp8(a, a_scales, b, b_scales, c, offsets, "offsets", ctas, stream)
    return c


@on_stream
def grouped_gemm_fp8_blockscaled_masked(a, a_scales, b, b_scales, counts, *, out=None,
                                         ctas: int | None = None, stream=None):
    """c (G, capacity, N) bfloat16: the first counts[g] rows of a[g] (a (G, capacity, K)) times
    b[g]ᵀ (b (G, N, K)), float8 e4m3, a_scales (G, capacity, K/128), b_scales (G, N/128, K/128)."""
    groups, capacity, k = a.shape
    if len(b.shape) != 3 or b.shape[0] != groups or b.shape[2] != k:
        raise ad.ArgumentError(f"b must be (G, N, K) = ({groups}, N, {k}) for a (G, capacity, K) = "
                               f"{tuple(a.shape)}, got {tuple(b.shape)}", user_location())
    rows, n = groups * capacity, b.shape[1]
    if tuple(a_scales.shape) != (groups, capacity, -(-k // BLOCK)):
        raise ad.ArgumentError(f"a_scales must be (G, capacity, K/128) = "
                               f"{(groups, capacity, -(-k // BLOCK))}, got {tuple(a_scales.shape)}",
                               user_location())
    shape = (groups, capacity, n)
    c = empty(a, shape, ad.bfloat16) if out is None else apart(  # reshaped below
        checked_out(out, shape), a=a, a_scales=a_scales, b=b, b_scales=b_scales, counts=counts)
    _launch_fp8(a.reshape(rows, k), a_scales.reshape(rows, -(-k // BLOCK)), b, b_scales, c.reshape(rows, n),
                counts, "masked", ctas, stream)
    return c


def _launch_fp8(a, a_scales, b, b_scales, c, sizes, layout, ctas, stream) -> None:
    groups, n, k = b.shape
    if len(b_scales.shape) != 3 or b_scales.shape[0] != groups:
        raise ad.ArgumentError(f"b_scales must be (G, N/128, K/128) for b {tuple(b.shape)}, got "
                               f"{tuple(b_scales.shape)}", user_location())
    if tuple(sizes.shape) != (groups,):
        raise ad.ArgumentError(f"the group sizes must be ({groups},), one a group of b {tuple(b.shape)} "
                               f"(masked: a's groups too), got {tuple(sizes.shape)}", user_location())
    check_scale_shapes(a, a_scales, b[0], b_scales[0], BLOCK)
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a))
    stacked_scales = b_scales.reshape(groups * b_scales.shape[1], b_scales.shape[2])
    launch(matmul_grouped_fp8_blockscaled, a, tma_layout(a_scales), b.reshape(groups * n, k),
           tma_layout(stacked_scales.T), c, sizes, stream=stream, CTAS=ctas, LAYOUT=layout)


@kernel(grid=lambda a, a_scales, b, b_scales, c, sizes, CTAS, **_: (CTAS,), block=384)
def matmul_grouped_fp8_blockscaled(a, a_scales, b, b_scales, c, sizes, CTAS: constexpr,
                                   LAYOUT: constexpr = "offsets", BM: constexpr = 128, BN: constexpr = 128,
                                   STAGES: constexpr = 5, SPLIT: constexpr = "m"):
    """The block-scaled product of each group of a's rows (`sizes` as `matmul_grouped_sizes`
    reads them) and its (N, K) part of b, stacked (G·N, K); the scales as
    `matmul_fp8_blockscaled` reads them, b's stacked (G·N/128, K'/128)."""
    if len(sizes.shape) != 1 or sizes.dtype != ad.int32 or LAYOUT not in LAYOUTS:
        raise ad.TraceError(f"sizes must be int32 (G,) and LAYOUT one of {LAYOUTS}, got {sizes.dtype} "
                            f"{tuple(sizes.shape)} and {LAYOUT!r}")
    groups = sizes.shape[0]
    config = GemmConfig(BM=BM, BN=BN, BK=BLOCK, STAGES=STAGES, SPLIT=SPLIT)
    blockscaled(a, a_scales, b, b_scales, c, CTAS, config,
                grouped=(groups, group_bounds(sizes, a.shape[0], groups, LAYOUT)))


def example_inputs(specs, rng) -> list:
    """Small integers in a and b (every sum exact), c NaN, and sizes: uneven offsets with an
    empty group (or counts with an empty group and a full one)."""
    import ml_dtypes
    import numpy as np

    a, b, c, sizes = specs
    groups = sizes.shape[0]
    cut = np.sort(rng.integers(0, a.shape[0] + 1, groups - 1))
    cut[0] = cut[1] if groups > 2 else cut[0]  # an empty group
    return [rng.integers(-3, 4, a.shape).astype(ml_dtypes.bfloat16),
            rng.integers(-3, 4, b.shape).astype(ml_dtypes.bfloat16),
            np.full(c.shape, np.nan, ml_dtypes.bfloat16), np.append(cut, a.shape[0]).astype(np.int32)]


EXAMPLE_ARGS = {
    "matmul_grouped_fp8_blockscaled": (
        (ArraySpec((300, 256), ad.float8_e4m3fn), ArraySpec((2, 300), ad.float32),
         ArraySpec((3 * 128, 256), ad.float8_e4m3fn), ArraySpec((3, 4), ad.float32),
         ArraySpec((300, 128), ad.bfloat16), ArraySpec((3,), ad.int32)), {"CTAS": 3}),
    "matmul_grouped_sizes": ((ArraySpec((300, 192), ad.bfloat16), ArraySpec((3 * 192, 320), ad.bfloat16),
                              ArraySpec((300, 320), ad.bfloat16), ArraySpec((3,), ad.int32)), {"CTAS": 3}),
}
