"""LayerNorm with a weight and a bias, bfloat16 in and out: `y = asyncdsl.kernels.layer_norm(x,
w, b)`, that is y = (x - mean) / sqrt(var + eps) * w + b over each row, the statistics in float32.

`choose(N)` picks the kernel for the rows' length, as `asyncdsl.kernels.rms_norm` does.
`layer_norm_rows` takes ROWS whole rows a CTA (one warpgroup), the weight and the bias into
shared memory by bulk copies onto one barrier.  Rows of up to WHOLE elements are read into
registers once: the mean, then the variance as the mean of the centred squares (two reductions
over the values already in registers; no E[x²] - E[x]², which cancels catastrophically when the
mean is large against the spread), and `(x - mean) · rstd · w + b` with the last multiply and add
fused, one rounding.  Longer rows come in CHUNK-wide pieces and take three sweeps over shared
memory: sums, centred squares, results.  Rows of other lengths go to `layer_norm_padded`, which
reads rows, weight and bias from GMEM into registers padded with zeros to whole 16-byte vectors a
thread; the padding adds nothing to the sum and is masked out of the centred squares.

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
PADDED_WHOLE = 7168  # padded rows whose window of whole vectors is at most this wide take one


@on_stream
def layer_norm(x, w, b, eps: float = 1e-5, *, out=None, stream=None):
    """LayerNorm of each row of the matrix x (bfloat16) with the weight w and the bias b (one of
    each a column), in a new array like x or in `out`."""
    chosen, constexprs = choose(row_length("x", x), eps)
    y = empty(x, x.shape, x.dtype) if out is None else out
    if x.shape[0]:  # no rows, nothing to launch
        launch(chosen, x, w, b, y, stream=stream, **constexprs)
    return y


def config(n: int, eps: float = 1e-5) -> dict | None:
    """`layer_norm_rows`' constexprs: 16 KiB of rows per CTA for rows of up to 4096 elements, one
    row a CTA held whole up to WHOLE, else one row in pieces, which measured slower for rows of
    6144 and 8192 (docs/hardware.md §19)."""
    plan = rows_config(n, WHOLE, CHUNK, 8192)
    return None if plan is None else {"EPS": eps, **plan}


def choose(n: int, eps: float = 1e-5) -> tuple[Kernel, dict]:
    """The kernel and constexprs for rows of n elements: whole rows or large pieces where the
    rows are a multiple of 128 elements, else the padded kernel in one window of whole 16-byte
    vectors a thread of up to PADDED_WHOLE elements: one window measured faster than windows of
    4096 up to rows of 7168, slower at 8192 (docs/hardware.md §19)."""
    constexprs = config(n, eps)
    if constexprs is not None:
        return layer_norm_rows, constexprs
    # Long rows one a CTA in pieces (two rows' sums, pieces and masks would take 212 registers).
    return layer_norm_padded, {"EPS": eps, **padded_config(n, PADDED_WHOLE, CHUNK)}


@kernel(grid=lambda x, w, b, y, EPS, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def layer_norm_rows(x, w, b, y, EPS: constexpr, ROWS: constexpr, CHUNK: constexpr):
    """ROWS rows of a multiple of 128 elements a CTA, through shared memory, whole or in pieces
    of CHUNK."""
    _check(x, w, b, y)
    _layer_norm(staged_rows(x, ROWS, CHUNK, vectors=(w, b)), y, EPS)


@kernel(grid=lambda x, w, b, y, EPS, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def layer_norm_padded(x, w, b, y, EPS: constexpr, ROWS: constexpr, WIDTH: constexpr):
    """Rows of any length, ROWS a CTA, with the weight and bias from GMEM into registers WIDTH
    elements at a time, zeros past a row's end."""
    _check(x, w, b, y)
    _layer_norm(padded_rows(x, ROWS, WIDTH, vectors=(w, b)), y, EPS)


def _check(x, w, b, y) -> None:
    check_rows(("x", x), ("y", y))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    check_shape("b", b, x.shape[1:], "one bias a column of x")


def _layer_norm(rows, y, eps: float, stats=None) -> None:
    """LayerNorm of `rows` (asyncdsl.blocks.rows, the weight and the bias their vectors) into y,
    and each row's mean and rstd into the float32 vectors `stats` = (mean, rstd) if given.
    One piece is read once; more are read three times, the sums and then the centred squares
    staying elementwise in registers in between.  The mean and the variance divide by the rows'
    length (one IEEE rounding a row, so a constant row's mean is exact and its output is the
    bias bit for bit), which padded pieces may exceed: their centred squares are masked out."""
    n, count = rows.n, rows.count

    def centred(v, c, mean):
        d = v - mean
        return d if count * rows.shape[1] == n else ad.where(rows.inside(c), d, 0.0)

    def keep(mean, rstd):
        if stats is not None:
            for vector, value in zip(stats, (mean, rstd)):
                ad.store(vector.at[rows.rows], value)
        return rstd[:, None]

    if count == 1:
        v = rows.piece(0)
        row_mean = v.sum(axis=1) / n
        mean = row_mean[:, None]
        d = centred(v, 0, mean)
        rstd = keep(row_mean, ad.rsqrt((d * d).sum(axis=1) / n + eps))
        w, b = rows.vectors(0)
        ad.store(rows.window(y, 0), ad.fma(d * rstd, w[None, :], b[None, :]).astype(y.dtype))
        return
    acc = ad.registers(rows.shape, ad.float32)
    row_mean = accumulate(acc, 0, count, lambda c: acc[...] + rows.piece(c)).sum(axis=1) / n
    mean = row_mean[:, None]

    def add_square(c):
        d = centred(rows.piece(c), c, mean)
        return ad.fma(d, d, acc[...])

    rstd = keep(row_mean, ad.rsqrt(accumulate(acc, 0, count, add_square).sum(axis=1) / n + eps))
    for c in rows.pieces():
        w, b = rows.vectors(c)
        target = rows.window(y, c)
        ad.store(target, ad.fma((rows.piece(c) - mean) * rstd, w[None, :], b[None, :]).astype(y.dtype))


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """LayerNorm in float64, rounded once to x's type."""
    wide = x.astype(np.float64)
    d = wide - wide.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
    return (d * rstd * w.astype(np.float64) + b.astype(np.float64)).astype(x.dtype)


def _specs(rows: int, n: int) -> tuple:
    matrix, vector = ArraySpec((rows, n), ad.bfloat16), ArraySpec((n,), ad.bfloat16)
    return matrix, vector, vector, matrix


# Arguments `asyncdsl dump` traces each kernel with (rows of 1000: 16-byte vectors, no multiple of 128).
EXAMPLE_ARGS = {"layer_norm_rows": (_specs(64, 1024), config(1024)),
                "layer_norm_padded": (_specs(9, 1000), choose(1000)[1])}
