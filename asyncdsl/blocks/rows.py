"""Rows of a matrix in a memory-bound row kernel: ROWS rows a CTA, held as `count` pieces of
(ROWS, width) float32 register tiles, piece c being columns [c·width, (c+1)·width) of the rows.

    import asyncdsl as ad
    from asyncdsl.blocks.rows import padded_rows

    @ad.kernel(grid=lambda x, y, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
    def doubled(x, y, ROWS: ad.constexpr, WIDTH: ad.constexpr):
        rows = padded_rows(x, ROWS, WIDTH)
        for c in rows.pieces():
            ad.store(rows.window(y, c), (rows.piece(c) * 2).astype(y.dtype))

Two ways in, one interface out (`piece`, `vectors`, `window`, `inside`), so that a kernel's
arithmetic is written once for both:

- `staged_rows`: rows of a multiple of 128 elements (the register layouts' unit).  The CTA's
  rows are one contiguous run of the array, so a single bulk copy (`oob="undefined"`: no tensor
  map, no 256-element box limit) brings them into shared memory, with the vectors the rows are
  combined with (a weight, a bias) on the same barrier.  One piece holds the rows whole; several
  (one row a CTA) are the same bytes seen through `TileTransform((1, CHUNK))`.
- `padded_rows`: rows of any length, read from GMEM straight into registers WIDTH elements at a
  time, the elements past a row's end read as `other` and never written.  WIDTH is a window of
  whole 16-byte vectors a thread (`asyncdsl.blocks.row_plans`); rows longer than WIDTH take one
  sweep over GMEM per read of the pieces (the later ones mostly from L2).

Pieces are read where the kernel asks (`piece(c)`), so a kernel that sweeps its pieces several
times decides what stays in registers in between.  Rows past the array's end are neither read
(bulk copies and loads stop at its end) nor written (stores check the bounds).
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


class Rows:
    """The CTA's ROWS rows of the matrix `x`, as `count` pieces of `shape` = (ROWS, width)."""

    def __init__(self, x, ROWS: int, width: int, count: int, block=None):
        self.n = x.shape[1]
        self.count, self.shape = count, (ROWS, width)
        self.rows = ad.ds((ad.program_id(0) if block is None else block) * ROWS, ROWS)

    def pieces(self):
        """The pieces' indices: a traced loop over several, the Python int 0 for one."""
        return ad.range(self.count) if self.count > 1 else (0,)

    def window(self, y, c):
        """Where piece c lies in `y`, a matrix of the rows' shape: where its result goes."""
        width = self.shape[1]
        return y.at[self.rows, ad.ds(c * width, width)]

    def inside(self, c):
        """Which elements of piece c lie within the rows (a bool tile of the piece's shape):
        false in the padding past a row's end."""
        return ad.iota(self.shape, ad.int32, dim=1) + c * self.shape[1] < self.n


class StagedRows(Rows):
    """Rows and vectors in shared memory, landed (see `staged_rows`)."""

    def __init__(self, x, ROWS: int, CHUNK: int, vectors: tuple):
        n = x.shape[1]
        count = n // CHUNK
        super().__init__(x, ROWS, CHUNK, count)
        # Whole rows as they lie in the array, or (one row) split into pieces: buf.at[0, c] is piece c.
        pieces, vector_pieces = ((), ()) if count == 1 else (ad.TileTransform((1, CHUNK)),
                                                             ad.TileTransform((CHUNK,)))
        buf = ad.smem((ROWS, n) if count == 1 else (1, count, 1, CHUNK), x.dtype)
        self._vectors = [ad.smem((count, CHUNK), vector.dtype) for vector in vectors]
        landed = ad.barrier()
        if not vectors:
            ad.async_copy(x.at[self.rows, :], buf, barrier=landed, transforms=pieces, oob="undefined")
        else:
            ad.async_copy(x.at[self.rows, :], buf, barrier=landed, transforms=pieces, oob="undefined",
                          arrive=False)
            for vector, staged in zip(vectors, self._vectors):
                ad.async_copy(vector, staged if count > 1 else staged.at[0], barrier=landed,
                              transforms=vector_pieces, oob="undefined", arrive=False)
            landed.arrive_expect_tx(ROWS * n * x.dtype.itemsize
                                    + n * sum(vector.dtype.itemsize for vector in vectors))
        landed.wait()
        self._buf = buf if count == 1 else buf.at[0]

    def piece(self, c):
        """Piece c of the rows in float32 registers."""
        return (self._buf[...] if self.count == 1 else self._buf.at[c][...]).astype(ad.float32)

    def vectors(self, c):
        """Piece c of each vector, float32 rows to broadcast over the rows (`w[None, :]`)."""
        return tuple(staged.at[c][...].astype(ad.float32) for staged in self._vectors)


def staged_rows(x, ROWS: int, CHUNK: int, vectors: tuple = ()) -> StagedRows:
    """The CTA's ROWS rows of `x` (rows of n elements, a multiple of 128) and all of each of
    `vectors` (n elements each) in shared memory, brought in by bulk copies onto one barrier and
    waited for: pieces of CHUNK columns (CHUNK = n, or a divisor of n with ROWS = 1)."""
    return StagedRows(x, ROWS, CHUNK, tuple(vectors))


class PaddedRows(Rows):
    """Rows and vectors read from GMEM piece by piece (see `padded_rows`)."""

    def __init__(self, x, ROWS: int, WIDTH: int, vectors: tuple, other, block):
        super().__init__(x, ROWS, WIDTH, ad.cdiv(x.shape[1], WIDTH), block)
        self.x, self._vectors, self._other = x, vectors, other

    def piece(self, c):
        """Piece c of the rows in float32 registers, `other` past a row's end."""
        return ad.load(self.window(self.x, c), other=self._other).astype(ad.float32)

    def vectors(self, c):
        """Piece c of each vector, float32 rows to broadcast over the rows (`w[None, :]`), zeros
        past their end."""
        window = ad.ds(c * self.shape[1], self.shape[1])
        return tuple(ad.load(vector.at[window]).astype(ad.float32) for vector in self._vectors)


def padded_rows(x, ROWS: int, WIDTH: int, vectors: tuple = (), other=0, block=None) -> PaddedRows:
    """The CTA's ROWS rows of `x` (any length n) and the vectors of n elements they are combined
    with, read from GMEM WIDTH columns at a time, `other` past a row's end (-inf for a maximum
    that the padding must not win, 0 for a sum it must not change).  The rows are block number
    `block` of ROWS rows (a traced index: a CTA walking several blocks), else the CTA's own."""
    return PaddedRows(x, ROWS, WIDTH, tuple(vectors), other, block)
