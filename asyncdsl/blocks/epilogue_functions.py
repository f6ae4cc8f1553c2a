"""Elementwise functions for the epilogue of a GEMM tile (`asyncdsl.blocks.epilogues`): what
happens to each 64 x 64 piece of the float32 accumulator between the tensor cores and the store.

    from asyncdsl.blocks.epilogue_functions import activation, column_vector, row_vector

    bias = column_vector(bias_gmem, col, acc.shape[1])          # loaded once a tile
    store_in_pieces(acc, c_out, me, c, row, col,
                    piece=lambda i, j: activation(piece_of(acc, i, j) + bias[j], "gelu"))

Vectors along a tile's rows or columns are loaded before the last wgmma is waited for, every load
of a tile issued at once, so the epilogue waits one round trip to memory, not one a piece.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad

ACTIVATIONS = ("none", "gelu", "silu", "relu")
SQRT_2_OVER_PI = 0.7978845608028654
LOG2_E = 1.4426950408889634


def column_vector(vector, col, columns: int, other: float = 0.0) -> list:
    """The elements col.. col + columns of `vector` (one per column of c), 64 a piece, each as a
    (1, 64) tile in the accumulator's column layout (elements past the end: `other`)."""
    return [ad.load(vector.at[ad.ds(col + j * 64, 64)], layout=ad.WGMMA_COL, other=other)[None, :]
            for j in range(columns // 64)]


def row_vector(vector, row, rows: int, other: float = 0.0) -> list:
    """The elements row.. row + rows of `vector` (one per row of c), 64 a piece, each as a (64, 1)
    tile in the accumulator's row layout."""
    return [ad.load(vector.at[ad.ds(row + i * 64, 64)], layout=ad.WGMMA_ROW, other=other)[:, None]
            for i in range(rows // 64)]


def tile_scales(a_scale, b_scale, row, col, rows: int, columns: int) -> tuple[list, list]:
    """The scales of the rows x columns of c at (row, col): its rows' (`row_vector`) and its
    columns' (`column_vector`), every load issued at once."""
    return row_vector(a_scale, row, rows), column_vector(b_scale, col, columns)


def activation(x, name: str):
    """`name` of the float32 tile x: "gelu" (tanh form, as torch's approximate="tanh"), "silu"
    (x·sigmoid(x)), "relu", or "none"."""
    if name == "none":
        return x
    if name == "relu":
        return ad.maximum(x, 0.0)
    if name == "silu":
        return times_sigmoid(x, x)
    if name == "gelu":  # 0.5·x·(1 + tanh(u)) = x·sigmoid(2u)
        return times_sigmoid(x, x * (2 * SQRT_2_OVER_PI) * (x * x * 0.044715 + 1.0))
    raise ad.TraceError(f"activation must be one of {ACTIVATIONS}, got {name!r}")


def times_sigmoid(x, y):
    """x·sigmoid(y) = x·2^-log2(1 + 2^(-y·log2 e)), a few float32 ulps relative everywhere.

    The tanh form 0.5·(1 + tanh(y/2)) would lose tanh.approx's absolute error (about 2^-17) to
    cancellation where y is negative, and a quotient's IEEE division has a slow path whose call
    spills the accumulator; `exp2` and `log2` are one instruction each.  y very negative: the
    inner power overflows to inf and the result is x·0."""
    return x * ad.exp2(-ad.log2(ad.exp2(y * -LOG2_E) + 1.0))


def residual(source, row, col, i: int, j: int):
    """Piece (i, j) of the tile at (row, col) of `source` (a residual to add), as float32."""
    return ad.load(source.at[ad.ds(row + i * 64, 64), ad.ds(col + j * 64, 64)],
                   layout=ad.WGMMA).astype(ad.float32)
