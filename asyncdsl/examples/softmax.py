"""Row softmax of a (M, N) bfloat16 matrix in one pass over HBM.

Each CTA (one warpgroup) takes ROWS rows: TMA brings them into shared memory in (ROWS, CHUNK)
pieces, and three sweeps over shared memory do the rest: the row maximum, the sum of
exponentials, and the normalised output, written back in place and stored by TMA.  Running
maxima and sums stay elementwise in registers (`asyncdsl.registers`) across the chunks, so each
row is reduced across lanes once per sweep, not once per chunk.  Exponentials use `ex2.approx`
(as Triton and torch do); everything else rounds as IEEE says (docs/register-tiles.md).

    python -m asyncdsl.examples.softmax     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad

LOG2E = 1.4426950408889634
MAX_CHUNK = 256  # a TMA box spans at most 256 elements per dim


def config(n: int) -> dict:
    """ROWS and CHUNK for rows of n elements: at most 64 KiB of rows in shared memory per CTA,
    so that several CTAs per SM overlap one another's loads, math and stores."""
    return {"ROWS": 4 if n <= 8192 else 2, "CHUNK": min(n, MAX_CHUNK)}


@ad.kernel(grid=lambda x, y, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def softmax(x, y, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    chunks = x.shape[1] // CHUNK
    row = ad.program_id(0) * ROWS
    rows = ad.smem((chunks, ROWS, CHUNK), x.dtype)
    landed = ad.barrier()
    for c in range(chunks):
        ad.async_copy(x.at[ad.ds(row, ROWS), ad.ds(c * CHUNK, CHUNK)], rows.at[c], barrier=landed, arrive=False)
    landed.arrive_expect_tx(ROWS * x.shape[1] * x.dtype.itemsize)
    landed.wait()

    acc = ad.registers((ROWS, CHUNK), ad.float32)
    acc[...] = ad.full((ROWS, CHUNK), -np.inf, ad.float32)
    for c in ad.range(chunks):
        acc[...] = ad.maximum(acc[...], rows.at[c][...].astype(ad.float32))
    shift = acc[...].max(axis=1)[:, None] * LOG2E
    acc[...] = ad.zeros((ROWS, CHUNK), ad.float32)
    for c in ad.range(chunks):
        acc[...] = acc[...] + ad.exp2(rows.at[c][...].astype(ad.float32) * LOG2E - shift, approx=True)
    scale = 1.0 / acc[...].sum(axis=1)[:, None]
    for c in ad.range(chunks):
        e = ad.exp2(rows.at[c][...].astype(ad.float32) * LOG2E - shift, approx=True)
        rows.at[c][...] = (e * scale).astype(y.dtype)

    ad.fence_async_smem()
    for c in range(chunks):
        ad.async_copy(rows.at[c], y.at[ad.ds(row, ROWS), ad.ds(c * CHUNK, CHUNK)])
    ad.await_async_copy(0)


def reference(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(ml_dtypes.bfloat16)


EXAMPLE_ARGS = {"softmax": ((ad.ArraySpec((64, 1024), ad.bfloat16),) * 2, config(1024))}
APPROXIMATE = True  # ex2.approx: the GPU and the interpreter agree within a bound, not bit for bit


def main(shape=(64, 1024)) -> int:
    from asyncdsl.runtime import has_gpu

    x = (np.random.default_rng(0).standard_normal(shape) * 3).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        y_d = to_device(y)
        softmax(to_device(x), y_d, **config(shape[1]))
        y, where = to_host(y_d), "GPU"
    else:
        softmax.interpret(x, y, **config(shape[1]))
        where = "interpreter"
    error = np.abs(y.astype(np.float64) - reference(x).astype(np.float64)).max()
    ok = bool(error <= 2 ** -8)  # within a bfloat16 ulp of 1
    print(f"softmax {shape} on the {where}: max error {error:.2e} {'ok' if ok else 'TOO LARGE'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
