"""Row-wise FP8 quantisation: per row, scale = max|x| / 448, q = x / scale as float8_e4m3fn
(saturating), for FP8 training and inference.  Outputs q (M, N) and the scales (M,) in float32.

Each CTA (one warpgroup) takes ROWS whole rows, moved in by one bulk copy (one contiguous run of
the array; `oob="undefined"`: no tensor map) and out as float8 by another.  Rows of up to CHUNK
elements are read into registers once: the absolute maximum (reduced across lanes once), the
factor 448 / max and the conversion (`cvt.rn.satfinite.e4m3x2`) all happen there.  Longer rows
are split into CHUNK-wide pieces by the copies' `TileTransform` and take two sweeps.  The scales
are written by the threads (`asyncdsl.store` to a GMEM window): a few bytes per CTA, less than a
bulk copy moves.  An all-zero row gets scale 0 and zeros (no division by zero).

    python -m asyncdsl.examples.rowwise_fp8_quant     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import math
import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad

E4M3_MAX = 448.0
CHUNK = 4096  # elements of a row one pass holds in registers


def config(n: int) -> dict:
    # 16 KiB of rows per CTA when they fit in registers at once, else one row in pieces.
    return {"ROWS": max(1, 8192 // n) if n <= CHUNK else 1, "CHUNK": n if n <= CHUNK else math.gcd(n, CHUNK)}


@ad.kernel(grid=lambda x, q, scales, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def rowwise_fp8_quant(x, q, scales, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    n = x.shape[1]
    count = n // CHUNK
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)
    # Whole rows as they lie in the arrays, or (one row) split into pieces: .at[0, c] is piece c.
    pieces = () if count == 1 else ad.TileTransform((1, CHUNK))
    shape = (ROWS, n) if count == 1 else (1, count, 1, CHUNK)
    buf, quantised = ad.smem(shape, x.dtype), ad.smem(shape, q.dtype)
    landed = ad.barrier()
    ad.async_copy(x.at[rows, :], buf, barrier=landed, transforms=pieces, oob="undefined")
    landed.wait()

    if count == 1:
        v = buf[...].astype(ad.float32)
        amax = abs(v).max(axis=1)
        factor = ad.where(amax > 0.0, E4M3_MAX / amax, 0.0)[:, None]
        quantised[...] = (v * factor).astype(q.dtype)
    else:
        row, out = buf.at[0], quantised.at[0]
        peak = ad.registers((1, CHUNK), ad.float32)
        peak[...] = ad.zeros((1, CHUNK), ad.float32)
        for c in ad.range(count):
            peak[...] = ad.maximum(peak[...], abs(row.at[c][...].astype(ad.float32)))
        amax = peak[...].max(axis=1)
        factor = ad.where(amax > 0.0, E4M3_MAX / amax, 0.0)[:, None]
        for c in ad.range(count):
            out.at[c][...] = (row.at[c][...].astype(ad.float32) * factor).astype(q.dtype)

    ad.fence_async_smem()
    ad.async_copy(quantised, q.at[rows, :], transforms=pieces, oob="undefined")
    ad.store(scales.at[rows], amax * (1.0 / E4M3_MAX))
    ad.await_async_copy(0)


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    wide = x.astype(np.float32)
    amax = np.abs(wide).max(axis=1)
    factor = np.where(amax > 0, np.float32(E4M3_MAX) / np.maximum(amax, np.float32(1e-30)), 0).astype(np.float32)
    scaled = np.clip(wide * factor[:, None], -E4M3_MAX, E4M3_MAX)
    return scaled.astype(ml_dtypes.float8_e4m3fn), (amax * np.float32(1 / E4M3_MAX)).astype(np.float32)


EXAMPLE_ARGS = {
    "rowwise_fp8_quant": (
        (ad.ArraySpec((64, 1024), ad.bfloat16), ad.ArraySpec((64, 1024), ad.float8_e4m3fn), ad.ArraySpec((64,), ad.float32)),
        config(1024),
    ),
}


def main(shape=(64, 1024)) -> int:
    from asyncdsl.runtime import has_gpu

    x = (np.random.default_rng(0).standard_normal(shape) * 10).astype(ml_dtypes.bfloat16)
    x[3] = 0  # an all-zero row
    q = np.zeros(shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(shape[0], np.nan, np.float32)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        q_d, s_d = to_device(q), to_device(scales)
        rowwise_fp8_quant(to_device(x), q_d, s_d, **config(shape[1]))
        q, scales, where = to_host(q_d), to_host(s_d), "GPU"
    else:
        rowwise_fp8_quant.interpret(x, q, scales, **config(shape[1]))
        where = "interpreter"
    expected_q, expected_scales = reference(x)
    ok = q.view(np.uint8).tobytes() == expected_q.view(np.uint8).tobytes() and np.array_equal(scales, expected_scales)
    print(f"rowwise_fp8_quant {shape} on the {where}: {'bit-exact' if ok else 'MISMATCH'} against numpy "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
