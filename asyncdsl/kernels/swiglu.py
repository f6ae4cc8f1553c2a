"""SwiGLU's gate, y = silu(a) · b = a · sigmoid(a) · b, bfloat16, element by element over large
tensors: `y = asyncdsl.kernels.swiglu(a, b)`.

`swiglu_kernel` has each CTA (one warpgroup) take CHUNK elements of one row and move them between
GMEM and registers directly (`asyncdsl.load` / `asyncdsl.store` of a window of the row: 16-byte
`ld/st.global.v4` a thread when the rows are whole 16-byte vectors, no shared memory, no
barrier).  The last chunk of a row may run past its end: those elements are never touched (one
predicate a vector), so any row length works.  The math runs in float32 registers (silu(a) =
a / (1 + 2^(-a·log2 e)): one `ex2.approx` and one IEEE division an element), rounded once.

The grid is numbered chunk first, so consecutive CTAs read consecutive memory.  The sigmoid is
not taken as 1/2 + tanh(a/2)/2: for negative a, 1 + tanh(a/2) cancels to within `tanh.approx`'s
absolute error.  The measurements behind both choices are in docs/notes/2026-12-03-row-kernels.md.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.shapes import check_rows, check_shape
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty, empty_elementwise

LOG2E = 1.4426950408889634
CHUNK = 2048  # elements of a row per step: 16 of each input per thread (2 vectors of 8)


@on_stream
def swiglu(a, b, *, out=None, stream=None):
    """silu(a) · b of the matrices a and b (bfloat16, of one shape), in a new array like a or in
    `out`."""
    y = empty(a, a.shape, a.dtype) if out is None else out
    if not empty_elementwise(a, b=b, out=y):
        launch(swiglu_kernel, a, b, y, stream=stream)
    return y


@kernel(grid=lambda a, b, y, CHUNK=CHUNK, **_: (a.shape[0] * -(-a.shape[1] // CHUNK),), block=128,
        name="swiglu")
def swiglu_kernel(a, b, y, CHUNK: constexpr = CHUNK):
    check_chunk(CHUNK)
    check_shape("b", b, a.shape, "silu(a) * b takes them element by element")
    check_rows(("a", a), ("y", y))
    # CTA k takes chunk k % chunks of row k // chunks: CTAs launched one after the other read
    # memory one after the other, as CTAs each walking a row would not (one grid dimension: rows
    # may outnumber a second dimension's 65535).
    chunks = ad.cdiv(a.shape[1], CHUNK)
    cta = ad.program_id(0)
    window = (ad.ds(cta // chunks, 1), ad.ds(cta % chunks * CHUNK, CHUNK))
    g = ad.load(a.at[window], layout=ad.strided(8)).astype(ad.float32)
    up = ad.load(b.at[window], layout=ad.strided(8)).astype(ad.float32)
    silu = g / (1.0 + ad.exp2(g * -LOG2E, approx=True))
    ad.store(y.at[window], (silu * up).astype(y.dtype))


def check_chunk(chunk) -> None:
    """Refuse a CHUNK that is no positive multiple of 1024."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1024 or chunk % 1024:
        raise ad.TraceError("CHUNK must be a positive multiple of 1024 (a vector of 8 elements for each of "
                            f"the 128 threads at a time), got {chunk!r}", user_location())


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """silu(a) · b in float64, rounded once to a's type."""
    wide = a.astype(np.float64)
    return (wide / (1 + np.exp(-wide)) * b.astype(np.float64)).astype(a.dtype)


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"swiglu_kernel": ((ArraySpec((96, 3000), ad.bfloat16),) * 3, {"CHUNK": 1024})}
