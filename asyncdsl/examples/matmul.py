"""bf16 matrix multiply on the tensor cores: c = a @ b with float32 accumulation, bf16 out.

A persistent, warp-specialized kernel.  CTAS CTAs (about one per SM) walk the (BM, BN) tiles of
c with a stride.  Each CTA has three warpgroups:

- warpgroup 2, the producer, streams (BM, BK) slices of a and (BK, BN) slices of b into a ring of
  STAGES shared-memory slots by TMA (`asyncdsl.Pipeline` keeps the ring's barriers), laid out as
  the tensor cores read them (columns of 64 bf16, 128-byte swizzle); before refilling a slot it
  waits until both consumers released it;
- warpgroups 0 and 1, the consumers, each own half of the tile (BM/2 rows, or BN/2 columns with
  SPLIT "n"): for every slot they wait until it landed, issue one `wgmma` over their half of it,
  and release the slot the *previous* wgmma read once `wgmma_wait(1)` says it is done, so one
  wgmma is always in flight;
- after a tile's last slot each consumer converts its accumulator to bf16, writes it to its own
  shared-memory buffer and stores it by TMA, while the producer is already loading the next
  tile's slices.

Tiles past the edges of a, b and c are handled by TMA: loads zero-fill past the end (so ragged
K adds zeros), stores skip it.  TMA needs rows of a multiple of 16 bytes: K and N multiples of 8.

Problems with fewer tiles than SMs split K: `SPLIT_K` units per tile, each adding its share into
a float32 c by TMA reduce-add (`matmul`), or, ending in bf16, adding up in the order of the
splits through a float32 partial array (`matmul_split_k`, `add_in_order`).  Or they take
smaller tiles: in `matmul_narrow` (256 threads) one consumer warpgroup owns each whole tile, 64
rows by default, so that 128 rows of a make as many tiles as there are SMs.

    python -m asyncdsl.examples.matmul      # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl import TileTransform


def tensor_core_layout(rows: int, columns: int = 64) -> dict:
    """Columns of `columns` elements (one 128-byte swizzled row each: 64 bf16, 128 fp8, 32 f32),
    one column after the other: how the tensor cores read an operand, and what one TMA box per
    column lands (arrays that are not a whole number of tiles are copied so,
    `passes/resolve/tile_boxes.py`)."""
    return dict(transforms=TileTransform((rows, columns)), swizzle=128)


@ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384, profile_events=32768)
def matmul(a, b, c, CTAS: ad.constexpr, BM: ad.constexpr = 128, BN: ad.constexpr = 256, BK: ad.constexpr = 64,
           STAGES: ad.constexpr = 4, SPLIT: ad.constexpr = "m", EPILOGUE: ad.constexpr = "tma64",
           SNAKE: ad.constexpr = 16, REGISTERS: ad.constexpr = (40, 232), IN_FLIGHT: ad.constexpr = 1,
           SPLIT_K: ad.constexpr = 1, SHARE: ad.constexpr = "b", EVICT_FIRST: ad.constexpr = ""):
    gemm(a, b, c, CTAS, BM, BN, BK, STAGES, SPLIT, EPILOGUE, SNAKE, REGISTERS, IN_FLIGHT, SPLIT_K, SHARE,
         EVICT_FIRST=EVICT_FIRST)


@ad.kernel(grid=lambda a, b, c, partial, flags, CTAS, **_: (CTAS,), block=384, profile_events=32768)
def matmul_split_k(a, b, c, partial, flags, CTAS: ad.constexpr, SPLIT_K: ad.constexpr = 2,
                   BN: ad.constexpr = 256, STAGES: ad.constexpr = 4, BK: ad.constexpr = 64):
    """c = a @ b for problems with fewer tiles than SMs: SPLIT_K units per (128, BN) tile each take
    an equal share of K (in slices BK deep, STAGES of them in flight), and the units of a tile add
    up in order (`add_in_order`) through `partial`, float32 (SPLIT_K - 1, *c.shape) (a slot for
    each unit but the last), and `flags`, int32 zeros, one per half tile (`split_k_flags`), which
    the kernel leaves at zero.  The sum is the same on every run; c is bfloat16 or float16.
    Launches that may run at the same time (other streams) need partial and flags of their own; a
    launch that did not finish (an error) may leave flags set: zero them before the next.  In
    clusters of two (`matmul_split_k_2cta`) the CTAs of a pair take tiles side by side and share
    each a slice, which few rows of a make most of the traffic."""
    gemm(a, b, c, CTAS, 128, BN, BK, STAGES, "m", "tma64", 16, (40, 232), 1, SPLIT_K, "a",
         running=(partial, flags))


def split_k_flags(m: int, n: int, bn: int = 256, pair: int = 1) -> int:
    """How many int32 flags `matmul_split_k` needs for an (m, n) c with (128, bn) tiles, taken by
    CTA pairs side by side when `pair` is 2: one per consumer's half of a tile (the halves past
    the end of c count)."""
    return 2 * -(-m // 128) * -(-n // (bn * pair)) * pair


def gemm(a, b, c, CTAS, BM, BN, BK, STAGES, SPLIT, EPILOGUE, SNAKE, REGISTERS, IN_FLIGHT, SPLIT_K, SHARE="b",
         running=None, consumers=2, EVICT_FIRST=""):
    """The body of the GEMM kernels (see the module's docstring); `running` (partial, flags)
    makes the units of a split tile add up in order instead of into a float32 c; with one
    consumer warpgroup (`consumers`, in a block of 256 threads) it owns the whole tile (SPLIT
    does not apply), warpgroup 1 is the producer.  `EVICT_FIRST` names the operands ("a", "b",
    "ab") whose slices L2 should give up first (`eviction_policy`): a problem of few tiles reads
    each slice of b once or twice, and lines kept for it only push out the dirty lines of
    earlier kernels, whose write-backs then compete with its reads."""
    check_operands(a, b, c, CTAS)
    check_16_bit(a, b, c, c_float32=SPLIT_K > 1 and running is None)
    M, K = a.shape
    N = b.shape[1]
    # CTAs along the cluster's x dim work on tiles one above the other and share each b slice
    # (SHARE "b"), or on tiles side by side sharing each a slice ("a"): each loads part of the
    # slice and multicasts it to all (`matmul_2cta`); alone, a CTA loads it all.
    check_config(BM, BN, BK, STAGES, SPLIT, EPILOGUE, SPLIT_K)
    policy = eviction_policies(EVICT_FIRST)
    pair = ad.cluster_shape()[0]
    if SHARE not in ("a", "b"):
        raise ad.TraceError(
            f"SHARE says which operand the CTAs of a cluster share: 'a' or 'b', got {SHARE!r}")
    share_a = pair > 1 and SHARE == "a"
    m_tiles, n_tiles = ((ad.cdiv(M, BM), ad.cdiv(N, BN * pair)) if share_a
                        else (ad.cdiv(M, BM * pair), ad.cdiv(N, BN)))
    # Split K: SPLIT_K units per tile each add its share of K into a float32 c (TMA reduce-add),
    # so that small problems keep every SM busy.  Each unit takes the same number of K steps;
    # the last one's past the end of K read zeros (TMA zero fill), which add nothing.
    units = m_tiles * n_tiles * SPLIT_K
    k_steps = ad.cdiv(K, BK) if SPLIT_K == 1 else ad.cdiv(ad.cdiv(K, BK), SPLIT_K)  # per unit
    if IN_FLIGHT not in (0, 1):
        raise ad.TraceError(f"IN_FLIGHT says whether one wgmma stays in flight: 0 or 1, got {IN_FLIGHT!r}")
    cluster, clusters = (ad.program_id(0), CTAS) if pair == 1 else (ad.cluster_id(0), CTAS // pair)
    mine = (units - cluster + clusters - 1) // clusters  # units cluster, cluster + clusters, ...
    # Each consumer computes half the tile: the top or bottom rows (SPLIT "m": each reads its half
    # of the a slice and all of b) or the left or right columns ("n": all of a, half of b).
    a_parts, b_parts = (1, 1) if consumers == 1 else (2, 1) if SPLIT == "m" else (1, 2)
    part = (BM // a_parts, BN // b_parts)  # one consumer's accumulator
    # Where each consumer's part lies among all of them (with the parts past the end of c), which
    # numbers its split-K flag: rows and columns of parts.
    part_rows, part_columns = (m_tiles * a_parts * (1 if share_a else pair),
                               n_tiles * b_parts * (pair if share_a else 1))
    if running is not None:
        check_running(running, c, part_rows * part_columns, SPLIT_K, units, clusters, pair)

    a_ring = ad.smem((STAGES, a_parts, part[0], BK), a.dtype, **tensor_core_layout(part[0]))  # [slot][part]
    b_ring = ad.smem((STAGES, b_parts, BK, part[1]), b.dtype, **tensor_core_layout(BK))
    # float32 64 x 32 pieces (128-byte rows), added into c through two slots each
    if SPLIT_K > 1 and running is None:
        c_out = ad.smem((consumers, 2, 64, 32), c.dtype, **tensor_core_layout(64, 32))
    elif EPILOGUE == "tma":  # the whole part through shared memory and one TMA store
        c_out = ad.smem((consumers, 1, *part), c.dtype, **tensor_core_layout(part[0]))  # [consumer][slot]
    else:  # "tma64": 64 x 64 pieces at a time through two slots per consumer (less shared memory)
        c_out = ad.smem((consumers, 2, 64, 64), c.dtype, **tensor_core_layout(64))
    # The slots of a_ring and b_ring.
    ring = ad.Pipeline(STAGES, loads=a_parts + b_parts, consumers=consumers,
                       collective="x" if pair > 1 else None)
    producer_registers, consumer_registers = REGISTERS or (None, None)

    def origin(t):
        """The first row and column of unit t's tile, and which share of K the unit takes."""
        unit = cluster + t * clusters
        tile, split = (unit, 0) if SPLIT_K == 1 else (unit // SPLIT_K, unit % SPLIT_K)
        m, n = tile_position(tile, m_tiles, n_tiles, SNAKE)
        if pair == 1:
            return m * BM, n * BN, split
        if share_a:
            return m * BM, (n * pair + ad.cluster_cta_id(0)) * BN, split
        return (m * pair + ad.cluster_cta_id(0)) * BM, n * BN, split

    with ad.warpgroup_role(consumers, registers=producer_registers):
        for t in ad.range(mine):
            row, col, split = origin(t)
            for kk in ad.range(k_steps):
                slot, landed = ring.produce(t * k_steps + kk)
                k_step = kk if SPLIT_K == 1 else split * k_steps + kk
                with ad.region("load"):
                    for h in range(a_parts):
                        ad.async_copy(a.at[ad.ds(row + h * part[0], part[0]), ad.ds(k_step * BK, BK)],
                                      a_ring.at[slot, h], barrier=landed, collective="x" if share_a else None,
                                      eviction_policy=policy["a"])
                    for h in range(b_parts):
                        ad.async_copy(b.at[ad.ds(k_step * BK, BK), ad.ds(col + h * part[1], part[1])],
                                      b_ring.at[slot, h], barrier=landed,
                                      collective="x" if pair > 1 and not share_a else None,
                                      eviction_policy=policy["b"])

    with ad.warpgroup_role(tuple(range(consumers)), registers=consumer_registers):
        me = ad.warpgroup_idx()
        acc = ad.registers(part, ad.float32, layout=ad.WGMMA)
        for t in ad.range(mine):
            row, col, split = origin(t)
            if a_parts == 2:
                row = row + me * part[0]
            elif b_parts == 2:
                col = col + me * part[1]
            for kk in ad.range(k_steps):
                step = t * k_steps + kk
                with ad.region("k step"):
                    slot = ring.consume(step)
                    with ad.region("mma"):
                        ad.wgmma(acc, a_ring.at[slot, me if a_parts == 2 else 0],
                                 b_ring.at[slot, me if b_parts == 2 else 0], accumulate=kk > 0)
                    with ad.region("wait mma"):  # keep this wgmma running (IN_FLIGHT) or not
                        ad.wgmma_wait(IN_FLIGHT)
                    with ad.region("release"):  # the slot of the wgmma that is done may be refilled
                        if IN_FLIGHT:
                            with ad.when(kk > 0):
                                ring.release(step - 1)
                        else:
                            ring.release(step)
            with ad.region("epilogue"):
                if IN_FLIGHT:
                    ad.wgmma_wait(0)
                    ring.release(t * k_steps + k_steps - 1)
                if running is not None:
                    partial, flags = running
                    flag = flags.at[part_number(row, col, part, part_columns)]
                    add_in_order(acc, partial, flag, split, SPLIT_K, c, c_out, me, row, col)
                elif SPLIT_K > 1:  # float32 pieces 32 wide (128-byte rows), added into c
                    store_in_pieces(acc, c_out, me, c, row, col, width=32, reduction="add")
                elif EPILOGUE == "tma":
                    ad.await_async_copy(0, read_only=True)  # the previous tile's store has read c_out
                    c_out.at[me, 0][...] = acc[...].astype(c.dtype)
                    ad.fence_async_smem()
                    ad.async_copy(c_out.at[me, 0], c.at[ad.ds(row, part[0]), ad.ds(col, part[1])])
                else:
                    store_in_pieces(acc, c_out, me, c, row, col)
        ad.await_async_copy(0)


# The same kernels in clusters of two CTAs, which share (multicast) every slice of b (tiles one
# above the other) or, for split K, of a (tiles side by side).
matmul_2cta = ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384, cluster=(2, 1, 1),
                        profile_events=32768)(matmul.fn)
matmul_split_k_2cta = ad.kernel(grid=lambda a, b, c, partial, flags, CTAS, **_: (CTAS,), block=384,
                                cluster=(2, 1, 1), profile_events=32768)(matmul_split_k.fn)


@ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=256, profile_events=32768)
def matmul_narrow(a, b, c, CTAS: ad.constexpr, BM: ad.constexpr = 64, BN: ad.constexpr = 64,
                  BK: ad.constexpr = 64, STAGES: ad.constexpr = 12, SNAKE: ad.constexpr = 16,
                  IN_FLIGHT: ad.constexpr = 1, SHARE: ad.constexpr = "b", EVICT_FIRST: ad.constexpr = ""):
    """c = a @ b with one consumer warpgroup a CTA (warpgroup 1 the producer), which owns whole
    (BM, BN) tiles, 64 rows by default: problems of few rows (M = 128) make as many tiles as there
    are SMs without splitting K, and a deep ring of small slices keeps each SM's loads in flight.
    In clusters of two (`matmul_narrow_2cta`) the CTAs of a pair take tiles one above the other
    and share each b slice (SHARE "b") or side by side sharing a ("a").  `EVICT_FIRST` as `gemm`
    says."""
    gemm(a, b, c, CTAS, BM, BN, BK, STAGES, "m", "tma64", SNAKE, None, IN_FLIGHT, 1, SHARE, consumers=1,
         EVICT_FIRST=EVICT_FIRST)


matmul_narrow_2cta = ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=256, cluster=(2, 1, 1),
                               profile_events=32768)(matmul_narrow.fn)


def check_tiles(BM, BN, BK, STAGES) -> None:
    """Refuse, at trace time, tiles and rings a bf16 GEMM cannot be built with."""
    for name, value in (("BM", BM), ("BN", BN), ("BK", BK)):
        if not isinstance(value, int) or value <= 0 or value % 64:
            raise ad.TraceError(f"{name} must be a positive multiple of 64 (the tensor cores read columns of "
                                f"64 elements), got {value!r}")
    if not isinstance(STAGES, int) or STAGES < 1:
        raise ad.TraceError(f"STAGES must be a positive int, got {STAGES!r}")


def eviction_policies(evict_first: str) -> dict:
    """The `eviction_policy` of each operand's slices: "evict_first" for those `evict_first`
    names ("", "a", "b" or "ab"), the default for the others."""
    if evict_first not in ("", "a", "b", "ab"):
        raise ad.TraceError("EVICT_FIRST names the operands whose slices L2 gives up first: '', 'a', 'b' or "
                            f"'ab', got {evict_first!r}")
    return {name: "evict_first" if name in evict_first else None for name in "ab"}


def check_operands(a, b, c, CTAS, rows=None, b_is_transposed=False) -> None:
    """Refuse, at trace time, arrays that do not make c = a @ b: matrices whose K differ, or a c
    of another shape, would otherwise be multiplied as far as the smaller reaches, the rest of c
    left as it was.  b is (K, N), or (N, K) when `b_is_transposed`; c has `rows` rows (a's by
    default).  Every row a whole number of 16-byte pieces (TMA's rule); CTAS, the CTAs walking the
    tiles, a positive int."""
    if isinstance(CTAS, bool) or not isinstance(CTAS, int) or CTAS < 1:
        raise ad.TraceError(f"CTAS (how many CTAs walk the tiles) must be a positive int, got {CTAS!r}")
    for name, array in (("a", a), ("b", b), ("c", c)):
        if len(array.shape) != 2:
            raise ad.TraceError(f"{name} must be a matrix, got shape {tuple(array.shape)}")
    m, k = a.shape
    n, b_k = b.shape if b_is_transposed else reversed(b.shape)
    if b_k != k:
        form = "(N, K)" if b_is_transposed else "(K, N)"
        raise ad.TraceError(
            f"a is (M, K) = {tuple(a.shape)} and b is {form} = {tuple(b.shape)}: their K differ")
    wanted = (m if rows is None else rows, n)
    if tuple(c.shape) != wanted:
        raise ad.TraceError(f"c must be (M, N) = {wanted} for a {tuple(a.shape)} and b {tuple(b.shape)}, "
                            f"got {tuple(c.shape)}")
    for name, array in (("a", a), ("b", b), ("c", c)):
        row_bytes = array.shape[1] * array.dtype.itemsize
        if row_bytes % 16:
            raise ad.TraceError(f"{name}'s rows are {row_bytes} bytes ({array.shape[1]} {array.dtype}): TMA "
                                "copies rows of a multiple of 16 bytes (K and N multiples of 8 for "
                                "16-bit elements)")


def check_16_bit(a, b, c, c_float32: bool = False) -> None:
    """Refuse, at trace time, element types the bf16 GEMM's layouts do not hold: a and b both
    bfloat16 or both float16 (64 to a 128-byte row, as the tensor cores read them), c bfloat16 or
    float16 (64 x 64 pieces of 128-byte rows), or float32 where `c_float32` (split K adding into c)."""
    if a.dtype not in (ad.bfloat16, ad.float16) or b.dtype != a.dtype:
        raise ad.TraceError(f"a and b must both be bfloat16 or both float16, got {a.dtype} and {b.dtype}")
    if c_float32 and c.dtype != ad.float32:
        raise ad.TraceError("SPLIT_K > 1 adds the splits' parts into c, which must be float32, not "
                            f"{c.dtype} (matmul_split_k ends in bfloat16 or float16)")
    if not c_float32 and c.dtype not in (ad.bfloat16, ad.float16):
        raise ad.TraceError(f"c must be bfloat16 or float16 (matmul with SPLIT_K adds into a float32 c), "
                            f"got {c.dtype}")


def check_config(BM, BN, BK, STAGES, SPLIT, EPILOGUE, SPLIT_K) -> None:
    """Refuse, at trace time, a configuration the kernel cannot be built for."""
    check_tiles(BM, BN, BK, STAGES)
    if not isinstance(SPLIT_K, int) or SPLIT_K < 1:
        raise ad.TraceError(f"SPLIT_K must be a positive int, got {SPLIT_K!r}")
    if SPLIT not in ("m", "n"):
        raise ad.TraceError(f"SPLIT says how the consumers halve a tile, by rows 'm' or columns 'n', "
                            f"got {SPLIT!r}")
    if EPILOGUE not in ("tma", "tma64"):
        raise ad.TraceError(f"EPILOGUE is 'tma' (the whole part at once) or 'tma64' (64 x 64 pieces), "
                            f"got {EPILOGUE!r}")


def pieces(acc, width: int = 64) -> list[tuple[int, int]]:
    """The 64 x `width` pieces of a consumer's accumulator, (i, j) for rows 64i.., columns
    width·j.., row by row."""
    rows, columns = acc.shape
    return [(i, j) for i in range(rows // 64) for j in range(columns // width)]


def piece_of(acc, i: int, j: int, width: int = 64):
    """Piece (i, j) of `acc` (`pieces`)."""
    return acc[i * 64:(i + 1) * 64, j * width:(j + 1) * width]


def store_in_pieces(acc, c_out, me, c, row: int, col: int, piece=None, width: int = 64,
                    reduction: str | None = None) -> None:
    """Store consumer `me`'s accumulator `acc` (float32 registers) at (row, col) of c, converted
    to c's dtype, in 64 x `width` pieces through its two SMEM slots `c_out.at[me, 0 or 1]`: each
    piece waits only for the store two pieces before it, so stores overlap the next conversions.
    `piece(i, j)`, if given, is what to store in place of the accumulator's piece (i, j);
    `reduction` ("add") combines each piece with what c holds (`async_copy`'s reduction)."""
    every = pieces(acc, width)
    piece = piece or (lambda i, j: piece_of(acc, i, j, width))
    settle_slots(len(every))
    for number, (i, j) in enumerate(every):
        slot = number % 2
        ad.await_async_copy(1, read_only=True)  # the store two pieces ago has read this slot
        c_out.at[me, slot][...] = piece(i, j).astype(c.dtype)
        ad.fence_async_smem()
        ad.async_copy(c_out.at[me, slot], c.at[ad.ds(row + i * 64, 64), ad.ds(col + j * width, width)],
                      reduction=reduction)


def check_running(running, c, halves: int, splits: int, units: int, clusters: int, pair: int) -> None:
    """What `matmul_split_k` asks of its arguments (`halves`: of tiles, one flag each), checked
    when it is traced."""
    partial, flags = running
    if splits < 2:
        raise ad.TraceError(
            f"SPLIT_K={splits}: matmul_split_k splits K in two or more parts (matmul takes whole K)")
    if partial.dtype != ad.float32 or len(partial.shape) != 3 or partial.shape[1:] != c.shape \
            or partial.shape[0] < splits - 1:
        raise ad.TraceError(f"partial must be a float32 array of SPLIT_K - 1 slots of c's shape: "
                            f"({splits - 1}, {c.shape[0]}, {c.shape[1]}) or more slots, got {partial.dtype} "
                            f"{partial.shape}")
    if flags.dtype != ad.int32 or len(flags.shape) != 1 or flags.shape[0] < halves:
        raise ad.TraceError(f"flags must be int32 zeros, one per half tile: shape ({halves},) or longer "
                            f"(split_k_flags), got {flags.dtype} {flags.shape}")
    if units > clusters:
        # The last unit of a tile waits for the others, which come before it; with a unit per CTA,
        # they started no later.
        what = f"{clusters} CTAs" if pair == 1 else f"{clusters} clusters of {pair} CTAs"
        raise ad.TraceError(f"SPLIT_K={splits} makes {units} units of work for {what}: matmul_split_k takes "
                            "one unit per CTA (or cluster): fewer splits, or wider tiles")


def part_number(row, col, part: tuple[int, int], columns: int):
    """The number of the consumer's part of c at (row, col) among `columns` parts a row: row by
    row, so each part of each tile (those past the end of c included) has its own."""
    return (row // part[0]) * columns + col // part[1]


def add_in_order(acc, partial, flag, split, splits: int, c, c_out, me, row, col) -> None:
    """Split-K's sum, in the order of the splits whatever order they finish in: every unit but
    the last writes its accumulator into its own slot of `partial` (`partial.at[split]`) and
    counts itself in on `flag`; the last waits until the `splits - 1` others are in, sets the
    flag back to zero for the next launch and stores ((p0 + p1) + ...) + its own to c.  One
    hand-over per tile whatever the number of splits: the others write at the same time, where
    passing a running sum from unit to unit took `splits - 1` hand-overs one after the other
    (docs/hardware.md §17: the memory ordering, and why one unit per CTA)."""
    def window(s, i, j):
        return partial.at[s, ad.ds(row + i * 64, 64), ad.ds(col + j * 64, 64)]

    def total(i, j):  # the other splits' parts in their order, then this one's
        running = ad.load(window(0, i, j), layout=ad.WGMMA)
        for s in range(1, splits - 1):
            running = running + ad.load(window(s, i, j), layout=ad.WGMMA)
        return running + piece_of(acc, i, j)

    with ad.region("split-K sum"):
        with ad.when(split < splits - 1):
            for i, j in pieces(acc):
                ad.store(window(split, i, j), piece_of(acc, i, j))
            ad.signal(flag, 1, op="add")
        with ad.when(split == splits - 1):
            ad.wait_signal(flag, "ge", splits - 1)
            ad.signal(flag, 0)  # every other unit is in: ready for the next launch
            store_in_pieces(acc, c_out, me, c, row, col, total)


def settle_slots(pieces: int) -> None:
    """Before a tile's epilogue pieces go through two SMEM slots: the slots restart at 0 each tile,
    so after an odd number of pieces the previous tile's last store may still read slot 0 (each
    piece only waits for the store two pieces before it): wait for all of them then."""
    if pieces % 2:
        ad.await_async_copy(0, read_only=True)


def tile_position(tile, m_tiles: int, n_tiles: int, width: int):
    """Where tile number `tile` lies, (m, n).  Row by row when `width` is 0; else a "planar
    snake": bands of `width` tile rows (the last band what is left) walked column by column, down
    each column of the band, every other band backwards, so the CTAs running at once work on a
    compact patch of c and share their slices of a and b in L2.  (Row by row, a few rows of tiles
    and many columns, M = 512 say, have every CTA of a wave on another column of b, each column
    read from memory once per row of tiles.)"""
    if not isinstance(width, int) or width < 0:
        raise ad.TraceError(f"SNAKE is the width of the bands of tiles (0: row by row), a non-negative int, "
                            f"got {width!r}")
    if not width:
        return tile // n_tiles, tile % n_tiles
    band, within = tile // (width * n_tiles), tile % (width * n_tiles)
    rows = m_tiles % width
    if rows == 0 or m_tiles < width:  # every band is `width` rows, or there is one band
        rows = min(width, m_tiles)
    elif not isinstance(band, int):  # the last band is short
        rows = (m_tiles - band * width).min(width)
    else:
        rows = min(width, m_tiles - band * width)
    column = within // rows
    backwards = band % 2
    return band * width + within % rows, column + backwards * (n_tiles - 1 - 2 * column)


EXAMPLE_ARGS = {
    "matmul": (
        (ad.ArraySpec((256, 320), ad.bfloat16), ad.ArraySpec((320, 512), ad.bfloat16),
         ad.ArraySpec((256, 512), ad.bfloat16)),
        {"CTAS": 3},
    ),
    "matmul_split_k": (
        (ad.ArraySpec((200, 320), ad.bfloat16), ad.ArraySpec((320, 264), ad.bfloat16),
         ad.ArraySpec((200, 264), ad.bfloat16), ad.ArraySpec((2, 200, 264), ad.float32),
         ad.ArraySpec((split_k_flags(200, 264, 128),), ad.int32)),
        {"CTAS": 18, "SPLIT_K": 3, "BN": 128},
    ),
    "matmul_narrow": (
        (ad.ArraySpec((200, 320), ad.bfloat16), ad.ArraySpec((320, 264), ad.bfloat16),
         ad.ArraySpec((200, 264), ad.bfloat16)),
        {"CTAS": 5, "BK": 128, "STAGES": 3},
    ),
    "matmul_narrow_2cta": (
        (ad.ArraySpec((200, 320), ad.bfloat16), ad.ArraySpec((320, 264), ad.bfloat16),
         ad.ArraySpec((200, 264), ad.bfloat16)),
        {"CTAS": 4, "BN": 128, "STAGES": 3},
    ),
}


def example_inputs(specs, rng) -> list[np.ndarray]:
    """Inputs on which the interpreter gives the GPU's bits: small integers (every sum exact),
    for a and b; c (and the split-K partial sums) start as NaN, the split-K flags at zero."""
    a, b, c, *running = specs
    inputs = [rng.integers(-3, 4, a.shape).astype(ml_dtypes.bfloat16),
              rng.integers(-3, 4, b.shape).astype(ml_dtypes.bfloat16),
              np.full(c.shape, np.nan, ml_dtypes.bfloat16)]
    if running:
        partial, flags = running
        inputs += [np.full(partial.shape, np.nan, np.float32), np.zeros(flags.shape, np.int32)]
    return inputs


def main(shape=(256, 512, 320)) -> int:
    return check_exact(matmul, shape, interpreted_ctas=3)


def check_exact(kernel, shape, interpreted_ctas: int) -> int:
    """Run a bf16 GEMM kernel (a, b, c, CTAS=...) on small integers (every sum exact, so the
    result is a @ b whatever the order of addition), on the GPU if there is one (a CTA per SM),
    else in the interpreter; compare with numpy bit for bit and say so."""
    from asyncdsl.runtime import has_gpu

    m, n, k = shape
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import device_facts, to_device, to_host

        c_d = to_device(c)
        kernel(to_device(a), to_device(b), c_d, CTAS=device_facts(0).multiprocessor_count)
        c, where = to_host(c_d), "GPU"
    else:
        kernel.interpret(a, b, c, CTAS=interpreted_ctas)
        where = "interpreter"
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    ok = np.array_equal(c.view(np.uint16), expected.view(np.uint16))
    print(f"{kernel.__name__} {m}x{n}x{k} on the {where}: {'exact' if ok else 'MISMATCH'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
