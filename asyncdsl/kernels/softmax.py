"""Softmax of the rows of a (M, N) bfloat16 matrix in one pass over HBM:
`y = asyncdsl.kernels.softmax(x)`.

`choose(N)` picks one of three kernels for the rows' length.  `softmax_rows` takes ROWS whole
rows a CTA (one warpgroup) into shared memory by one bulk copy (`asyncdsl.blocks.rows`).  Rows
of up to CHUNK elements are read into registers once (64 floats a thread for rows of 8192):
maximum, exponentials, sum and scaling all happen there.  Longer rows come in CHUNK-wide pieces
and take three sweeps over shared memory, the running maximum and the sum of exponentials kept
element by element in registers (`asyncdsl.blocks.row_reductions.accumulate`), so each row
crosses lanes once a sweep.  Rows of 4097-8192 elements (a multiple of 2048, so that each half
is whole 16-byte vectors a thread) go to `softmax_halves`: one row a CTA of two warpgroups, each
holding half the row, their maxima and sums meeting in shared memory (the row's reduction spread
over twice the threads, which measured faster than one warpgroup a row: docs/hardware.md §19).
Rows of other lengths (no multiple of 128 elements, which the register layouts need; a
multiple whose tile would move elements alone, such as 640 or 1152; long rows that only small
pieces divide) go to `softmax_padded`, which reads them from GMEM into registers padded with
-inf to whole 16-byte vectors a thread.  Results go from registers straight to y (vector
`st.global`): nothing waits for a TMA store before the CTA leaves (docs/hardware.md §19).
Exponentials use `ex2.approx` (as Triton and torch do); everything else rounds as IEEE says
(docs/register-tiles.md).

The measurements behind these choices are in docs/notes/2026-12-04-row-kernel-choices.md.
"""

from __future__ import annotations

import operator

import numpy as np

from asyncdsl.blocks.row_plans import padded_config, rows_config, widest_vector
from asyncdsl.blocks.row_reductions import accumulate, across_warpgroups
from asyncdsl.blocks.rows import padded_rows, staged_rows
from asyncdsl.blocks.shapes import check_rows, row_length
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import Kernel, kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty

LOG2E = 1.4426950408889634
CHUNK = 8192  # elements of a row one pass holds in registers: 64 floats per thread
HALVES_FROM = 4096  # longer rows of up to CHUNK elements go to `softmax_halves`


@on_stream
def softmax(x, *, out=None, stream=None):
    """The softmax of each row of the matrix x (bfloat16), in a new array like x or in `out`."""
    chosen, constexprs = choose(row_length("x", x))
    y = empty(x, x.shape, x.dtype) if out is None else out
    if x.shape[0]:  # no rows, nothing to launch
        launch(chosen, x, y, stream=stream, **constexprs)
    return y


def config(n: int) -> dict | None:
    """ROWS and CHUNK of `softmax_rows` for rows of n elements: 4 KiB of rows per CTA, or one row
    when it is longer (small CTAs, many to an SM, overlap one another's copies and math;
    docs/hardware.md §19), held in registers at once when it
    fits, else in pieces that divide it."""
    return rows_config(n, CHUNK, CHUNK, 2048)


def choose(n: int) -> tuple[Kernel, dict]:
    """The kernel and constexprs for rows of n elements."""
    # Halves only where each is whole 16-byte vectors a thread: halves of partial vectors ran
    # slower than one warpgroup a row (docs/hardware.md §19).
    if HALVES_FROM < n <= CHUNK and n % 2048 == 0:
        return softmax_halves, {}
    # Whole rows, or large pieces, unless the rows' tile would move elements alone (640, 1152,
    # 2176, 4224 elements): padded windows of whole vectors measured faster there
    # (docs/hardware.md §19).
    constexprs = config(n)
    if constexprs is not None and (n > CHUNK or widest_vector(constexprs["ROWS"], n) > 1):
        return softmax_rows, constexprs
    # Other rows in one window of whole vectors a thread (windows of partial vectors, an element
    # a thread at a time, measured slower: docs/notes/2026-12-04-row-plans.md), or longer ones
    # sweeping in pieces half as wide: the running maximum or sum and a piece are both in
    # registers (141 registers a thread at CHUNK, 78 at half).
    return softmax_padded, padded_config(n, CHUNK, CHUNK // 2, elements=2048)


@kernel(grid=lambda x, y, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def softmax_rows(x, y, ROWS: constexpr, CHUNK: constexpr):
    """ROWS rows of a multiple of 128 elements a CTA, through shared memory, whole or in pieces
    of CHUNK."""
    check_rows(("x", x), ("y", y))
    _softmax(staged_rows(x, ROWS, CHUNK), y)


@kernel(grid=lambda x, y, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def softmax_padded(x, y, ROWS: constexpr, WIDTH: constexpr):
    """Rows of any length, ROWS a CTA, from GMEM into registers WIDTH elements at a time, -inf past
    a row's end (whose exponential adds nothing)."""
    check_rows(("x", x), ("y", y))
    _softmax(padded_rows(x, ROWS, WIDTH, other=-np.inf), y)


def _softmax(rows, y) -> None:
    """Softmax of `rows` (asyncdsl.blocks.rows) into y: one pass over a single piece; else three
    sweeps, the running maximum and then the sum of exponentials kept elementwise in registers."""
    if rows.count == 1:
        v = rows.piece(0)
        shift = v.max(axis=1)[:, None] * LOG2E
        e = _exp(v, shift)
        ad.store(rows.window(y, 0), (e * (1.0 / e.sum(axis=1)[:, None])).astype(y.dtype))
        return
    acc = ad.registers(rows.shape, ad.float32)
    peak = accumulate(acc, -np.inf, rows.count, lambda c: ad.maximum(acc[...], rows.piece(c)))
    shift = peak.max(axis=1)[:, None] * LOG2E
    total = accumulate(acc, 0, rows.count, lambda c: acc[...] + _exp(rows.piece(c), shift))
    scale = 1.0 / total.sum(axis=1)[:, None]
    for c in rows.pieces():
        e = _exp(rows.piece(c), shift)
        ad.store(rows.window(y, c), (e * scale).astype(y.dtype))


def _exp(v, shift):
    """2^(v·log2 e - shift), the exponent rounded once (`fma`): one instruction an element where a
    multiply and a subtraction took two (the row kernels' largest share of instructions after
    the exponentials themselves)."""
    return ad.exp2(ad.fma(v, LOG2E, -shift), approx=True)


@kernel(grid=lambda x, y: (x.shape[0],), block=256)
def softmax_halves(x, y):
    """One row a CTA: warpgroup w holds elements [w·n/2, (w+1)·n/2) in registers; the two halves'
    maxima, then their sums of exponentials, meet in shared memory and both warpgroups combine
    them in the same order, so they scale by the same sum.  Each warpgroup copies its own half
    onto its own barrier, so neither waits for the other's bytes (as fast as one copy of the
    whole row, and no `when` around the copy; docs/hardware.md §19)."""
    check_rows(("x", x), ("y", y))
    half = x.shape[1] // 2
    row = ad.ds(ad.program_id(0), 1)
    buf = ad.smem((1, 2, 1, half), x.dtype)  # buf.at[0, w]: half w of the row
    maxima, sums = ad.smem((2, 1), ad.float32), ad.smem((2, 1), ad.float32)
    landed = ad.barrier(num=2)
    me = ad.warpgroup_idx()
    ad.async_copy(x.at[row, ad.ds(me * half, half)], buf.at[0, me], barrier=landed[me], oob="undefined")
    landed[me].wait()
    v = buf.at[0, me][...].astype(ad.float32)
    shift = across_warpgroups(maxima, me, v.max(axis=1), ad.maximum)[:, None] * LOG2E
    e = _exp(v, shift)
    total = across_warpgroups(sums, me, e.sum(axis=1), operator.add)[:, None]
    ad.store(y.at[row, ad.ds(me * half, half)], (e * (1.0 / total)).astype(y.dtype))


def reference(x: np.ndarray) -> np.ndarray:
    """Softmax in float64, rounded once to x's type."""
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


# Arguments `asyncdsl dump` traces each kernel with.
EXAMPLE_ARGS = {"softmax_rows": ((ArraySpec((64, 1024), ad.bfloat16),) * 2, config(1024)),
                "softmax_halves": ((ArraySpec((5, 8192), ad.bfloat16),) * 2, {}),
                # rows of 1000 elements: 16-byte vectors, but no multiple of 128
                "softmax_padded": ((ArraySpec((5, 1000), ad.bfloat16),) * 2, {"ROWS": 2, "WIDTH": 1024})}
