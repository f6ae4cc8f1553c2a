"""The epilogue of a tensor-core tile: the float32 accumulator, piece by piece, through an
elementwise function, converted, written to shared memory and stored by TMA, the stores of two
pieces in flight (the store ring).

    from asyncdsl.blocks.epilogues import store_in_pieces, store_ring

    c_out = store_ring(2, c.dtype)                         # at the top: two slots a consumer
    ...
    store_in_pieces(acc, c_out, me, c, row, col)           # after the K loop
    store_in_pieces(acc, c_out, me, c, row, col,           # with a fused epilogue
                    piece=lambda i, j: fn(piece_of(acc, i, j), i, j))
    ad.await_async_copy(0)                                 # before the CTA ends

The pieces are 64 x `width` (128-byte rows: 64 16-bit or 32 float32 elements), `stmatrix`
writes them to a slot in the swizzled layout TMA reads; a slot is refilled once the store two
pieces ago has read it.  Elementwise functions (`asyncdsl.blocks.epilogue_functions`) get the
piece and its place; reductions ("add") add into what c holds.
"""

from __future__ import annotations

from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.frontend import language as ad


def store_ring(consumers: int, dtype, width: int = 64):
    """The shared-memory slots of the epilogue: two 64 x `width` slots for each of `consumers`
    warpgroups, [consumer][slot]."""
    return ad.smem((consumers, 2, 64, width), dtype, **tensor_core_layout(64, width))


def pieces(acc, width: int = 64) -> list[tuple[int, int]]:
    """The 64 x `width` pieces of a consumer's accumulator, (i, j) for rows 64i.., columns
    width·j.., row by row."""
    rows, columns = acc.shape
    return [(i, j) for i in range(rows // 64) for j in range(columns // width)]


def piece_of(acc, i: int, j: int, width: int = 64):
    """Piece (i, j) of `acc` (`pieces`)."""
    return acc[i * 64:(i + 1) * 64, j * width:(j + 1) * width]


def settle_slots(count: int) -> None:
    """Before a tile's epilogue pieces go through two SMEM slots: the slots restart at 0 each tile,
    so after an odd number of pieces the previous tile's last store may still read slot 0 (each
    piece only waits for the store two pieces before it): wait for all of them then."""
    if count % 2:
        ad.await_async_copy(0, read_only=True)


def store_in_pieces(acc, c_out, me, c, row, col, piece=None, width: int = 64,
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


def store_whole(acc, c_out, me, c, row, col) -> None:
    """Store consumer `me`'s accumulator at (row, col) of c at once, through its one slot
    `c_out.at[me, 0]` (as large as the accumulator), after the previous tile's store read it."""
    ad.await_async_copy(0, read_only=True)
    c_out.at[me, 0][...] = acc[...].astype(c.dtype)
    ad.fence_async_smem()
    ad.async_copy(c_out.at[me, 0], c.at[ad.ds(row, acc.shape[0]), ad.ds(col, acc.shape[1])])


def store_rows(acc, c, row, col, rows) -> None:
    """Store the first `rows` rows (a traced count; none if it is not positive) of the
    accumulator `acc` at (row, col) of c, converted to c's dtype, by plain stores from the
    registers, piece by piece: for a tile whose last rows belong to another problem (a group's
    end inside a tile), which a TMA store of whole pieces would overwrite."""
    for i, j in pieces(acc):
        below = ad.iota((64, 64), ad.int32, 0, layout=ad.WGMMA) < rows - i * 64
        ad.store(c.at[ad.ds(row + i * 64, 64), ad.ds(col + j * 64, 64)], piece_of(acc, i, j).astype(c.dtype),
                 mask=below)
