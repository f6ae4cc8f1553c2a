"""Plans of the memory-bound row kernels (softmax, RMSNorm, LayerNorm): how many rows a CTA
takes and in what windows, for rows of any length.

    >>> from asyncdsl.blocks.row_plans import padded_config, rows_config
    >>> rows_config(4096, whole=8192, piece=4096, elements=8192)  # two rows a CTA, held whole
    {'ROWS': 2, 'CHUNK': 4096}
    >>> rows_config(1000, whole=8192, piece=4096, elements=8192) is None  # no multiple of 128
    True
    >>> padded_config(1000, most=8192, window=4096)  # eight rows a CTA in windows of 1024
    {'ROWS': 8, 'WIDTH': 1024}

Rows of a multiple of 128 elements come into shared memory by one bulk copy (`rows_config`,
`asyncdsl.blocks.rows.staged_rows`); others go from GMEM into registers in windows of whole
16-byte vectors a thread (`padded_config`, `asyncdsl.blocks.rows.padded_rows`).

A warpgroup's tile of rows gives each of its 128 threads the same share of elements, and
infer-layouts moves a thread's share in 16-byte vectors only where that share is whole vectors;
otherwise every element moves alone, a 2-byte `ld.global` or `st.global` each, which measured
markedly slower (docs/notes/2026-12-04-row-plans.md).  A row whose length is no multiple of 8
starts off a 16-byte boundary in GMEM: its vectors are the largest power of two dividing the
length."""

from __future__ import annotations

import math

from asyncdsl.frontend import language as ad

THREADS = 128  # a warpgroup
VECTOR_BYTES = 16


def vector_elements(n: int, itemsize: int = 2) -> int:
    """Elements in a vector of a row of n: 16 bytes' worth, or fewer where rows of n elements
    start off 16-byte boundaries (the largest power of two dividing n)."""
    return min(VECTOR_BYTES // itemsize, n & -n)


def whole_vectors(rows: int, width: int, vector: int) -> bool:
    """Whether a tile of `rows` rows of `width` elements, laid out for reductions along its rows
    (warps over rows, lanes over vectors of a row: infer-layouts' row layout), gives every
    thread whole vectors of `vector` elements: a warp's 32 lanes take whole vectors of each row
    it holds, and rows fewer than the 4 warps are each shared by 4 / rows warps."""
    if rows % 4 == 0:
        return width % (32 * vector) == 0
    return 4 % rows == 0 and width % (32 * vector * (4 // rows)) == 0


def widest_vector(rows: int, width: int, most: int = VECTOR_BYTES // 2) -> int:
    """The most elements a vector (a power of two up to `most`) for which a tile of `rows` rows of
    `width` elements is whole vectors in every thread; 0 where none is (rows that neither divide
    nor are a multiple of the 4 warps)."""
    vector = most
    while vector and not whole_vectors(rows, width, vector):
        vector //= 2
    return vector


def padded_rows(n: int, elements: int, itemsize: int = 2) -> tuple[int, int]:
    """(ROWS, WIDTH) of a padded row kernel for rows of n elements: the narrowest window of
    whole vectors a thread (vectors as wide as the rows' alignment allows) for which some
    number of rows fits in about `elements` elements, and the most such rows."""
    vector = vector_elements(n, itemsize)
    width = ad.cdiv(n, 32 * vector) * 32 * vector
    while True:
        most = max(1, elements // width)
        fitting = [rows for rows in range(1, most + 1) if whole_vectors(rows, width, vector)]
        if fitting:
            return max(fitting), width
        width += 32 * vector


def rows_config(n: int, whole: int, piece: int, elements: int) -> dict | None:
    """ROWS and CHUNK of a rows kernel (rows brought into shared memory by one bulk copy) for
    rows of n elements: about `elements` elements of rows a CTA (one row at least) for rows of
    up to `whole` elements, held in registers at once; one longer row a CTA in pieces of
    gcd(n, piece).  None where the rows must go padded: no multiple of 128 elements (which the
    register layouts need), or long rows that no piece of 1024 elements or more divides."""
    if n % 128:
        return None
    if n <= whole:
        return {"ROWS": max(1, elements // n), "CHUNK": n}
    chunk = math.gcd(n, piece)
    return {"ROWS": 1, "CHUNK": chunk} if chunk >= 1024 else None


def padded_config(n: int, most: int, window: int, elements: int = 8192) -> dict:
    """ROWS and WIDTH of a padded row kernel for rows of n elements: about `elements` elements of
    rows a CTA (16 KiB of bfloat16 for the norms) in one window of whole vectors where that is at
    most `most` wide, else one row a CTA in windows of `window` (two long rows a CTA took 141
    registers a thread, and the driver's JIT made slow code of them:
    docs/notes/2026-12-04-row-plans.md)."""
    rows, width = padded_rows(n, elements)
    if width <= most:
        return {"ROWS": rows, "WIDTH": width}
    return {"ROWS": 1, "WIDTH": window}
