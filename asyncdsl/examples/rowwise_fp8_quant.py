"""Row-wise FP8 quantisation: per row, scale = max|x| / 448, q = x / scale as float8_e4m3fn
(saturating), for FP8 training and inference.  Outputs q (M, N) and the scales (M,) in float32.

One warpgroup per ROWS rows: TMA brings them into shared memory; one sweep takes the running
absolute maximum elementwise in registers (reduced across lanes once), a second multiplies by
448 / max and converts (`cvt.rn.satfinite.e4m3x2`) into a float8 buffer that TMA stores.
An all-zero row gets scale 0 and zeros (no division by zero).

    python -m asyncdsl.examples.rowwise_fp8_quant     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad

E4M3_MAX = 448.0
MAX_CHUNK = 256


def config(n: int) -> dict:
    # 4 rows: the TMA store of their float32 scales is the 16 bytes a box needs at least.
    return {"ROWS": 4, "CHUNK": min(n, MAX_CHUNK)}


@ad.kernel(grid=lambda x, q, scales, ROWS, CHUNK: (ad.cdiv(x.shape[0], ROWS),))
def rowwise_fp8_quant(x, q, scales, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    chunks = x.shape[1] // CHUNK
    row = ad.program_id(0) * ROWS
    rows = ad.smem((chunks, ROWS, CHUNK), x.dtype)
    quantised = ad.smem((chunks, ROWS, CHUNK), q.dtype)
    row_scales = ad.smem((ROWS,), scales.dtype)
    landed = ad.barrier()
    for c in range(chunks):
        ad.async_copy(x.at[ad.ds(row, ROWS), ad.ds(c * CHUNK, CHUNK)], rows.at[c], barrier=landed, arrive=False)
    landed.arrive_expect_tx(ROWS * x.shape[1] * x.dtype.itemsize)
    landed.wait()

    peak = ad.registers((ROWS, CHUNK), ad.float32)
    peak[...] = ad.zeros((ROWS, CHUNK), ad.float32)
    for c in ad.range(chunks):
        peak[...] = ad.maximum(peak[...], abs(rows.at[c][...].astype(ad.float32)))
    amax = peak[...].max(axis=1)
    row_scales[...] = amax * (1.0 / E4M3_MAX)
    factor = ad.where(amax > 0.0, E4M3_MAX / amax, 0.0)[:, None]
    for c in ad.range(chunks):
        quantised.at[c][...] = (rows.at[c][...].astype(ad.float32) * factor).astype(q.dtype)

    ad.fence_async_smem()
    for c in range(chunks):
        ad.async_copy(quantised.at[c], q.at[ad.ds(row, ROWS), ad.ds(c * CHUNK, CHUNK)])
    ad.async_copy(row_scales, scales.at[ad.ds(row, ROWS)])
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
