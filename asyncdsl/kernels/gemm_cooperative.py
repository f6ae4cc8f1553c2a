"""bf16 matrix multiply on the tensor cores, c = a @ b (float32 accumulation, bf16 out):
`c = asyncdsl.kernels.gemm(a, b)`.

A persistent, warp-specialized kernel built from `asyncdsl.blocks`.  CTAS CTAs (about one per
SM) walk the units of work (`PersistentTiles`: tiles in a planar snake, or shares of a tile's K).
Warpgroup 2, the producer, streams (BM, BK) slices of a and (BK, BN) slices of b into a ring of
STAGES slots (`load_ring.produce`); warpgroups 0 and 1, the consumers, each own half of the tile
(BM/2 rows, or BN/2 columns with SPLIT "n"), run the wgmma K loop over the ring
(`mma_loop`) and store their half in 64 x 64 pieces (`epilogues.store_in_pieces`) while the
producer loads the next tile's slices.  In clusters of two the CTAs of a pair take neighbouring
tiles and multicast the slices they share (`matmul_2cta`).  TMA zero-fills loads past the
edges and clips stores: K and N multiples of 8.

Few tiles: SPLIT_K units a tile, adding into a float32 c by TMA reduce-add (`matmul`), or in the
order of the splits into a bf16 c (`matmul_split_k`, `split_k_sum.add_in_order`); or one
consumer a CTA owning whole 64-row tiles (`matmul_narrow`).  The host function
`asyncdsl.kernels.gemm` picks among them and the ping-pong kernel (`gemm_choice`).
"""

from __future__ import annotations

from asyncdsl.blocks.epilogues import store_in_pieces, store_ring, store_whole
from asyncdsl.blocks.gemm_config import GemmConfig, eviction_policies
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import drain, mma_loop
from asyncdsl.blocks.mma_operands import as_read, check_16_bit, check_operands, tensor_core_layout
from asyncdsl.blocks.persistent_tiles import PersistentTiles
from asyncdsl.blocks.split_k_sum import add_in_order, check_running, part_number, split_k_flags
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec

INTERPRETED_CTAS = 4


@kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384, profile_events=32768)
def matmul(a, b, c, CTAS: constexpr, BM: constexpr = 128, BN: constexpr = 256, BK: constexpr = 64,
           STAGES: constexpr = 4, SPLIT: constexpr = "m", EPILOGUE: constexpr = "tma64",
           SNAKE: constexpr = 16, REGISTERS: constexpr = (40, 232), IN_FLIGHT: constexpr = 1,
           SPLIT_K: constexpr = 1, SHARE: constexpr = "b", EVICT_FIRST: constexpr = ""):
    cooperative(a, b, c, CTAS, GemmConfig(BM, BN, BK, STAGES, SPLIT, EPILOGUE, SNAKE, REGISTERS, IN_FLIGHT,
                                          SPLIT_K, SHARE, EVICT_FIRST))


@kernel(grid=lambda a, b, c, partial, flags, CTAS, **_: (CTAS,), block=384, profile_events=32768)
def matmul_split_k(a, b, c, partial, flags, CTAS: constexpr, SPLIT_K: constexpr = 2,
                   BN: constexpr = 256, STAGES: constexpr = 4, BK: constexpr = 64):
    """c = a @ b for problems with fewer tiles than SMs: SPLIT_K units per (128, BN) tile each take
    an equal share of K, and the units of a tile add up in order (`add_in_order`) through
    `partial`, float32 (SPLIT_K - 1, *c.shape), and `flags`, int32 zeros, one per half tile
    (`split_k_flags`), which the kernel leaves at zero.  The sum is the same on every run; c is
    bfloat16 or float16.  Launches that may run at the same time need partial and flags of their
    own.  In clusters of two (`matmul_split_k_2cta`) the CTAs of a pair take tiles side by side
    and share each a slice."""
    cooperative(a, b, c, CTAS, GemmConfig(BN=BN, BK=BK, STAGES=STAGES, SPLIT_K=SPLIT_K, SHARE="a"),
                running=(partial, flags))


@kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=256, profile_events=32768)
def matmul_narrow(a, b, c, CTAS: constexpr, BM: constexpr = 64, BN: constexpr = 64, BK: constexpr = 64,
                  STAGES: constexpr = 12, SNAKE: constexpr = 16, IN_FLIGHT: constexpr = 1,
                  SHARE: constexpr = "b", EVICT_FIRST: constexpr = ""):
    """c = a @ b with one consumer warpgroup a CTA (warpgroup 1 the producer) owning whole
    (BM, BN) tiles, 64 rows by default: problems of few rows (M = 128) make as many tiles as there
    are SMs without splitting K, and a deep ring of small slices keeps each SM's loads in flight."""
    cooperative(a, b, c, CTAS, GemmConfig(BM, BN, BK, STAGES, "m", "tma64", SNAKE, None, IN_FLIGHT, 1, SHARE,
                                          EVICT_FIRST), consumers=1)


def cooperative(a, b, c, CTAS, config: GemmConfig, running=None, consumers: int = 2, epilogue=None,
                width: int = 64, transposed: str = "", adds: bool = False) -> None:
    """The body of the GEMM kernels (the module's docstring): `running` (partial, flags) makes the
    units of a split tile add up in order instead of into a float32 c; with one consumer
    warpgroup (`consumers`, in a block of 256 threads) it owns the whole tile.  `epilogue(acc,
    row, col)`, called while the tile's last wgmma runs, gives what to store of each 64 x 64
    piece (i, j) of the accumulator: `piece(i, j)` (`asyncdsl.blocks.epilogue_functions`), in
    pieces `width` wide (128 for a float8 c: 128-byte rows).  `transposed` names the operands
    given transposed: "a" for a (K, M), "b" for b (N, K) (the tensor cores read either way).
    `adds`: the product is added into a float32 c, as split K's units are."""
    a_t, b_t, adds = "a" in transposed, "b" in transposed, adds or config.SPLIT_K > 1 and running is None
    check_operands(a, b, c, CTAS, b_is_transposed=b_t, a_is_transposed=a_t)
    check_16_bit(a, b, c, c_float32=adds, c_float8=width == 128)
    (M, K), N = a.shape[::-1] if a_t else a.shape, b.shape[0] if b_t else b.shape[1]
    config.check(consumers)
    BM, BN, BK, STAGES, SPLIT_K = config.BM, config.BN, config.BK, config.STAGES, config.SPLIT_K
    policy = eviction_policies(config.EVICT_FIRST)
    # Split K: each unit takes the same number of K steps; those past the end of K read zeros.
    k_steps = ad.cdiv(K, BK) if SPLIT_K == 1 else ad.cdiv(ad.cdiv(K, BK), SPLIT_K)
    tiles = PersistentTiles(M, N, BM, BN, CTAS, config.SNAKE, SPLIT_K, config.SHARE)
    pair, share_a = tiles.pair, tiles.share_a
    a_parts, b_parts = config.parts(consumers)
    part = (BM // a_parts, BN // b_parts)  # one consumer's accumulator
    # Where each consumer's part lies among all of them, which numbers its split-K flag.
    part_columns = tiles.n_tiles * b_parts * (pair if share_a else 1)
    if running is not None:
        check_running(running, c, tiles.m_tiles * a_parts * (1 if share_a else pair) * part_columns, SPLIT_K,
                      tiles.units(tiles.m_tiles * tiles.n_tiles, SPLIT_K), tiles.clusters, pair)
    # [slot][part], each slice as it lies in its array (transposed ones read through .T)
    a_slice, b_slice = (BK, part[0]) if a_t else (part[0], BK), (part[1], BK) if b_t else (BK, part[1])
    a_ring = ad.smem((STAGES, a_parts, *a_slice), a.dtype, **tensor_core_layout(a_slice[0]))
    b_ring = ad.smem((STAGES, b_parts, *b_slice), b.dtype, **tensor_core_layout(b_slice[0]))
    if adds:  # float32 64 x 32 pieces (128-byte rows) added into c
        c_out = store_ring(consumers, c.dtype, 32)
    elif config.EPILOGUE == "tma":  # the whole part through shared memory and one TMA store
        c_out = ad.smem((consumers, 1, *part), c.dtype, **tensor_core_layout(part[0]))
    else:
        c_out = store_ring(consumers, c.dtype, width)
    ring = ad.Pipeline(STAGES, loads=a_parts + b_parts, consumers=consumers,
                       collective="x" if pair > 1 else None)
    producer_registers, consumer_registers = config.REGISTERS or (None, None)

    def load(work, kk, slot, landed):
        k_step = kk if SPLIT_K == 1 else work.split * k_steps + kk
        for h in range(a_parts):
            rows, ks = ad.ds(work.row + h * part[0], part[0]), ad.ds(k_step * BK, BK)
            ad.async_copy(a.at[(ks, rows) if a_t else (rows, ks)],
                          a_ring.at[slot, h], barrier=landed, collective="x" if share_a else None,
                          eviction_policy=policy["a"])
        for h in range(b_parts):
            ks, cols = ad.ds(k_step * BK, BK), ad.ds(work.col + h * part[1], part[1])
            ad.async_copy(b.at[(cols, ks) if b_t else (ks, cols)],
                          b_ring.at[slot, h], barrier=landed,
                          collective="x" if pair > 1 and not share_a else None, eviction_policy=policy["b"])

    with ad.warpgroup_role(consumers, registers=producer_registers):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role(tuple(range(consumers)), registers=consumer_registers):
        me = ad.warpgroup_idx()
        acc = ad.registers(part, ad.float32, layout=ad.WGMMA)
        for work in tiles:
            row, col = work.row, work.col
            if a_parts == 2:
                row = row + me * part[0]
            elif b_parts == 2:
                col = col + me * part[1]
            mma_loop(acc, ring, work.index, k_steps, lambda slot: (
                as_read(a_ring.at[slot, me if a_parts == 2 else 0], a_t),
                as_read(b_ring.at[slot, me if b_parts == 2 else 0], b_t)), config.IN_FLIGHT)
            with ad.region("epilogue"):
                piece = None if epilogue is None else epilogue(acc, row, col)
                drain(ring, work.index, k_steps, config.IN_FLIGHT)
                if running is not None:
                    partial, flags = running
                    flag = flags.at[part_number(row, col, part, part_columns)]
                    add_in_order(acc, partial, flag, work.split, SPLIT_K, c, c_out, me, row, col)
                elif adds:  # float32 pieces 32 wide (128-byte rows), added into c
                    store_in_pieces(acc, c_out, me, c, row, col, width=32, reduction="add")
                elif config.EPILOGUE == "tma":
                    store_whole(acc, c_out, me, c, row, col)
                else:
                    store_in_pieces(acc, c_out, me, c, row, col, piece, width)
        ad.await_async_copy(0)


# The same kernels in clusters of two CTAs, which share (multicast) every slice of b (tiles one
# above the other) or, for split K, of a (tiles side by side).
matmul_2cta = kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384, cluster=(2, 1, 1),
                     name="matmul_2cta", profile_events=32768)(matmul.fn)
matmul_split_k_2cta = kernel(grid=lambda a, b, c, partial, flags, CTAS, **_: (CTAS,), block=384,
                             cluster=(2, 1, 1), name="matmul_split_k_2cta",
                             profile_events=32768)(matmul_split_k.fn)
matmul_narrow_2cta = kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=256, cluster=(2, 1, 1),
                            name="matmul_narrow_2cta", profile_events=32768)(matmul_narrow.fn)


def example_inputs(specs, rng) -> list:
    """Inputs on which the interpreter gives the GPU's bits: small integers (every sum exact) for
    a and b; c (and the split-K partial sums) NaN, the split-K flags zero."""
    import ml_dtypes
    import numpy as np

    a, b, c, *running = specs
    inputs = [rng.integers(-3, 4, a.shape).astype(ml_dtypes.bfloat16),
              rng.integers(-3, 4, b.shape).astype(ml_dtypes.bfloat16),
              np.full(c.shape, np.nan, ml_dtypes.bfloat16)]
    if running:
        partial, flags = running
        inputs += [np.full(partial.shape, np.nan, np.float32), np.zeros(flags.shape, np.int32)]
    return inputs


def _specs(m: int, n: int, k: int) -> tuple:
    return ArraySpec((m, k), ad.bfloat16), ArraySpec((k, n), ad.bfloat16), ArraySpec((m, n), ad.bfloat16)


EXAMPLE_ARGS = {
    "matmul": (_specs(256, 512, 320), {"CTAS": 3}),
    "matmul_split_k": ((*_specs(200, 264, 320), ArraySpec((2, 200, 264), ad.float32),
                        ArraySpec((split_k_flags(200, 264, 128),), ad.int32)),
                       {"CTAS": 18, "SPLIT_K": 3, "BN": 128}),
    "matmul_narrow": (_specs(200, 264, 320), {"CTAS": 5, "BK": 128, "STAGES": 3}),
    "matmul_narrow_2cta": (_specs(200, 264, 320), {"CTAS": 4, "BN": 128, "STAGES": 3}),
}
