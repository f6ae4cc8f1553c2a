"""Softmax of the rows of a matrix: a row kernel written out, then the library's.

A row kernel gives each CTA (one warpgroup, 128 threads) a few whole rows and keeps them in
registers from the first read to the last write, so every element crosses HBM twice: once in,
once out.  `softmax_rows` below is the whole of it:

1. `ad.load` reads a (ROWS, WIDTH) window of x into a register tile, shared out over the 128
   threads.  WIDTH may run past the rows' end (any N works): those elements read as `other`,
   -inf here, whose exponential adds nothing, and `ad.store` never writes them.
2. `tile.max(axis=1)` reduces along the rows (lane shuffles within a warp, then shared memory
   between warps) and `[:, None]` broadcasts the result back over the row.
3. e^v is 2^(v·log2 e): `ad.exp2(..., approx=True)` is one `ex2.approx` an element, as Triton's
   and torch's softmax use; everything else rounds as IEEE says.
4. The result is rounded to bfloat16 once and stored straight from registers.

`asyncdsl.kernels.softmax(x)` is the library's: it makes y and picks, for the rows' length, one
of three kernels built from `asyncdsl.blocks.rows` (rows staged in shared memory by one bulk
copy, whole or in pieces; a row split over two warpgroups; padded windows of whole 16-byte
vectors a thread), so that rows of any length take a kernel made for them (docs/performance.md
compares them with Triton).

    python -m asyncdsl.examples.softmax     # on the GPU if there is one, else interpreted
    asyncdsl dump asyncdsl/examples/softmax.py --ptx
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

import asyncdsl as ad
import asyncdsl.kernels

LOG2E = 1.4426950408889634


@ad.kernel(grid=lambda x, y, ROWS, WIDTH: (ad.cdiv(x.shape[0], ROWS),))
def softmax_rows(x, y, ROWS: ad.constexpr, WIDTH: ad.constexpr):
    if WIDTH < x.shape[1]:
        raise ad.TraceError(f"a window of WIDTH={WIDTH} does not hold rows of {x.shape[1]} elements")
    window = (ad.ds(ad.program_id(0) * ROWS, ROWS), ad.ds(0, WIDTH))
    v = ad.load(x.at[window], other=-np.inf).astype(ad.float32)    # 1. rows into registers
    shifted = (v - v.max(axis=1)[:, None]) * LOG2E                   # 2. the largest is 0
    e = ad.exp2(shifted, approx=True)                                # 3. e^(v - max)
    ad.store(y.at[window], (e / e.sum(axis=1)[:, None]).astype(y.dtype))  # 4. round once, store


def reference(x: np.ndarray) -> np.ndarray:
    """Softmax in float64, rounded once to x's type."""
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


# Arguments `asyncdsl dump` traces the kernel with: rows of 1000 in windows of 1024, two a CTA.
EXAMPLE_ARGS = {"softmax_rows": ((ad.ArraySpec((64, 1000), ad.bfloat16),) * 2, {"ROWS": 2, "WIDTH": 1024})}
APPROXIMATE = True  # ex2.approx: the GPU and the interpreter agree within a bound, not bit for bit


def main(shape=(64, 1000)) -> int:
    from asyncdsl.runtime import has_gpu, to_device, to_host

    x = (np.random.default_rng(0).standard_normal(shape) * 3).astype(ml_dtypes.bfloat16)
    where = "GPU" if has_gpu() else "interpreter"
    # The kernels' arrays: on the device, or host arrays for the interpreter.
    place: Callable[[np.ndarray], Any] = to_device if has_gpu() else np.asarray
    back: Callable[[Any], np.ndarray] = to_host if has_gpu() else np.asarray
    results = {}
    start = time.perf_counter()
    run = softmax_rows if has_gpu() else softmax_rows.interpret  # interpret: numpy arrays, on the CPU
    y = place(np.full_like(x, np.nan))
    run(place(x), y, ROWS=2, WIDTH=1024)
    results["softmax_rows (above)"] = back(y)
    results["asyncdsl.kernels.softmax"] = back(asyncdsl.kernels.softmax(place(x)))
    elapsed = time.perf_counter() - start
    failures = 0
    for name, y in results.items():
        error = np.abs(y.astype(np.float64) - reference(x).astype(np.float64)).max()
        ok = bool(error <= 2 ** -8)  # within a bfloat16 ulp of 1
        failures += not ok
        print(f"{name:26s} {shape} on the {where}: max error {error:.2e} {'ok' if ok else 'TOO LARGE'}")
    print(f"({elapsed * 1e3:.1f} ms incl. compiles)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
