"""Fused RMSNorm with a weight: y = x / sqrt(mean(x², axis=1) + eps) * w, bfloat16 in and out.

`rms_norm(x, w, y)` (below) picks the kernel and configuration for the rows' length.  In
`rms_norm_rows` each CTA (one warpgroup) takes ROWS whole rows: one contiguous run of the array,
brought in by a single bulk copy (`oob="undefined"`: no tensor map), and the weight by another.
Rows of up to WHOLE elements are read into registers once: the sum of squares (float32,
reduced across lanes once), the scale, the weight and the rounding all happen there, and the
weight's tile is broadcast over the rows with no data movement (infer-layouts gives it the rows'
layout without the row axis).  Longer rows are split into pieces of up to CHUNK elements by
the copies' `TileTransform` and take two sweeps over shared memory.  The result goes from
registers straight to y (vector `st.global`), as in `examples/softmax.py`.  Rows of other
lengths (not a multiple of 128 elements, which the register layouts need, or long rows that
only small pieces divide) go to `rms_norm_padded`, which reads rows and weight from GMEM into
registers padded with zeros to whole 16-byte vectors a thread (`examples/row_plans.py`).

    python -m asyncdsl.examples.rms_norm     # on the GPU if there is one, else interpreted
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


def config(n: int, eps: float = 1e-6) -> dict | None:
    """`rms_norm_rows`' constexprs: 16 KiB of rows per CTA for rows of up to 4096 elements, one
    row a CTA held whole up to WHOLE, else one row in pieces.  Held whole (80 registers a thread
    against 38), rows of 8192 ran 0.5-0.7 % faster than in two pieces on the H200, both timings,
    two repeats (docs/notes/2026-12-04-row-plans.md)."""
    plan = rows_config(n, WHOLE, CHUNK, 8192)
    return None if plan is None else {"EPS": eps, **plan}


def choose(n: int, eps: float = 1e-6) -> tuple[ad.Kernel, dict]:
    """The kernel and constexprs for rows of n elements: whole rows or large pieces where the
    rows are a multiple of 128 elements, else the padded kernel in one window of whole 16-byte
    vectors a thread of up to WHOLE elements (`examples/row_plans.py`; rows of 6000, 7000 and
    8000 elements ran at 1.05x, 1.69x and 0.99x Triton in one window of 6144, 7168 and 8192, at
    1.00x, 1.57x and 0.91x in windows of 4096; docs/notes/2026-12-04-row-plans.md)."""
    constexprs = config(n, eps)
    if constexprs is not None:
        return rms_norm_rows, constexprs
    return rms_norm_padded, {"EPS": eps, **padded_config(n, WHOLE, CHUNK)}


def rms_norm(x, w, y, eps: float = 1e-6, stream=None) -> None:
    """RMSNorm of x's rows with weight w into y, with the kernel and configuration for their length."""
    kernel, constexprs = choose(row_length("x", x), eps)
    kernel(x, w, y, **constexprs, stream=stream)


@ad.kernel(grid=lambda x, w, y, EPS, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def rms_norm_rows(x, w, y, EPS: ad.constexpr, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    check_rows(("x", x), ("y", y))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    n = x.shape[1]
    count = n // CHUNK
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)
    # Whole rows as they lie in the array, or (one row) split into pieces: buf.at[0, c] is piece c.
    pieces, weight_pieces = ((), ()) if count == 1 else (ad.TileTransform((1, CHUNK)),
                                                         ad.TileTransform((CHUNK,)))
    buf = ad.smem((ROWS, n) if count == 1 else (1, count, 1, CHUNK), x.dtype)
    weight = ad.smem((count, CHUNK), w.dtype)
    landed = ad.barrier()
    ad.async_copy(x.at[rows, :], buf, barrier=landed, transforms=pieces, oob="undefined", arrive=False)
    ad.async_copy(w, weight if count > 1 else weight.at[0], barrier=landed, transforms=weight_pieces,
                  oob="undefined", arrive=False)
    landed.arrive_expect_tx(ROWS * n * x.dtype.itemsize + n * w.dtype.itemsize)
    landed.wait()

    row = buf if count == 1 else buf.at[0]
    _rms_norm(
        lambda c: (row[...] if count == 1 else row.at[c][...]).astype(ad.float32),
        lambda c: weight.at[c][...].astype(ad.float32),
        lambda c: y.at[rows, ad.ds(c * CHUNK, CHUNK)],
        n, count, (ROWS, CHUNK), EPS, y.dtype,
    )


@ad.kernel(grid=lambda x, w, y, EPS, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def rms_norm_padded(x, w, y, EPS: ad.constexpr, ROWS: ad.constexpr, WIDTH: ad.constexpr):
    """Rows of any length, ROWS a CTA, read with the weight from GMEM straight into registers
    WIDTH elements at a time (whole vectors a thread), the elements past a row's end read as zeros
    (which add nothing to the sum of squares) and never written; rows longer than WIDTH take two
    sweeps over GMEM (the second mostly from L2)."""
    check_rows(("x", x), ("y", y))
    check_shape("w", w, x.shape[1:], "one weight a column of x")
    n = x.shape[1]
    count = ad.cdiv(n, WIDTH)
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)

    _rms_norm(
        lambda c: ad.load(x.at[rows, ad.ds(c * WIDTH, WIDTH)]).astype(ad.float32),
        lambda c: ad.load(w.at[ad.ds(c * WIDTH, WIDTH)]).astype(ad.float32),
        lambda c: y.at[rows, ad.ds(c * WIDTH, WIDTH)],
        x.shape[1], count, (ROWS, WIDTH), EPS, y.dtype,
    )


def _rms_norm(piece, weight, target, n: int, count: int, shape: tuple[int, int], eps: float, dtype) -> None:
    """RMSNorm of rows held as `count` pieces of `shape`: piece(c) the rows' piece c in float32
    registers, weight(c) the weight's piece c (a float32 row, broadcast over the rows), target(c)
    where piece c's result goes.  One piece is read once; more are read twice, the sum of squares
    staying elementwise in registers in between, so the rows are reduced across lanes once.  n is
    the rows' length (the mean's divisor), which padded pieces may exceed."""
    if count == 1:
        v = piece(0)
        scale = ad.rsqrt((v * v).sum(axis=1) * (1.0 / n) + eps)[:, None]
    else:
        squares = ad.registers(shape, ad.float32)
        squares[...] = ad.zeros(shape, ad.float32)
        for c in ad.range(count):
            v = piece(c)
            squares[...] = ad.fma(v, v, squares[...])
        scale = ad.rsqrt(squares[...].sum(axis=1) * (1.0 / n) + eps)[:, None]
    for c in ad.range(count) if count > 1 else (0,):
        scaled = (v if count == 1 else piece(c)) * scale * weight(c)[None, :]
        ad.store(target(c), scaled.astype(dtype))


def reference(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    wide = x.astype(np.float64)
    scale = 1.0 / np.sqrt((wide * wide).mean(axis=1, keepdims=True) + eps)
    return (wide * scale * w.astype(np.float64)).astype(ml_dtypes.bfloat16)


EXAMPLE_ARGS = {
    "rms_norm_rows": (
        (ad.ArraySpec((64, 1024), ad.bfloat16), ad.ArraySpec((1024,), ad.bfloat16),
         ad.ArraySpec((64, 1024), ad.bfloat16)),
        config(1024),
    ),
    "rms_norm_padded": (  # rows of 1000 elements: 16-byte vectors, but no multiple of 128
        (ad.ArraySpec((9, 1000), ad.bfloat16), ad.ArraySpec((1000,), ad.bfloat16),
         ad.ArraySpec((9, 1000), ad.bfloat16)),
        choose(1000)[1],
    ),
}
APPROXIMATE = True  # rsqrt.approx: within a bound of the interpreter, not bit for bit


def main(shape=(64, 1024)) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    w = (1 + rng.standard_normal(shape[1]) * 0.1).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    eps = 1e-6
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        y_d = to_device(y)
        rms_norm(to_device(x), to_device(w), y_d, eps)
        y, where = to_host(y_d), "GPU"
    else:
        kernel, constexprs = choose(shape[1], eps)
        kernel.interpret(x, w, y, **constexprs)
        where = "interpreter"
    expected = reference(x, w, eps).astype(np.float64)
    error = np.abs(y.astype(np.float64) - expected) / np.maximum(np.abs(expected), 1e-3)
    ok = bool(error.max() <= 2 ** -7)  # a bfloat16 ulp, relative
    print(f"rms_norm {shape} on the {where}: max relative error {error.max():.2e} "
          f"{'ok' if ok else 'TOO LARGE'} ({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
