"""Fused LayerNorm with weight and bias: y = (x - mean) / sqrt(var + eps) * w + b over each row,
bfloat16 in and out, the statistics in float32.

`layer_norm(x, w, b, y)` (below) picks the kernel and configuration for the rows' length, as
`examples/rms_norm.py` does.  In `layer_norm_rows` each CTA (one warpgroup) takes ROWS whole
rows, one contiguous run of the array brought in by a single bulk copy, and the weight and bias
by two more onto the same barrier.  Rows of up to WHOLE elements are read into registers once:
the mean, then the variance as the mean of the centred squares (two reductions over the values
already in registers; no E[x²] - E[x]², which cancels catastrophically when the mean is large
against the spread), and `(x - mean) · rstd · w + b` with the last multiply and add fused, one
rounding.  Longer rows are split into CHUNK-wide pieces by the copies' `TileTransform` and take
three sweeps over shared memory: sums, centred squares, results.  Rows of other lengths (as in
`examples/rms_norm.py`) go to `layer_norm_padded`, which reads rows, weight and bias from GMEM
into registers padded with zeros to whole 16-byte vectors a thread; the padding adds nothing to
the sum and is masked out of the centred squares.  The result goes from registers straight to y
(vector `st.global`).

    python -m asyncdsl.examples.layer_norm     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.examples.row_plans import padded_config, rows_config
from asyncdsl.examples.shapes import check_rows, check_shape, row_length

WHOLE = 8192  # rows up to this long are held in registers at once (64 floats a thread)
CHUNK = 4096  # longer rows sweep in pieces of this (or of a divisor of it)
PADDED_WHOLE = 7168  # padded rows whose window of whole vectors is at most this wide take one


def config(n: int, eps: float = 1e-5) -> dict | None:
    """`layer_norm_rows`' constexprs: 16 KiB of rows per CTA for rows of up to 4096 elements, one
    row a CTA held whole up to WHOLE, else one row in pieces.  Held whole, rows of 8192 and 6144
    ran 2.6 % and 3.8 % faster than in two pieces on the H200 (docs/notes/2026-12-04-row-plans.md)."""
    plan = rows_config(n, WHOLE, CHUNK, 8192)
    return None if plan is None else {"EPS": eps, **plan}


def choose(n: int, eps: float = 1e-5) -> tuple[ad.Kernel, dict]:
    """The kernel and constexprs for rows of n elements: whole rows or large pieces where the
    rows are a multiple of 128 elements, else the padded kernel in one window of whole 16-byte
    vectors a thread of up to PADDED_WHOLE elements (`examples/row_plans.py`; rows of 6000 and
    7000 elements ran at 1.13x and 2.27x Triton in one window of 6144 and 7168, at 1.04x and
    2.12x in windows of 4096, but rows of 8000 at 0.90x in one of 8192 against 1.00-1.02x in
    windows of 4096; docs/notes/2026-12-04-row-plans.md)."""
    constexprs = config(n, eps)
    if constexprs is not None:
        return layer_norm_rows, constexprs
    # Long rows one a CTA in pieces (two rows' sums, pieces and masks would take 212 registers).
    return layer_norm_padded, {"EPS": eps, **padded_config(n, PADDED_WHOLE, CHUNK)}


def layer_norm(x, w, b, y, eps: float = 1e-5, stream=None) -> None:
    """LayerNorm of x's rows with weight w and bias b into y, with the kernel for their length."""
    kernel, constexprs = choose(row_length("x", x), eps)
    kernel(x, w, b, y, **constexprs, stream=stream)


@ad.kernel(grid=lambda x, w, b, y, EPS, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def layer_norm_rows(x, w, b, y, EPS: ad.constexpr, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    check_rows(("x", x), ("y", y))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    check_shape("b", b, x.shape[1:], "one bias a column of x")
    n = x.shape[1]
    count = n // CHUNK
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)
    # Whole rows as they lie in the array, or (one row) split into pieces: buf.at[0, c] is piece c.
    pieces, vector_pieces = ((), ()) if count == 1 else (ad.TileTransform((1, CHUNK)),
                                                         ad.TileTransform((CHUNK,)))
    buf = ad.smem((ROWS, n) if count == 1 else (1, count, 1, CHUNK), x.dtype)
    weight, bias = ad.smem((count, CHUNK), w.dtype), ad.smem((count, CHUNK), b.dtype)
    landed = ad.barrier()
    ad.async_copy(x.at[rows, :], buf, barrier=landed, transforms=pieces, oob="undefined", arrive=False)
    for vector, staged in ((w, weight), (b, bias)):
        ad.async_copy(vector, staged if count > 1 else staged.at[0], barrier=landed, transforms=vector_pieces,
                      oob="undefined", arrive=False)
    landed.arrive_expect_tx(ROWS * n * x.dtype.itemsize + n * (w.dtype.itemsize + b.dtype.itemsize))
    landed.wait()

    row = buf if count == 1 else buf.at[0]
    _layer_norm(
        lambda c: (row[...] if count == 1 else row.at[c][...]).astype(ad.float32),
        lambda c: (weight.at[c][...].astype(ad.float32), bias.at[c][...].astype(ad.float32)),
        lambda c: y.at[rows, ad.ds(c * CHUNK, CHUNK)],
        n, count, (ROWS, CHUNK), EPS, y.dtype,
    )


@ad.kernel(grid=lambda x, w, b, y, EPS, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def layer_norm_padded(x, w, b, y, EPS: ad.constexpr, ROWS: ad.constexpr, WIDTH: ad.constexpr):
    """Rows of any length, ROWS a CTA, read with the weight and bias from GMEM straight into
    registers WIDTH elements at a time (whole vectors a thread), the elements past a row's end read as
    zeros and never written; rows longer than WIDTH take three sweeps over GMEM (the later ones
    mostly from L2)."""
    check_rows(("x", x), ("y", y))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    check_shape("b", b, x.shape[1:], "one bias a column of x")
    n = x.shape[1]
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)

    def vectors(c):
        window = ad.ds(c * WIDTH, WIDTH)
        return ad.load(w.at[window]).astype(ad.float32), ad.load(b.at[window]).astype(ad.float32)

    _layer_norm(
        lambda c: ad.load(x.at[rows, ad.ds(c * WIDTH, WIDTH)]).astype(ad.float32),
        vectors,
        lambda c: y.at[rows, ad.ds(c * WIDTH, WIDTH)],
        n, ad.cdiv(n, WIDTH), (ROWS, WIDTH), EPS, y.dtype,
    )


def _layer_norm(piece, vectors, target, n: int, count: int, shape: tuple[int, int], eps: float,
                dtype) -> None:
    """LayerNorm of rows held as `count` pieces of `shape`: piece(c) the rows' piece c in float32
    registers (zeros past the row's end), vectors(c) the weight's and bias's piece c (float32
    rows, broadcast over the rows), target(c) where piece c's result goes.  One piece is read
    once; more are read three times, the sums and then the centred squares staying elementwise in
    registers in between, so the rows are reduced across lanes once per statistic.  n is the
    rows' length, which padded pieces may exceed: their centred squares are masked out.  The
    mean and the variance divide by n (one IEEE rounding a row, so a constant row's mean is
    exact and its output is the bias bit for bit)."""
    width = shape[1]

    def centred(v, c, mean):
        d = v - mean
        if count * width == n:
            return d
        return ad.where(ad.iota(shape, ad.int32, dim=1) + c * width < n, d, 0.0)

    if count == 1:
        v = piece(0)
        mean = (v.sum(axis=1) / n)[:, None]
        d = centred(v, 0, mean)
        rstd = ad.rsqrt((d * d).sum(axis=1) / n + eps)[:, None]
        w, b = vectors(0)
        ad.store(target(0), ad.fma(d * rstd, w[None, :], b[None, :]).astype(dtype))
        return
    acc = ad.registers(shape, ad.float32)
    acc[...] = ad.zeros(shape, ad.float32)
    for c in ad.range(count):
        acc[...] = acc[...] + piece(c)
    mean = (acc[...].sum(axis=1) / n)[:, None]
    acc[...] = ad.zeros(shape, ad.float32)
    for c in ad.range(count):
        d = centred(piece(c), c, mean)
        acc[...] = ad.fma(d, d, acc[...])
    rstd = ad.rsqrt(acc[...].sum(axis=1) / n + eps)[:, None]
    for c in ad.range(count):
        w, b = vectors(c)
        ad.store(target(c), ad.fma((piece(c) - mean) * rstd, w[None, :], b[None, :]).astype(dtype))


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    wide = x.astype(np.float64)
    d = wide - wide.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
    return (d * rstd * w.astype(np.float64) + b.astype(np.float64)).astype(ml_dtypes.bfloat16)


def _specs(rows: int, n: int) -> tuple:
    matrix, vector = ad.ArraySpec((rows, n), ad.bfloat16), ad.ArraySpec((n,), ad.bfloat16)
    return matrix, vector, vector, matrix


EXAMPLE_ARGS = {
    "layer_norm_rows": (_specs(64, 1024), config(1024)),
    "layer_norm_padded": (_specs(9, 1000), choose(1000)[1]),  # 16-byte vectors, but no multiple of 128
}
APPROXIMATE = True  # rsqrt.approx: within a bound of the interpreter, not bit for bit


def main(shape=(64, 1024)) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    # Rows whose mean is large against their spread, which the centred variance takes in its stride.
    x = (rng.standard_normal(shape) + 8).astype(ml_dtypes.bfloat16)
    w = (1 + rng.standard_normal(shape[1]) * 0.1).astype(ml_dtypes.bfloat16)
    b = (rng.standard_normal(shape[1]) * 0.1).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    eps = 1e-5
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        y_d = to_device(y)
        layer_norm(*(to_device(a) for a in (x, w, b)), y_d, eps)
        y, where = to_host(y_d), "GPU"
    else:
        kernel, constexprs = choose(shape[1], eps)
        kernel.interpret(x, w, b, y, **constexprs)
        where = "interpreter"
    expected = reference(x, w, b, eps).astype(np.float64)
    error = np.abs(y.astype(np.float64) - expected).max()
    ok = bool(error <= 2 ** -6 * np.abs(expected).max())  # within a bfloat16 ulp of the largest output
    print(f"layer_norm {shape} on the {where}: max error {error:.2e} {'ok' if ok else 'TOO LARGE'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
