"""fp8 matrix multiply with scales: c = (a @ bᵀ) · a_scale[:, None] · b_scale[None, :], bf16 out.

a is (M, K) and b is (N, K), both float8 e4m3 (or e5m2) with K contiguous: the tensor cores read
8-bit operands K-major only, so b comes as torch's `_scaled_mm` takes it (the transpose of a
row-major (K, N)).  a_scale (M,) and b_scale (N,) are float32 scales per row of a and per row of
b; per-tensor scaling is the case of constant vectors.  The tensor cores accumulate the whole K
into a float32 accumulator (`wgmma ... f32.e4m3.e4m3`, K = 32 per instruction), as cuBLASLt's
fp8 GEMM does with fast accumulation; their sums of fp8 products keep 14 significant bits
(docs/hardware.md §14.2).  With `PROMOTE=n` they sum n slices of K (128 each) at a time,
each sum then added into a float32 total in registers, as cuBLASLt's default form does (tiles
at most 192 wide: the total takes as many registers as the accumulator).  The scales are
applied once to the sum in registers, before the conversion to bf16.

The kernel is the bf16 GEMM's (`matmul.py`): persistent, a producer and two consumer
warpgroups, an `asyncdsl.Pipeline` ring, a TMA-store epilogue in 64 x 64 pieces; slices are
128 bytes of K wide (128 fp8 elements), one swizzled row each.  `matmul_fp8_2cta` runs it in
clusters of two CTAs that share every b slice (multicast); `matmul_fp8_pingpong` gives each
consumer whole 128 x 128 tiles, the two taking turns (`matmul_pingpong`'s schedule), and
`matmul_fp8_pingpong_2cta` does that in pairs.  On the H200 (benchmarks/matmul_fp8.py) ping-pong
wins most K = 4096 problems, promoted 128 x 192 or 128 x 128 tiles the longer K ones, where the
whole K summed on the tensor cores is past 1.5x cuBLASLt's default error (docs/notes/2026-12-03-fp8-gemm.md).

    python -m asyncdsl.examples.matmul_fp8   # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.examples.matmul import (
    check_operands,
    eviction_policies,
    piece_of,
    store_in_pieces,
    tensor_core_layout,
    tile_position,
)
from asyncdsl.examples.matmul_pingpong import ping_pong_k_loop, ping_pong_tiles


@ad.kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384)
def matmul_fp8(a, b, a_scale, b_scale, c, CTAS: ad.constexpr, BM: ad.constexpr = 128, BN: ad.constexpr = 256,
               STAGES: ad.constexpr = 4, SNAKE: ad.constexpr = 16, EVICT_FIRST: ad.constexpr = "",
               PROMOTE: ad.constexpr = 0):
    check_fp8_operands(a, b, a_scale, b_scale, c, CTAS)
    policy = eviction_policies(EVICT_FIRST)  # as the bf16 GEMM's: for problems of few tiles
    M, K = a.shape
    N = b.shape[0]
    BK = 128 // a.dtype.itemsize  # one 128-byte swizzled row of K
    half = BM // 2
    # In clusters of two (`matmul_fp8_2cta`) the CTAs of a pair take tiles one above the other and
    # share each b slice: each loads half of it and multicasts it to both.
    pair = ad.cluster_shape()[0]
    # PROMOTE > 0: the tensor cores sum PROMOTE slices of K at a time, each sum then added into a
    # float32 total in registers (as cuBLASLt without fast accumulation does), which bounds how
    # much their fp8 sums, shorter than float32, lose.  K steps go in whole groups: those past K
    # read zeros (TMA zero fill).
    if not isinstance(PROMOTE, int) or isinstance(PROMOTE, bool) or PROMOTE < 0:
        raise ad.TraceError(f"PROMOTE is how many K slices the tensor cores sum before each addition into "
                            f"float32, a non-negative int (0: the whole K), got {PROMOTE!r}")
    if PROMOTE and BN > 192:  # two 64 x BN float32 tiles a consumer thread: BN / 2 registers each
        raise ad.TraceError("PROMOTE keeps a float32 total beside the accumulator, which fits the consumers' "
                            f"232 registers a thread for BN <= 192, got BN={BN}")
    group = PROMOTE or 1
    k_steps = ad.cdiv(ad.cdiv(K, BK), group) * group
    mine, origin = cluster_tiles(M, N, BM, BN, CTAS, SNAKE)

    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half, BK))  # [slot][consumer]
    b_ring = ad.smem((STAGES, BN, BK), b.dtype, **tensor_core_layout(BN, BK))
    c_out = ad.smem((2, 2, 64, 64), c.dtype, **tensor_core_layout(64, 64))  # [consumer][slot]
    ring = ad.Pipeline(STAGES, loads=3, consumers=2, collective="x" if pair > 1 else None)

    with ad.warpgroup_role(2, registers=40):
        for t in ad.range(mine):
            row, col = origin(t)
            for kk in ad.range(k_steps):
                slot, landed = ring.produce(t * k_steps + kk)
                for h in range(2):
                    ad.async_copy(a.at[ad.ds(row + h * half, half), ad.ds(kk * BK, BK)], a_ring.at[slot, h],
                                  barrier=landed, eviction_policy=policy["a"])
                ad.async_copy(b.at[ad.ds(col, BN), ad.ds(kk * BK, BK)], b_ring.at[slot], barrier=landed,
                              collective="x" if pair > 1 else None, eviction_policy=policy["b"])

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)
        total = ad.registers((half, BN), ad.float32, layout=ad.WGMMA) if PROMOTE else acc
        for t in ad.range(mine):
            row, col = origin(t)
            row = row + me * half
            if PROMOTE:
                total[...] = ad.zeros((half, BN), ad.float32)
                for g in ad.range(k_steps // PROMOTE):
                    for i in range(PROMOTE):  # the tensor cores' sum of one group
                        step = t * k_steps + g * PROMOTE + i
                        slot = ring.consume(step)
                        ad.wgmma(acc, a_ring.at[slot, me], b_ring.at[slot].T, accumulate=i > 0)
                        ad.wgmma_wait(1)
                        if i > 0:
                            ring.release(step - 1)
                    ad.wgmma_wait(0)
                    ring.release(t * k_steps + g * PROMOTE + PROMOTE - 1)
                    total[...] = total[...] + acc[...]
                scales = tile_scales(a_scale, b_scale, row, col, half, BN)
            else:
                for kk in ad.range(k_steps):
                    step = t * k_steps + kk
                    slot = ring.consume(step)
                    ad.wgmma(acc, a_ring.at[slot, me], b_ring.at[slot].T, accumulate=kk > 0)
                    ad.wgmma_wait(1)
                    with ad.when(kk > 0):
                        ring.release(step - 1)
                scales = tile_scales(a_scale, b_scale, row, col, half, BN)  # while the last wgmma runs
                ad.wgmma_wait(0)
                ring.release(t * k_steps + k_steps - 1)
            store_scaled(total, c_out, me, c, scales, row, col)
        ad.await_async_copy(0)


def cluster_tiles(M: int, N: int, BM: int, BN: int, CTAS: int, SNAKE: int):
    """Which BM x BN tiles of the M x N product this CTA takes: (how many, `origin(t)` the (row,
    col) of its t-th).  Clusters take tiles cluster, cluster + clusters, ... in the planar snake
    (`tile_position`); in clusters of two along x the CTAs of a pair take the tiles one above
    the other, so that they read the same slices of b."""
    pair = ad.cluster_shape()[0]
    m_tiles, n_tiles = ad.cdiv(M, BM * pair), ad.cdiv(N, BN)
    cluster, clusters = (ad.program_id(0), CTAS) if pair == 1 else (ad.cluster_id(0), CTAS // pair)
    mine = (m_tiles * n_tiles - cluster + clusters - 1) // clusters

    def origin(t):
        m, n = tile_position(cluster + t * clusters, m_tiles, n_tiles, SNAKE)
        return (m if pair == 1 else m * pair + ad.cluster_cta_id(0)) * BM, n * BN

    return mine, origin


def check_fp8_operands(a, b, a_scale, b_scale, c, CTAS) -> None:
    """Refuse, at trace time, what the fp8 GEMMs do not multiply: besides `check_operands`, a and
    b not float8, scales that are not float32 one a row, a c that is not 16-bit."""
    check_operands(a, b, c, CTAS, b_is_transposed=True)
    fp8 = (ad.float8_e4m3fn, ad.float8_e5m2)
    if a.dtype not in fp8 or b.dtype not in fp8:  # (bf16 products: examples/matmul.py)
        raise ad.TraceError(
            f"a and b must be float8 (e4m3fn or e5m2, either for each), got {a.dtype} and {b.dtype}")
    for name, scale, length in (("a_scale", a_scale, a.shape[0]), ("b_scale", b_scale, b.shape[0])):
        if tuple(scale.shape) != (length,) or scale.dtype != ad.float32:
            raise ad.TraceError(f"{name} must be float32 of shape ({length},), one scale a row, got "
                                f"{scale.dtype} {tuple(scale.shape)}")
    if c.dtype not in (ad.bfloat16, ad.float16):  # 64 x 64 pieces of 128-byte rows
        raise ad.TraceError(f"c must be bfloat16 or float16, got {c.dtype}")


def tile_scales(a_scale, b_scale, row, col, rows: int, columns: int) -> tuple[list, list]:
    """The scales of the rows × columns of c at (row, col): its rows' (64 a tile, in the wgmma
    accumulator's row layout) and its columns' (64 a tile, in its column layout), every load
    issued at once, so the epilogue waits for one round trip to memory, not one a piece."""
    return ([ad.load(a_scale.at[ad.ds(row + i * 64, 64)], layout=ad.WGMMA_ROW, other=0.0)[:, None]
             for i in range(rows // 64)],
            [ad.load(b_scale.at[ad.ds(col + j * 64, 64)], layout=ad.WGMMA_COL, other=0.0)[None, :]
             for j in range(columns // 64)])


def store_scaled(total, c_out, me, c, scales, row, col) -> None:
    """Store consumer `me`'s sum `total` (float32 registers, rows from `row`, columns from `col`)
    into c, each element times its row's and its column's scale (`scales`, from `tile_scales`;
    `store_in_pieces`)."""
    row_scales, column_scales = scales
    store_in_pieces(total, c_out, me, c, row, col,
                    piece=lambda i, j: piece_of(total, i, j) * row_scales[i] * column_scales[j])


matmul_fp8_2cta = ad.kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384,
                            cluster=(2, 1, 1))(matmul_fp8.fn)


@ad.kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384)
def matmul_fp8_pingpong(a, b, a_scale, b_scale, c, CTAS: ad.constexpr, BN: ad.constexpr = 128,
                        STAGES: ad.constexpr = 6, SNAKE: ad.constexpr = 16, EVICT_FIRST: ad.constexpr = ""):
    """The same product with ping-pong consumers (as `matmul_pingpong`): each consumer warpgroup
    owns whole 128 x BN tiles, the CTA's tiles taken in turn, and the two take turns to run their
    K loops, so that one's epilogue (conversion, scales, stores) overlaps the other's wgmmas.
    At fp8 speed a K loop is half as long as at bf16 and the epilogue weighs twice as much.
    In clusters of two (`matmul_fp8_pingpong_2cta`) the CTAs of a pair take tiles one above the
    other and share each b slice, as `matmul_fp8_2cta`'s do."""
    check_fp8_operands(a, b, a_scale, b_scale, c, CTAS)
    if BN not in (64, 128):  # a 128 x BN float32 accumulator: BN registers a thread
        raise ad.TraceError(f"BN must be 64 or 128 (the accumulator of a 128 x BN tile in one warpgroup's "
                            f"registers), got {BN!r}")
    policy = eviction_policies(EVICT_FIRST)
    BM, BK = 128, 128 // a.dtype.itemsize
    M, K = a.shape
    N = b.shape[0]
    pair = ad.cluster_shape()[0]
    k_steps = ad.cdiv(K, BK)
    mine, origin = cluster_tiles(M, N, BM, BN, CTAS, SNAKE)

    a_ring = ad.smem((STAGES, BM, BK), a.dtype, **tensor_core_layout(BM, BK))
    b_ring = ad.smem((STAGES, BN, BK), b.dtype, **tensor_core_layout(BN, BK))
    c_out = ad.smem((2, 2, 64, 64), c.dtype, **tensor_core_layout(64, 64))  # [consumer][slot]
    # a slot is one consumer's
    ring = ad.Pipeline(STAGES, loads=2, consumers=1, collective="x" if pair > 1 else None)
    k_loops = ad.turns((0, 1))

    with ad.warpgroup_role(2, registers=40):
        for t in ad.range(mine):
            row, col = origin(t)
            for kk in ad.range(k_steps):
                slot, landed = ring.produce(t * k_steps + kk)
                ad.async_copy(a.at[ad.ds(row, BM), ad.ds(kk * BK, BK)], a_ring.at[slot], barrier=landed,
                              eviction_policy=policy["a"])
                ad.async_copy(b.at[ad.ds(col, BN), ad.ds(kk * BK, BK)], b_ring.at[slot], barrier=landed,
                              collective="x" if pair > 1 else None, eviction_policy=policy["b"])

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((BM, BN), ad.float32, layout=ad.WGMMA)
        for t in ping_pong_tiles(mine, me):
            row, col = origin(t)
            first = t * k_steps
            ping_pong_k_loop(acc, ring, k_loops, first, k_steps,
                             lambda slot: (a_ring.at[slot], b_ring.at[slot].T))
            scales = tile_scales(a_scale, b_scale, row, col, BM, BN)  # while the last wgmma runs
            ad.wgmma_wait(0)
            ring.release(first + k_steps - 1)
            store_scaled(acc, c_out, me, c, scales, row, col)
        ad.await_async_copy(0)


matmul_fp8_pingpong_2cta = ad.kernel(grid=lambda a, b, a_scale, b_scale, c, CTAS, **_: (CTAS,), block=384,
                                     cluster=(2, 1, 1))(matmul_fp8_pingpong.fn)


def problem_specs(m: int, n: int, k: int) -> tuple[ad.ArraySpec, ...]:
    """The arguments of an m x n x k product: a (m, k) and b (n, k) in e4m3, their float32
    scales, a bf16 c."""
    fp8 = ad.float8_e4m3fn
    return (ad.ArraySpec((m, k), fp8), ad.ArraySpec((n, k), fp8), ad.ArraySpec((m,), ad.float32),
            ad.ArraySpec((n,), ad.float32), ad.ArraySpec((m, n), ad.bfloat16))


def reference(a, b, a_scale, b_scale) -> np.ndarray:
    """The product in float64, scaled, rounded to bf16 once."""
    product = a.astype(np.float64) @ b.astype(np.float64).T
    return (product * a_scale.astype(np.float64)[:, None] * b_scale.astype(np.float64)[None, :]).astype(
        ml_dtypes.bfloat16)


def example_inputs(specs, rng) -> list[np.ndarray]:
    """Small integers and power-of-two scales: every sum and product exact (the interpreter's
    model of the tensor cores is exact there), c NaN."""
    a, b, a_scale, b_scale, c = specs
    return [rng.integers(-4, 5, a.shape).astype(ml_dtypes.float8_e4m3fn),
            rng.integers(-4, 5, b.shape).astype(ml_dtypes.float8_e4m3fn),
            (2.0 ** rng.integers(-3, 4, a_scale.shape)).astype(np.float32),
            (2.0 ** rng.integers(-3, 4, b_scale.shape)).astype(np.float32),
            np.full(c.shape, np.nan, ml_dtypes.bfloat16)]


EXAMPLE_ARGS = {
    "matmul_fp8": (
        problem_specs(256, 512, 384),
        {"CTAS": 3},
    ),
    "matmul_fp8_2cta": (  # rows of tiles in pairs, the last pair past the end of a (TMA clips it)
        problem_specs(300, 320, 384),
        {"CTAS": 4, "BN": 128, "STAGES": 6},
    ),
    "matmul_fp8_pingpong": (  # an odd count of tiles a CTA, ragged at both ends
        problem_specs(300, 320, 384),
        {"CTAS": 2},
    ),
    "matmul_fp8_pingpong_2cta": (  # pairs of tiles in turn, the last pair past the end of a
        problem_specs(300, 320, 384),
        {"CTAS": 2, "BN": 64},
    ),
}


def main(shape=(300, 512, 384)) -> int:
    from asyncdsl.runtime import has_gpu

    m, n, k = shape
    specs = problem_specs(m, n, k)
    a, b, a_scale, b_scale, c = example_inputs(specs, np.random.default_rng(0))
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import device_facts, to_device, to_host

        c_d = to_device(c)
        matmul_fp8(*(to_device(x) for x in (a, b, a_scale, b_scale)), c_d,
                   CTAS=device_facts(0).multiprocessor_count)
        c, where = to_host(c_d), "GPU"
    else:
        matmul_fp8.interpret(a, b, a_scale, b_scale, c, CTAS=3)
        where = "interpreter"
    ok = np.array_equal(c.view(np.uint16), reference(a, b, a_scale, b_scale).view(np.uint16))
    print(f"matmul_fp8 {m}x{n}x{k} on the {where}: {'exact' if ok else 'MISMATCH'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
