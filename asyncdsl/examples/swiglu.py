"""SwiGLU's gate: y = silu(a) * b = a * sigmoid(a) * b, bfloat16, elementwise over large tensors.

Each CTA (one warpgroup) takes a CHUNK-wide piece of ROWS rows of `a` and `b`.  A piece of one
row is one contiguous run of its array, so one bulk copy per input (`oob="undefined"`: no tensor
map, no 256-element box limit) brings it in and one takes the result out.  The math runs in
float32 registers (silu(a) = a / (1 + 2^(-a·log2 e)): one `ex2.approx` and one IEEE division per
element), rounded to bfloat16 into the `a` buffer.  The sigmoid as 1/2 + tanh(a/2)/2 (one
`tanh.approx` and an fma) measured 0.3-1 % faster on the H200 but is refused: for negative a,
1 + tanh(a/2) cancels to within `tanh.approx`'s absolute error (7e-6), so the small sigmoid of
a < -8 came out wrong by several bfloat16 ulps (the GPU-vs-interpreter example test caught it).

    python -m asyncdsl.examples.swiglu     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import math
import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad

LOG2E = 1.4426950408889634
CHUNK = 4096  # elements per CTA: 32 of each input per thread, 16 KiB of shared memory


def config(n: int) -> dict:
    """One row per CTA, in pieces of at most CHUNK elements that divide the row (a piece never
    runs into the next row, where it would stop being one run of the window)."""
    return {"ROWS": 1, "CHUNK": n if n <= CHUNK else math.gcd(n, CHUNK)}


@ad.kernel(grid=lambda a, b, y, ROWS, CHUNK: (ad.cdiv(a.shape[0], ROWS), a.shape[1] // CHUNK))
def swiglu(a, b, y, ROWS: ad.constexpr, CHUNK: ad.constexpr):
    window = (ad.ds(ad.program_id(0) * ROWS, ROWS), ad.ds(ad.program_id(1) * CHUNK, CHUNK))
    gate, up = ad.smem((ROWS, CHUNK), a.dtype), ad.smem((ROWS, CHUNK), b.dtype)
    landed = ad.barrier()
    ad.async_copy(a.at[window], gate, barrier=landed, oob="undefined", arrive=False)
    ad.async_copy(b.at[window], up, barrier=landed, oob="undefined", arrive=False)
    landed.arrive_expect_tx(ROWS * CHUNK * (a.dtype.itemsize + b.dtype.itemsize))
    landed.wait()
    g = gate[...].astype(ad.float32)
    silu = g / (1.0 + ad.exp2(g * -LOG2E, approx=True))
    gate[...] = (silu * up[...].astype(ad.float32)).astype(y.dtype)
    ad.fence_async_smem()
    ad.async_copy(gate, y.at[window], oob="undefined")
    ad.await_async_copy(0)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    wide = a.astype(np.float64)
    return (wide / (1 + np.exp(-wide)) * b.astype(np.float64)).astype(ml_dtypes.bfloat16)


EXAMPLE_ARGS = {"swiglu": ((ad.ArraySpec((128, 512), ad.bfloat16),) * 3, config(512))}
APPROXIMATE = True  # ex2.approx: within a bound of the interpreter, not bit for bit


def main(shape=(128, 512)) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for _ in range(2))
    y = np.full_like(a, np.nan)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        y_d = to_device(y)
        swiglu(to_device(a), to_device(b), y_d, **config(shape[1]))
        y, where = to_host(y_d), "GPU"
    else:
        swiglu.interpret(a, b, y, **config(shape[1]))
        where = "interpreter"
    expected = reference(a, b).astype(np.float64)
    error = np.abs(y.astype(np.float64) - expected) / np.maximum(np.abs(expected), 1e-2)
    ok = bool(error.max() <= 2 ** -7)  # a bfloat16 ulp
    print(f"swiglu {shape} on the {where}: max relative error {error.max():.2e} {'ok' if ok else 'TOO LARGE'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
