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
3. The math runs in float32: GELU's tanh form, 0.5·v·(1 + tanh(√(2/π)·(v + 0.044715·v³))),
   with `ad.tanh(..., approx=True)` (one `tanh.approx.f32`; the hardware has no exact tanh).
4. One rounding to bfloat16, then the store.

`asyncdsl dump asyncdsl/examples/fused_elementwise.py --ptx` shows the `ld.global.v4` vectors,
the `tanh.approx.f32` and the predicates at the edges.

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


@ad.kernel(grid=lambda x, bias, y, ROWS, COLS: (ad.cdiv(x.shape[0], ROWS), ad.cdiv(x.shape[1], COLS)))
def bias_gelu(x, bias, y, ROWS: ad.constexpr, COLS: ad.constexpr):
    check_shape("bias", bias, x.shape[1:], "one a column of x")  # else a TraceError naming this line
    check_shape("y", y, x.shape, "one element for each of x's")
    rows = ad.ds(ad.program_id(0) * ROWS, ROWS)                            # 1. this CTA's block
    cols = ad.ds(ad.program_id(1) * COLS, COLS)
    v = ad.load(x.at[rows, cols]).astype(ad.float32)                       # 2. into registers
    v = v + ad.load(bias.at[cols]).astype(ad.float32)[None, :]
    inner = (v + 0.044715 * v * v * v) * GELU_SCALE                        # 3. float32 math
    gelu = 0.5 * v * (1.0 + ad.tanh(inner, approx=True))
    ad.store(y.at[rows, cols], gelu.astype(y.dtype))                       # 4. round once, store


def reference(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """GELU(x + bias), tanh form, in float64, rounded once to x's type."""
    v = x.astype(np.float64) + bias.astype(np.float64)
    return (0.5 * v * (1 + np.tanh(GELU_SCALE * (v + 0.044715 * v ** 3)))).astype(x.dtype)


# Arguments `asyncdsl dump` traces the kernel with: a ragged shape, blocks past both edges.
EXAMPLE_ARGS = {"bias_gelu": ((ad.ArraySpec((100, 1000), ad.bfloat16), ad.ArraySpec((1000,), ad.bfloat16),
                               ad.ArraySpec((100, 1000), ad.bfloat16)), {"ROWS": 16, "COLS": 512})}
APPROXIMATE = True  # tanh.approx: the GPU and the interpreter agree within a bound, not bit for bit


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
    # tanh.approx is within 2^-10.99 of tanh: up to |v|·2^-12 where the GELU is near 0.
    error = np.abs(y.astype(np.float64) - expected) - 2 ** -7 * np.abs(expected)
    ok = bool((error <= 2 ** -8).all())
    print(f"bias_gelu {shape} on the {where}: {'ok' if ok else 'TOO LARGE'}, largest error past a bfloat16 "
          f"ulp {max(error.max(), 0):.2e} ({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
