"""SwiGLU's gate: y = silu(a) * b = a * sigmoid(a) * b, bfloat16, elementwise over large tensors.

Each CTA moves one (BM, BN) tile of `a` and `b` in by TMA, computes in float32 registers
(silu(a) = a / (1 + 2^(-a·log2 e)): one `ex2.approx` and one IEEE division per element), rounds
to bfloat16 into the `a` buffer and stores it by TMA.  Many small CTAs per SM overlap one
another's copies.

    python -m asyncdsl.examples.swiglu     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad

LOG2E = 1.4426950408889634


@ad.kernel(grid=lambda a, b, y, BM, BN: (ad.cdiv(a.shape[0], BM), ad.cdiv(a.shape[1], BN)))
def swiglu(a, b, y, BM: ad.constexpr, BN: ad.constexpr):
    window = (ad.ds(ad.program_id(0) * BM, BM), ad.ds(ad.program_id(1) * BN, BN))
    gate = ad.smem((BM, BN), a.dtype)
    up = ad.smem((BM, BN), b.dtype)
    landed = ad.barrier()
    ad.async_copy(a.at[window], gate, barrier=landed, arrive=False)
    ad.async_copy(b.at[window], up, barrier=landed, arrive=False)
    landed.arrive_expect_tx(BM * BN * (a.dtype.itemsize + b.dtype.itemsize))
    landed.wait()
    g = gate[...].astype(ad.float32)
    silu = g / (1.0 + ad.exp2(g * -LOG2E, approx=True))
    gate[...] = (silu * up[...].astype(ad.float32)).astype(y.dtype)
    ad.fence_async_smem()
    ad.async_copy(gate, y.at[window])
    ad.await_async_copy(0)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    wide = a.astype(np.float64)
    return (wide / (1 + np.exp(-wide)) * b.astype(np.float64)).astype(ml_dtypes.bfloat16)


CONFIG = {"BM": 32, "BN": 256}
EXAMPLE_ARGS = {"swiglu": ((ad.ArraySpec((128, 512), ad.bfloat16),) * 3, CONFIG)}
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
        swiglu(to_device(a), to_device(b), y_d, **CONFIG)
        y, where = to_host(y_d), "GPU"
    else:
        swiglu.interpret(a, b, y, **CONFIG)
        where = "interpreter"
    expected = reference(a, b).astype(np.float64)
    error = np.abs(y.astype(np.float64) - expected) / np.maximum(np.abs(expected), 1e-2)
    ok = bool(error.max() <= 2 ** -7)  # a bfloat16 ulp
    print(f"swiglu {shape} on the {where}: max relative error {error.max():.2e} {'ok' if ok else 'TOO LARGE'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
