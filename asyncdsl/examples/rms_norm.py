"""Fused RMSNorm with a weight: y = x / sqrt(mean(x², axis=1) + eps) * w, bfloat16 in and out.

One warpgroup per ROWS rows: TMA brings the rows and the weight into shared memory in CHUNK-wide
pieces; one sweep sums squares elementwise in float32 registers (reduced across lanes once), a
second scales, weights and rounds each piece back in place for the TMA store.  The weight piece
is broadcast over the rows with no data movement: its layout is the rows' layout without the row
axis (infer-layouts derives it).

    python -m asyncdsl.examples.rms_norm     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad

MAX_CHUNK = 256  # a TMA box spans at most 256 elements per dim


def config(n: int, eps: float = 1e-6) -> dict:
    # At most 32 KiB of rows in shared memory per CTA (plus the weight): several CTAs per SM.
    return {"EPS": eps, "ROWS": 4 if n <= 4096 else 2, "CHUNK": min(n, MAX_CHUNK)}


@ad.kernel(grid=lambda x, w, y, EPS, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def rms_norm(x, w, y, EPS: ad.constexpr, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    n = x.shape[1]
    chunks = n // CHUNK
    row = ad.program_id(0) * ROWS
    rows = ad.smem((chunks, ROWS, CHUNK), x.dtype)
    weight = ad.smem((chunks, CHUNK), w.dtype)
    landed = ad.barrier()
    for c in range(chunks):
        ad.async_copy(x.at[ad.ds(row, ROWS), ad.ds(c * CHUNK, CHUNK)], rows.at[c], barrier=landed, arrive=False)
        ad.async_copy(w.at[ad.ds(c * CHUNK, CHUNK)], weight.at[c], barrier=landed, arrive=False)
    landed.arrive_expect_tx(ROWS * n * x.dtype.itemsize + n * w.dtype.itemsize)
    landed.wait()

    squares = ad.registers((ROWS, CHUNK), ad.float32)
    squares[...] = ad.zeros((ROWS, CHUNK), ad.float32)
    for c in ad.range(chunks):
        v = rows.at[c][...].astype(ad.float32)
        squares[...] = ad.fma(v, v, squares[...])
    scale = ad.rsqrt(squares[...].sum(axis=1) * (1.0 / n) + EPS)[:, None]
    for c in ad.range(chunks):
        v = rows.at[c][...].astype(ad.float32) * scale
        rows.at[c][...] = (v * weight.at[c][...].astype(ad.float32)[None, :]).astype(y.dtype)

    ad.fence_async_smem()
    for c in range(chunks):
        ad.async_copy(rows.at[c], y.at[ad.ds(row, ROWS), ad.ds(c * CHUNK, CHUNK)])
    ad.await_async_copy(0)


def reference(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    wide = x.astype(np.float64)
    scale = 1.0 / np.sqrt((wide * wide).mean(axis=1, keepdims=True) + eps)
    return (wide * scale * w.astype(np.float64)).astype(ml_dtypes.bfloat16)


EXAMPLE_ARGS = {
    "rms_norm": (
        (ad.ArraySpec((64, 1024), ad.bfloat16), ad.ArraySpec((1024,), ad.bfloat16), ad.ArraySpec((64, 1024), ad.bfloat16)),
        config(1024),
    ),
}
APPROXIMATE = True  # rsqrt.approx: within a bound of the interpreter, not bit for bit


def main(shape=(64, 1024)) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    w = (1 + rng.standard_normal(shape[1]) * 0.1).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    settings = config(shape[1])
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        y_d = to_device(y)
        rms_norm(to_device(x), to_device(w), y_d, **settings)
        y, where = to_host(y_d), "GPU"
    else:
        rms_norm.interpret(x, w, y, **settings)
        where = "interpreter"
    expected = reference(x, w, settings["EPS"]).astype(np.float64)
    error = np.abs(y.astype(np.float64) - expected) / np.maximum(np.abs(expected), 1e-3)
    ok = bool(error.max() <= 2 ** -7)  # a bfloat16 ulp, relative
    print(f"rms_norm {shape} on the {where}: max relative error {error.max():.2e} {'ok' if ok else 'TOO LARGE'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
