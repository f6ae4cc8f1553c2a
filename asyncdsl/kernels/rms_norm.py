"""RMSNorm with a weight, bfloat16 in and out: `y = asyncdsl.kernels.rms_norm(x, w)`, that is
y = x / sqrt(mean(x², axis=1) + eps) * w, the statistics in float32.

`choose(N)` picks the kernel for the rows' length.  `rms_norm_rows` takes ROWS whole rows a CTA
(one warpgroup) and the weight into shared memory by bulk copies onto one barrier
(`asyncdsl.blocks.rows.staged_rows`).  Rows of up to WHOLE elements are read into registers
once: the sum of squares (float32, reduced across lanes once), the scale, the weight and the
rounding all happen there, and the weight's tile is broadcast over the rows with no data
movement (infer-layouts gives it the rows' layout without the row axis).  Longer rows come in
pieces of up to CHUNK elements and take two sweeps over shared memory.  Rows of other lengths
(no multiple of 128 elements, which the register layouts need, or long rows that only small
pieces divide) go to `rms_norm_padded`, which reads rows and weight from GMEM into registers
padded with zeros (which add nothing to the sum of squares) to whole 16-byte vectors a thread
(`asyncdsl.blocks.row_plans`).  Results go from registers straight to y (vector `st.global`).

The measurements behind these choices are in docs/notes/2026-12-04-row-kernel-choices.md.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.row_plans import padded_config, rows_config
from asyncdsl.blocks.row_reductions import accumulate
from asyncdsl.blocks.rows import padded_rows, staged_rows
from asyncdsl.blocks.shapes import check_rows, check_shape, row_length
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import Kernel, kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty

WHOLE = 8192  # rows up to this long are held in registers at once (64 floats a thread)
CHUNK = 4096  # longer rows sweep in pieces of this (or of a divisor of it)


@on_stream
def rms_norm(x, w, eps: float = 1e-6, *, out=None, stream=None):
    """RMSNorm of each row of the matrix x (bfloat16) with the weight w (one a column), in a new
    array like x or in `out`."""
    chosen, constexprs = choose(row_length("x", x), eps)
    y = empty(x, x.shape, x.dtype) if out is None else out
    if x.shape[0]:  # no rows, nothing to launch
        launch(chosen, x, w, y, stream=stream, **constexprs)
    return y


def config(n: int, eps: float = 1e-6) -> dict | None:
    """`rms_norm_rows`' constexprs: 16 KiB of rows per CTA for rows of up to 4096 elements, one
    row a CTA held whole up to WHOLE, else one row in pieces.  Held whole (80 registers a thread
    against 38), rows of 8192 measured faster than in two pieces (docs/hardware.md §19)."""
    plan = rows_config(n, WHOLE, CHUNK, 8192)
    return None if plan is None else {"EPS": eps, **plan}


def choose(n: int, eps: float = 1e-6) -> tuple[Kernel, dict]:
    """The kernel and constexprs for rows of n elements: whole rows or large pieces where the
    rows are a multiple of 128 elements, else the padded kernel in one window of whole 16-byte
    vectors a thread of up to WHOLE elements, which measured faster than windows of 4096
    (docs/hardware.md §19)."""
    constexprs = config(n, eps)
    if constexprs is not None:
        return rms_norm_rows, constexprs
    return rms_norm_padded, {"EPS": eps, **padded_config(n, WHOLE, CHUNK)}


@kernel(grid=lambda x, w, y, EPS, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def rms_norm_rows(x, w, y, EPS: constexpr, ROWS: constexpr, CHUNK: constexpr):
    """ROWS rows of a multiple of 128 elements a CTA, through shared memory, whole or in pieces
    of CHUNK."""
    check_rows(("x", x), ("y", y))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    _rms_norm(staged_rows(x, ROWS, CHUNK, vectors=(w,)), y, EPS)


@kernel(grid=lambda x, w, y, EPS, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def rms_norm_padded(x, w, y, EPS: constexpr, ROWS: constexpr, WIDTH: constexpr):
    """Rows of any length, ROWS a CTA, with the weight from GMEM into registers WIDTH elements at
    a time, zeros past a row's end."""
    check_rows(("x", x), ("y", y))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    _rms_norm(padded_rows(x, ROWS, WIDTH, vectors=(w,)), y, EPS)


def _rms_norm(rows, y, eps: float, rstd=None) -> None:
    """RMSNorm of `rows` (asyncdsl.blocks.rows, the weight their one vector) into y, and each
    row's 1 / sqrt(mean(x²) + eps) into the float32 vector `rstd` if given.  One piece is
    read once; more are read twice, the sum of squares staying elementwise in registers in
    between.  The mean divides by the rows' length, which padded pieces may exceed."""
    n = rows.n
    if rows.count == 1:
        v = rows.piece(0)
        reciprocal = ad.rsqrt((v * v).sum(axis=1) * (1.0 / n) + eps)
    else:
        squares = ad.registers(rows.shape, ad.float32)

        def add_square(c):
            v = rows.piece(c)
            return ad.fma(v, v, squares[...])

        total = accumulate(squares, 0, rows.count, add_square)
        reciprocal = ad.rsqrt(total.sum(axis=1) * (1.0 / n) + eps)
    if rstd is not None:
        ad.store(rstd.at[rows.rows], reciprocal)
    scale = reciprocal[:, None]
    for c in rows.pieces():
        scaled = (v if rows.count == 1 else rows.piece(c)) * scale * rows.vectors(c)[0][None, :]
        ad.store(rows.window(y, c), scaled.astype(y.dtype))


def reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """RMSNorm in float64, rounded once to x's type."""
    wide = x.astype(np.float64)
    scale = 1.0 / np.sqrt((wide * wide).mean(axis=1, keepdims=True) + eps)
    return (wide * scale * w.astype(np.float64)).astype(x.dtype)


def _specs(rows: int, n: int) -> tuple:
    matrix = ArraySpec((rows, n), ad.bfloat16)
    return matrix, ArraySpec((n,), ad.bfloat16), matrix


# Arguments `asyncdsl dump` traces each kernel with (rows of 1000: 16-byte vectors, no multiple of 128).
EXAMPLE_ARGS = {"rms_norm_rows": (_specs(64, 1024), config(1024)),
                "rms_norm_padded": (_specs(9, 1000), choose(1000)[1])}
