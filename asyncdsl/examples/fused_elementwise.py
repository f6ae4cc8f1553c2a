"""A fused elementwise kernel: y = GELU(x + bias), bfloat16 in and out, in one pass over HBM.

Unfused, the bias add and the GELU are two kernels and x crosses HBM four times (read, write
x + bias, read it again, write y); fused, twice.  The kernel is a plain loop-free body run by a
2-D grid of CTAs, each taking a (ROWS, COLS) block of x:

1. `ad.ds(start, size)` slices the block out of x and of the bias (a vector, one element a
   column).  Blocks at the matrix's edges run past it: `ad.load` reads those elements as zeros
   and `ad.store` leaves them alone (one predicate a vector), so any shape works.
2. `ad.load(...).astype(ad.float32)` brings the block into registers, 16-byte vectors a thread
   where the rows allow; `bias[None, :]` broadcasts the bias over the rows with no data
   movement (the vector takes the block's layout without its row axis).
3. The math runs in float32.  GELU's tanh form is 0.5·v·(1 + tanh(u)), u = √(2/π)·(v +
   0.044715·v³); written so, 1 + tanh(u) cancels where v is below about -3 and the GELU is
   small, and `tanh.approx.f32`'s absolute error (7e-6) would swamp it.  The same value is
   v / (1 + e^(-2u)): one `ex2.approx` (2 ulps) and one IEEE division, accurate everywhere.
4. One rounding to bfloat16, then the store.

`asyncdsl dump asyncdsl/examples/fused_elementwise.py --ptx` shows the `ld.global.v4` vectors,
the `ex2.approx` and the predicates at the edges.

    python -m asyncdsl.examples.fused_elementwise     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import math
import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.shapes import check_shape

GELU_SCALE = math.sqrt(2 / math.pi)
LOG2E = 1.4426950408889634


@ad.kernel(grid=lambda x, bias, y, ROWS, COLS: (ad.cdiv(x.shape[0], ROWS), ad.cdiv(x.shape[1], COLS)))
def bias_gelu(x, bias, y, ROWS: ad.constexpr, COLS: ad.constexpr):
    check_shape("bias", bias, x.shape[1:], "one a column of x")  # else a TraceError naming this line
    check_shape("y", y, x.shape, "one element for each of x's")
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)                            # 1. this CTA's block
    cols = ad.ds(ad.program_id(1) * COLS, COLS)
    v = ad.load(x.at[rows, cols]).astype(ad.float32)                       # 2. into registers
    v = v + ad.load(bias.at[cols]).astype(ad.float32)[None, :]
    u = (v + 0.044715 * v * v * v) * GELU_SCALE                            # 3. float32 math
    gelu = v / (1.0 + ad.exp2(u * (-2 * LOG2E), approx=True))             # v · sigmoid(2u)
    ad.store(y.at[rows, cols], gelu.astype(y.dtype))                       # 4. round once, store


def reference(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """GELU(x + bias), tanh form, in float64 (as v · sigmoid(2u): 1 + tanh(u) would cancel in
    float64 too), rounded once to x's type."""
    v = x.astype(np.float64) + bias.astype(np.float64)
    with np.errstate(over="ignore"):  # e^(-2u) overflows to inf where the GELU is -0
        return (v / (1 + np.exp(-2 * GELU_SCALE * (v + 0.044715 * v ** 3)))).astype(x.dtype)


# Arguments `asyncdsl dump` traces the kernel with: a ragged shape, blocks past both edges.
EXAMPLE_ARGS = {"bias_gelu": ((ad.ArraySpec((100, 1000), ad.bfloat16), ad.ArraySpec((1000,), ad.bfloat16),
                               ad.ArraySpec((100, 1000), ad.bfloat16)), {"ROWS": 16, "COLS": 512})}
APPROXIMATE = True  # ex2.approx: the GPU and the interpreter agree within a bound, not bit for bit


def main(shape=(100, 1000)) -> int:
    from asyncdsl.runtime import has_gpu, to_device, to_host

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 2).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(shape[1]).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    start = time.perf_counter()
    if has_gpu():
        y_d = to_device(y)
        bias_gelu(to_device(x), to_device(bias), y_d, ROWS=16, COLS=512)
        y, where = to_host(y_d), "GPU"
    else:
        bias_gelu.interpret(x, bias, y, ROWS=16, COLS=512)  # numpy arrays, on the CPU
        where = "interpreter"
    expected = reference(x, bias).astype(np.float64)
    error = np.abs(y.astype(np.float64) - expected) / np.maximum(np.abs(expected), 2 ** -126)
    ok = bool(error.max() <= 2 ** -7)  # a bfloat16 ulp, relative
    print(f"bias_gelu {shape} on the {where}: max relative error {error.max():.2e} "
          f"{'ok' if ok else 'TOO LARGE'} ({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
