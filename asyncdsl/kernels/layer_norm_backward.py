"""LayerNorm for training, bfloat16 rows: `y, mean, rstd = asyncdsl.kernels.layer_norm_forward(x,
w, b)` keeps each row's mean and rstd = 1 / sqrt(var + eps) (float32), and
`dx, dw, db = asyncdsl.kernels.layer_norm_backward(dy, x, w, mean, rstd)` takes the gradients of
y = (x − mean) · rstd · w + b:

    x̂ = (x − mean) · rstd,  g = dy ∘ w,
    dx = rstd · (g − mean(g) − x̂ · mean(g ∘ x̂)),  dw = Σ_rows dy ∘ x̂,  db = Σ_rows dy.

The forward is `asyncdsl.kernels.layer_norm`'s padded kernel that also writes the statistics.
The backward walks blocks of rows as `asyncdsl.kernels.rms_norm_backward` does (same plan), its
CTAs keeping their shares of dw and db in float32 registers, added up in a fixed order by
`asyncdsl.kernels.column_sums`: the same bits every run.  At windows of 8192 the two float32
sums, dy and x take 64 registers a thread each: ptxas spills about 20 registers to the stack.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks import row_plans
from asyncdsl.blocks.partial_sums import PartialSums, row_blocks
from asyncdsl.blocks.rows import padded_rows
from asyncdsl.blocks.shapes import check_rows, check_shape, row_length
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.column_sums import sum_columns
from asyncdsl.kernels.dispatch import launch, on_stream, walkers
from asyncdsl.kernels.layer_norm import CHUNK, PADDED_WHOLE, _layer_norm
from asyncdsl.kernels.outputs import empty, zeros
from asyncdsl.kernels.rms_norm_backward import backward_config


@on_stream
def layer_norm_forward(x, w, b, eps: float = 1e-5, *, stream=None):
    """(y, mean, rstd): LayerNorm of the rows of x (bfloat16) with the weight w and the bias b,
    and each row's float32 mean and 1 / sqrt(var + eps), which `layer_norm_backward` takes."""
    n = row_length("x", x)
    y = empty(x, x.shape, x.dtype)
    mean, rstd = (empty(x, x.shape[:1], ad.float32) for _ in range(2))
    if x.shape[0]:  # no rows, nothing to launch
        launch(layer_norm_stats, x, w, b, y, mean, rstd, stream=stream, **stats_config(n, eps))
    return y, mean, rstd


def stats_config(n: int, eps: float = 1e-5) -> dict:
    """`layer_norm_stats`' constexprs: `asyncdsl.kernels.layer_norm`'s padded plan."""
    return {"EPS": eps, **row_plans.padded_config(n, PADDED_WHOLE, CHUNK)}


@on_stream
def layer_norm_backward(dy, x, w, mean, rstd, *, stream=None):
    """(dx, dw, db) of y = layer_norm(x, w, b) given dy (x's shape and type) and the forward's
    mean and rstd."""
    constexprs = backward_config(row_length("x", x), x.shape[0], walkers(x), sums=2)
    if not x.shape[0]:  # no rows: dw and db sum none
        return empty(x, x.shape, x.dtype), zeros(w, w.shape, w.dtype), zeros(w, w.shape, w.dtype)
    partial_w, partial_b = (empty(x, (constexprs["CTAS"], x.shape[1]), ad.float32) for _ in range(2))
    dx = empty(x, x.shape, x.dtype)
    launch(layer_norm_backward_rows, dy, x, w, mean, rstd, dx, partial_w, partial_b, stream=stream,
           **constexprs)
    dw = sum_columns(partial_w, empty(w, w.shape, w.dtype), stream=stream)
    return dx, dw, sum_columns(partial_b, empty(w, w.shape, w.dtype), stream=stream)


@kernel(grid=lambda x, w, b, y, mean, rstd, EPS, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def layer_norm_stats(x, w, b, y, mean, rstd, EPS: constexpr, ROWS: constexpr, WIDTH: constexpr):
    """`asyncdsl.kernels.layer_norm`'s padded kernel, each row's mean and rstd kept in float32."""
    check_rows(("x", x), ("y", y), ("mean", mean))
    check_rows(("x", x), ("y", y), ("rstd", rstd))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    check_shape("b", b, x.shape[1:], "one bias a column of x")
    _layer_norm(padded_rows(x, ROWS, WIDTH, vectors=(w, b)), y, EPS, (mean, rstd))


@kernel(grid=lambda dy, x, w, mean, rstd, dx, partial_w, partial_b, ROWS, WIDTH, CTAS: (CTAS,))
def layer_norm_backward_rows(dy, x, w, mean, rstd, dx, partial_w, partial_b, ROWS: constexpr,
                             WIDTH: constexpr, CTAS: constexpr):
    """dx of blocks of ROWS rows, every CTAS-th, and the CTA's partial sums of dw and db."""
    check_rows(("x", x), ("dy", dy), ("mean", mean))
    check_rows(("x", x), ("dx", dx), ("rstd", rstd))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    for name, partial in (("partial_w", partial_w), ("partial_b", partial_b)):
        check_shape(name, partial, (CTAS, x.shape[1]), "a float32 row of partial sums a CTA")
    n = x.shape[1]
    sums = PartialSums(2, (ROWS, WIDTH))
    for block in row_blocks(x.shape[0], ROWS, CTAS):
        rows = padded_rows(x, ROWS, WIDTH, vectors=(w,), block=block)
        grad = padded_rows(dy, ROWS, WIDTH, block=block).piece(0)
        r = ad.load(rstd.at[rows.rows])[:, None]  # rows past the end: 0, and so is all they add
        normed = (rows.piece(0) - ad.load(mean.at[rows.rows])[:, None]) * r
        sums.add(grad * normed, grad)  # padding: dy = 0 adds nothing
        g = grad * rows.vectors(0)[0][None, :]  # read again each block (from L1/L2): registers for dw
        mean_g = g.sum(axis=1)[:, None] * (1.0 / n)
        mean_gx = (g * normed).sum(axis=1)[:, None] * (1.0 / n)
        ad.store(rows.window(dx, 0), (r * (g - mean_g - normed * mean_gx)).astype(dx.dtype))
    sums.store(partial_w, partial_b)


def reference_backward(dy: np.ndarray, x: np.ndarray, w: np.ndarray, eps: float = 1e-5):
    """(dx, dw, db) of LayerNorm in float64 (the statistics recomputed from x)."""
    dy, x, w = (a.astype(np.float64) for a in (dy, x, w))
    d = x - x.mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
    normed, g = d * r, dy * w
    dx = r * (g - g.mean(axis=1, keepdims=True) - normed * (g * normed).mean(axis=1, keepdims=True))
    return dx, (dy * normed).sum(axis=0), dy.sum(axis=0)


def backward_example(rows: int, n: int, sms: int = 132) -> tuple:
    """Argument specs and constexprs of `layer_norm_backward_rows` for `rows` rows of n elements."""
    constexprs = backward_config(n, rows, sms, sums=2)
    matrix, vector = ArraySpec((rows, n), ad.bfloat16), ArraySpec((n,), ad.bfloat16)
    stat, partial = ArraySpec((rows,), ad.float32), ArraySpec((constexprs["CTAS"], n), ad.float32)
    return (matrix, matrix, vector, stat, stat, matrix, partial, partial), constexprs


def _stats_specs(rows: int, n: int) -> tuple:
    matrix, vector = ArraySpec((rows, n), ad.bfloat16), ArraySpec((n,), ad.bfloat16)
    stat = ArraySpec((rows,), ad.float32)
    return matrix, vector, vector, matrix, stat, stat


# Arguments `asyncdsl dump` traces each kernel with.
EXAMPLE_ARGS = {"layer_norm_stats": (_stats_specs(9, 1000), stats_config(1000)),
                "layer_norm_backward_rows": backward_example(64, 4096)}
