"""Column sums over all the rows of a matrix that a row kernel's CTAs share out: each CTA walks
blocks of rows (`row_blocks`) and keeps its own float32 sums element by element in registers
(`PartialSums`), written at the end as one row of a (CTAs, n) partial-sum matrix that a second
kernel adds up in a fixed order (`asyncdsl.kernels.column_sums`).  The weight gradients of the
norms (dw = Σ_rows dy∘x̂, db = Σ_rows dy) are such sums.

    import asyncdsl as ad
    from asyncdsl.blocks.partial_sums import PartialSums, row_blocks
    from asyncdsl.blocks.rows import padded_rows

    @ad.kernel(grid=lambda x, partial, ROWS, WIDTH, CTAS: (partial.shape[0],))
    def column_partials(x, partial, ROWS: ad.constexpr, WIDTH: ad.constexpr, CTAS: ad.constexpr):
        sums = PartialSums(1, (ROWS, WIDTH))            # at the top level
        for block in row_blocks(x.shape[0], ROWS, CTAS):
            sums.add(padded_rows(x, ROWS, WIDTH, block=block).piece(0))
        sums.store(partial)

No atomics: the sums are the same bits on every run, and the partial rows (one a CTA, a few CTAs
a multiprocessor) cost a write and a read of a few hundred rows more than the rows themselves.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def row_blocks(rows: int, ROWS: int, CTAS: int):
    """The blocks of ROWS rows (of `rows`) this CTA takes: its own number, then every CTAS-th
    after it (a traced loop).  Launch min(CTAS, blocks) CTAs."""
    return ad.range(ad.program_id(0), ad.cdiv(rows, ROWS), CTAS)


class PartialSums:
    """`count` float32 register tiles of `shape` (ROWS, WIDTH), zero at first, that take the sum of
    the tiles added to them; make them at the kernel's top level."""

    def __init__(self, count: int, shape: tuple):
        self._sums = [ad.registers(shape, ad.float32) for _ in range(count)]
        for running in self._sums:
            running[...] = ad.zeros(shape, ad.float32)

    def add(self, *tiles) -> None:
        """Add one tile to each of the sums, element by element."""
        for running, tile in zip(self._sums, tiles):
            running[...] = running[...] + tile

    def store(self, *partials) -> None:
        """Each sum's columns, added over its rows, into row `program_id` of the float32 matrix
        of partial sums that goes with it (as many columns as the rows have, or more)."""
        for running, partial in zip(self._sums, partials):
            width = running.shape[1]
            ad.store(partial.at[ad.ds(ad.program_id(0), 1), ad.ds(0, width)],
                     running[...].sum(axis=0, keepdims=True))
