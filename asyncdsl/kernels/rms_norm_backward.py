"""RMSNorm for training, bfloat16 rows: `y, rstd = asyncdsl.kernels.rms_norm_forward(x, w)` keeps
each row's rstd = 1 / sqrt(mean(x²) + eps) (float32), and
`dx, dw = asyncdsl.kernels.rms_norm_backward(dy, x, w, rstd)` takes the gradients of
y = x · rstd · w:

    x̂ = x · rstd,  g = dy ∘ w,  dx = rstd · (g − x̂ · mean(g ∘ x̂)),  dw = Σ_rows dy ∘ x̂.

The forward is `asyncdsl.kernels.rms_norm`'s padded kernel that also writes rstd.  The backward
(`rms_norm_backward_rows`) has as many CTAs as fit on the GPU at once (`resident`) walk blocks
of ROWS rows, each row held in registers in one window of whole 16-byte vectors a thread (rows of
up to MOST elements, the hidden sizes of today's models): dy and x are read once, dx written
once, and the CTA's share of dw stays in float32 registers until it leaves as one row of partial
sums, which `asyncdsl.kernels.column_sums` adds up in a fixed order.  No atomics: the same bits
every run.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks import row_plans
from asyncdsl.blocks.partial_sums import PartialSums, row_blocks
from asyncdsl.blocks.rows import padded_rows
from asyncdsl.blocks.shapes import check_rows, check_shape, row_length
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.column_sums import sum_columns
from asyncdsl.kernels.dispatch import launch, on_stream, walkers
from asyncdsl.kernels.outputs import empty, zeros
from asyncdsl.kernels.rms_norm import CHUNK, WHOLE, _rms_norm

MOST = 8192  # longest rows the backward holds in registers (64 floats a thread of each of dy, x, dw)
ELEMENTS = 2048  # elements of rows a CTA takes at a time: small CTAs, several to a multiprocessor


@on_stream
def rms_norm_forward(x, w, eps: float = 1e-6, *, stream=None):
    """(y, rstd): RMSNorm of the rows of x (bfloat16) with the weight w, and each row's float32
    1 / sqrt(mean(x²) + eps), which `rms_norm_backward` takes."""
    n = row_length("x", x)
    y, rstd = empty(x, x.shape, x.dtype), empty(x, x.shape[:1], ad.float32)
    if x.shape[0]:  # no rows, nothing to launch
        launch(rms_norm_stats, x, w, y, rstd, stream=stream, **stats_config(n, eps))
    return y, rstd


def stats_config(n: int, eps: float = 1e-6) -> dict:
    """`rms_norm_stats`' constexprs: `asyncdsl.kernels.rms_norm`'s padded plan."""
    return {"EPS": eps, **row_plans.padded_config(n, WHOLE, CHUNK)}


@on_stream
def rms_norm_backward(dy, x, w, rstd, *, stream=None):
    """(dx, dw) of y = rms_norm(x, w) given dy (x's shape and type) and the forward's rstd."""
    constexprs = backward_config(row_length("x", x), x.shape[0], walkers(x))
    if not x.shape[0]:  # no rows: dw sums none
        return empty(x, x.shape, x.dtype), zeros(w, w.shape, w.dtype)
    partial = empty(x, (constexprs["CTAS"], x.shape[1]), ad.float32)
    dx = empty(x, x.shape, x.dtype)
    launch(rms_norm_backward_rows, dy, x, w, rstd, dx, partial, stream=stream, **constexprs)
    return dx, sum_columns(partial, empty(w, w.shape, w.dtype), stream=stream)


def backward_config(n: int, rows: int, sms: int, sums: int = 1) -> dict:
    """ROWS, WIDTH and CTAS of a norm's backward for `rows` rows of n elements on `sms`
    multiprocessors, keeping `sums` weight gradients: the rows in one window of whole vectors a
    thread, as many a block as fit in ELEMENTS, and as many CTAs as stay resident together
    (`resident`), no more than blocks.  Rows longer than MOST are refused."""
    if n > MOST:
        raise ad.ArgumentError(f"the norms' backward takes rows of up to {MOST} elements, got {n}",
                               user_location())
    block_rows, width = row_plans.padded_rows(n, ELEMENTS)
    ctas = sms * resident(block_rows * width // row_plans.THREADS, sums)
    return {"ROWS": block_rows, "WIDTH": width, "CTAS": max(1, min(ctas, ad.cdiv(rows, block_rows)))}


def resident(elements: int, sums: int) -> int:
    """CTAs of a norm's backward that fit on a multiprocessor at once (up to 4: more would add
    rows of partial sums and no bandwidth) when each thread holds `elements` of each of dy and x
    and of each of `sums` float32 sums: about (3 + sums) registers an element, as ptxas
    allocates them (64 registers for 16 elements and one sum, 255 for 64), of 65536 a
    multiprocessor."""
    registers = min(255, (3 + sums) * elements + 16)
    return max(1, min(4, 65536 // (row_plans.THREADS * registers)))


@kernel(grid=lambda x, w, y, rstd, EPS, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def rms_norm_stats(x, w, y, rstd, EPS: constexpr, ROWS: constexpr, WIDTH: constexpr):
    """`asyncdsl.kernels.rms_norm`'s padded kernel, each row's rstd kept in float32."""
    check_rows(("x", x), ("y", y), ("rstd", rstd))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    _rms_norm(padded_rows(x, ROWS, WIDTH, vectors=(w,)), y, EPS, rstd)


@kernel(grid=lambda dy, x, w, rstd, dx, partial, ROWS, WIDTH, CTAS: (CTAS,))
def rms_norm_backward_rows(dy, x, w, rstd, dx, partial, ROWS: constexpr, WIDTH: constexpr, CTAS: constexpr):
    """dx of blocks of ROWS rows, every CTAS-th, and the CTA's partial sums of dw."""
    check_rows(("x", x), ("dy", dy), ("rstd", rstd))
    check_rows(("x", x), ("dx", dx))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    check_shape("partial", partial, (CTAS, x.shape[1]), "a float32 row of partial sums a CTA")
    n = x.shape[1]
    dw = PartialSums(1, (ROWS, WIDTH))
    for block in row_blocks(x.shape[0], ROWS, CTAS):
        rows = padded_rows(x, ROWS, WIDTH, vectors=(w,), block=block)
        grad = padded_rows(dy, ROWS, WIDTH, block=block).piece(0)
        r = ad.load(rstd.at[rows.rows])[:, None]  # rows past the end: 0, and so is all they add
        normed = rows.piece(0) * r
        dw.add(grad * normed)
        g = grad * rows.vectors(0)[0][None, :]  # read again each block (from L1/L2): registers for dw
        mean = (g * normed).sum(axis=1)[:, None] * (1.0 / n)
        ad.store(rows.window(dx, 0), (r * (g - normed * mean)).astype(dx.dtype))
    dw.store(partial)


def reference_backward(dy: np.ndarray, x: np.ndarray, w: np.ndarray, eps: float = 1e-6):
    """(dx, dw) of RMSNorm in float64 (the statistics recomputed from x)."""
    dy, x, w = (a.astype(np.float64) for a in (dy, x, w))
    r = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    normed, g = x * r, dy * w
    dx = r * (g - normed * (g * normed).mean(axis=1, keepdims=True))
    return dx, (dy * normed).sum(axis=0)


def _specs(rows: int, n: int) -> tuple:
    matrix, vector = ArraySpec((rows, n), ad.bfloat16), ArraySpec((n,), ad.bfloat16)
    return matrix, vector, matrix, ArraySpec((rows,), ad.float32)


def backward_example(rows: int, n: int, sms: int = 132) -> tuple:
    """Argument specs and constexprs of `rms_norm_backward_rows` for `rows` rows of n elements."""
    constexprs = backward_config(n, rows, sms, sums=1)
    matrix, vector = ArraySpec((rows, n), ad.bfloat16), ArraySpec((n,), ad.bfloat16)
    partial = ArraySpec((constexprs["CTAS"], n), ad.float32)
    return (matrix, matrix, vector, ArraySpec((rows,), ad.float32), matrix, partial), constexprs


# Arguments `asyncdsl dump` traces each kernel with.
EXAMPLE_ARGS = {"rms_norm_stats": (_specs(9, 1000), stats_config(1000)),
                "rms_norm_backward_rows": backward_example(64, 4096)}
