"""Row softmax of a (M, N) bfloat16 matrix in one pass over HBM.

`softmax(x, y)` (below) picks the kernel and configuration for the rows' length.  In `softmax_rows`
each CTA (one warpgroup) takes ROWS whole rows: they are one contiguous run of the array, so a
single bulk copy (`oob="undefined"`: no tensor map, no 256-element box limit) brings them into
shared memory.  Rows of up to CHUNK elements are read into registers once (64 floats per thread
for an 8192-wide row): maximum, exponentials, sum and scaling all happen there.  Longer rows are
split into CHUNK-wide pieces by the copy's `TileTransform((1, CHUNK))` (the same bytes, viewed as
pieces) and take three sweeps over shared memory: the running maximum and the sum of
exponentials stay elementwise in registers (`asyncdsl.registers`), so each row is reduced across
lanes once per sweep.  Rows of 4097-8192 elements (a multiple of 2048, so that each half is
whole 16-byte vectors a thread) go to `softmax_halves`: one row a CTA of two warpgroups, each
holding half the row in registers, their maxima and sums meeting in shared memory (the row's
reduction spread over twice the threads: 1.003× Triton at 4096×8192 against 0.978× for one
warpgroup a row, same run).  Rows of other lengths (not a multiple of 128 elements, which the
register layouts need; a multiple whose tile would move elements alone, such as 640 or 1152; or
long rows that only small pieces divide) go to `softmax_padded`, which reads them from GMEM into
registers padded with -inf to whole 16-byte vectors a thread (`examples/row_plans.py`).  The
result goes from registers straight to y (vector `st.global`): nothing is written back to shared
memory and nothing waits for a TMA store before the CTA leaves (up to 2 % faster on the H200,
docs/notes/2026-12-03-row-kernels.md).  Exponentials use `ex2.approx` (as Triton and torch do);
everything else rounds as IEEE says (docs/register-tiles.md).

    python -m asyncdsl.examples.softmax     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.examples.row_plans import padded_config, rows_config, widest_vector
from asyncdsl.examples.shapes import check_rows, row_length

LOG2E = 1.4426950408889634
CHUNK = 8192  # elements of a row one pass holds in registers: 64 floats per thread
HALVES_FROM = 4096  # longer rows of up to CHUNK elements go to `softmax_halves`


def config(n: int) -> dict | None:
    """ROWS and CHUNK for rows of n elements: 4 KiB of rows per CTA, or one row when it is
    longer (small CTAs, many to an SM, overlap one another's copies and math: 1-5 % faster on the
    H200 than 16 KiB, docs/notes/2026-12-03-row-kernels.md), held in registers at once when it fits, else in
    pieces that divide it."""
    return rows_config(n, CHUNK, CHUNK, 2048)


def choose(n: int) -> tuple[ad.Kernel, dict]:
    """The kernel and constexprs for rows of n elements."""
    # Halves of whole 16-byte vectors a thread: rows of 5120 and 7168 ran at 1.12x and 1.02x
    # Triton in halves of 2560 and 3584 (partial vectors), at 1.25x and 1.04x one warpgroup a row.
    if HALVES_FROM < n <= CHUNK and n % 2048 == 0:
        return softmax_halves, {}
    # Whole rows, or large pieces, unless the rows' tile would move elements alone: rows of 640,
    # 1152, 2176 and 4224 ran at 1.99x, 1.45x, 1.31x and 1.41x Triton so, at 2.10x, 1.48x, 1.32x
    # and 1.42x in padded windows of whole vectors (docs/notes/2026-12-04-row-plans.md).
    constexprs = config(n)
    if constexprs is not None and (n > CHUNK or widest_vector(constexprs["ROWS"], n) > 1):
        return softmax_rows, constexprs
    # Other rows in one window of whole vectors a thread (rows of 6000 and 8000 elements ran at
    # 1.14x and 1.02x Triton in windows of 6144 and 8192, at 1.01x and 0.91x in windows of 6016 and
    # 8064, an element a thread at a time), or longer ones sweeping in pieces half as wide: the
    # running maximum or sum and a piece are both in registers (141 registers a thread at CHUNK,
    # 78 at half).
    return softmax_padded, padded_config(n, CHUNK, CHUNK // 2, elements=2048)


def softmax(x, y, stream=None) -> None:
    """Softmax of x's rows into y, with the kernel and configuration for their length."""
    kernel, constexprs = choose(row_length("x", x))
    kernel(x, y, **constexprs, stream=stream)


@ad.kernel(grid=lambda x, y, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def softmax_rows(x, y, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    check_rows(("x", x), ("y", y))
    n = x.shape[1]
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)
    # Whole rows as they lie in the array, or (one row) split into pieces: buf.at[0, c] is piece c.
    pieces = () if n == CHUNK else ad.TileTransform((1, CHUNK))
    buf = ad.smem((ROWS, n) if n == CHUNK else (1, n // CHUNK, 1, CHUNK), x.dtype)
    landed = ad.barrier()
    ad.async_copy(x.at[rows, :], buf, barrier=landed, transforms=pieces, oob="undefined")
    landed.wait()
    if n == CHUNK:
        _softmax(lambda c: buf[...].astype(ad.float32), lambda c: y.at[rows, :], 1, (ROWS, n), y.dtype)
    else:
        row = buf.at[0]
        _softmax(lambda c: row.at[c][...].astype(ad.float32), lambda c: y.at[rows, ad.ds(c * CHUNK, CHUNK)],
                 n // CHUNK, (1, CHUNK), y.dtype)


def _softmax(piece, target, count: int, shape: tuple[int, int], dtype) -> None:
    """Softmax of rows held as `count` pieces of `shape`: `piece(c)` reads piece c as float32,
    `target(c)` is where its result goes (rows past the array's end are never written).  One pass
    over a single piece; else three sweeps, the running maximum and the sum of exponentials kept
    elementwise in registers, so that each row is reduced across lanes once per sweep."""
    if count == 1:
        v = piece(0)
        shift = v.max(axis=1)[:, None] * LOG2E
        e = _exp(v, shift)
        ad.store(target(0), (e * (1.0 / e.sum(axis=1)[:, None])).astype(dtype))
        return
    acc = ad.registers(shape, ad.float32)
    acc[...] = ad.full(shape, -np.inf, ad.float32)
    for c in ad.range(count):
        acc[...] = ad.maximum(acc[...], piece(c))
    shift = acc[...].max(axis=1)[:, None] * LOG2E
    acc[...] = ad.zeros(shape, ad.float32)
    for c in ad.range(count):
        acc[...] = acc[...] + _exp(piece(c), shift)
    scale = 1.0 / acc[...].sum(axis=1)[:, None]
    for c in ad.range(count):
        e = _exp(piece(c), shift)
        ad.store(target(c), (e * scale).astype(dtype))


def _exp(v, shift):
    """2^(v·log2 e - shift), the exponent rounded once (`fma`): one instruction an element where a
    multiply and a subtraction took two (the row kernels' largest share of instructions after
    the exponentials themselves)."""
    return ad.exp2(ad.fma(v, LOG2E, -shift), approx=True)


@ad.kernel(grid=lambda x, y: (x.shape[0],), block=256)
def softmax_halves(x, y):
    """One row a CTA: warpgroup w holds elements [w·n/2, (w+1)·n/2) in registers; each puts its
    half's maximum, then its sum of exponentials, in shared memory, and both combine the two in
    the same order, so they scale by the same sum.  Each warpgroup copies its own half onto its
    own barrier, so neither waits for the other's bytes (1.002-1.023x Triton at 4096x8192 against
    1.001-1.019x for one copy of the whole row, five paired runs: level within the spread, and
    no `when` around the copy; docs/notes/2026-12-03-row-kernels.md)."""
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
    maxima.at[me][...] = v.max(axis=1)
    ad.cta_barrier()
    shift = ad.maximum(maxima.at[0][...], maxima.at[1][...])[:, None] * LOG2E
    e = _exp(v, shift)
    sums.at[me][...] = e.sum(axis=1)
    ad.cta_barrier()
    total = (sums.at[0][...] + sums.at[1][...])[:, None]
    ad.store(y.at[row, ad.ds(me * half, half)], (e * (1.0 / total)).astype(y.dtype))


@ad.kernel(grid=lambda x, y, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def softmax_padded(x, y, ROWS: ad.constexpr, WIDTH: ad.constexpr):
    """Rows of any length, ROWS a CTA, read from GMEM straight into registers WIDTH elements at a
    time (whole vectors a thread), the elements past a row's end read as -inf (whose exponential adds
    nothing) and never written; rows longer than WIDTH take three sweeps over GMEM (the second
    and third mostly from L2)."""
    check_rows(("x", x), ("y", y))
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)

    def piece(c):
        return ad.load(x.at[rows, ad.ds(c * WIDTH, WIDTH)], other=-np.inf).astype(ad.float32)

    _softmax(piece, lambda c: y.at[rows, ad.ds(c * WIDTH, WIDTH)], ad.cdiv(x.shape[1], WIDTH), (ROWS, WIDTH),
             y.dtype)


def reference(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(ml_dtypes.bfloat16)


EXAMPLE_ARGS = {"softmax_rows": ((ad.ArraySpec((64, 1024), ad.bfloat16),) * 2, config(1024)),
                "softmax_halves": ((ad.ArraySpec((5, 8192), ad.bfloat16),) * 2, {}),
                # rows of 1000 elements: 16-byte vectors, but no multiple of 128
                "softmax_padded": ((ad.ArraySpec((5, 1000), ad.bfloat16),) * 2, {"ROWS": 2, "WIDTH": 1024})}
APPROXIMATE = True  # ex2.approx: the GPU and the interpreter agree within a bound, not bit for bit


def main(shape=(64, 1024)) -> int:
    from asyncdsl.runtime import has_gpu

    x = (np.random.default_rng(0).standard_normal(shape) * 3).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        y_d = to_device(y)
        softmax(to_device(x), y_d)
        y, where = to_host(y_d), "GPU"
    else:
        kernel, constexprs = choose(shape[1])
        kernel.interpret(x, y, **constexprs)
        where = "interpreter"
    error = np.abs(y.astype(np.float64) - reference(x).astype(np.float64)).max()
    ok = bool(error <= 2 ** -8)  # within a bfloat16 ulp of 1
    print(f"softmax {shape} on the {where}: max error {error:.2e} {'ok' if ok else 'TOO LARGE'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
