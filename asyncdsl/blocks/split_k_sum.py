"""Split K's reduction: the units that took shares of one tile's K add up, in the order of the
shares whatever order they finish in, through a float32 workspace and an int32 flag a part.

    from asyncdsl.blocks.split_k_sum import add_in_order, split_k_flags

    flags = np.zeros(split_k_flags(m, n, 128), np.int32)   # host side, once: the kernel resets them
    ...
    add_in_order(acc, partial, flags.at[number], work.split, SPLIT_K, c, c_out, me, row, col)

The other way to reduce, adding each share into a float32 c by TMA reduce-add, is
`store_in_pieces(..., reduction="add")` (`asyncdsl.blocks.epilogues`); it is not deterministic.
"""

from __future__ import annotations

from asyncdsl.blocks.epilogues import piece_of, pieces, store_in_pieces
from asyncdsl.frontend import language as ad


def split_k_flags(m: int, n: int, bn: int = 256, pair: int = 1) -> int:
    """How many int32 flags an (m, n) c in (128, bn) tiles needs, taken by CTA pairs side by side
    when `pair` is 2: one per consumer's half of a tile (the halves past the end of c count)."""
    return 2 * -(-m // 128) * -(-n // (bn * pair)) * pair


def part_number(row, col, part: tuple[int, int], columns: int):
    """The number of the consumer's part of c at (row, col) among `columns` parts a row: row by
    row, so each part of each tile (those past the end of c included) has its own."""
    return (row // part[0]) * columns + col // part[1]


def check_running(running, c, halves: int, splits: int, units: int, clusters: int, pair: int) -> None:
    """What adding in order asks of its arguments (`running`: the partial sums and the flags;
    `halves`: parts of tiles, one flag each), checked when the kernel is traced."""
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
