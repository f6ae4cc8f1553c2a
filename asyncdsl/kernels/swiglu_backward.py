"""The gradients of SwiGLU's gate y = silu(a) · b (`asyncdsl.kernels.swiglu`), bfloat16, element
by element: `da, db = asyncdsl.kernels.swiglu_backward(dy, a, b)`, with σ = sigmoid(a):

    da = dy · b · σ · (1 + a · (1 − σ)),   db = dy · silu(a) = dy · a · σ.

The forward's inputs are all the backward keeps: σ is recomputed (one `ex2.approx` and one IEEE
division an element), which costs less than the bytes of storing it.  The kernel is
`asyncdsl.kernels.swiglu`'s walk: each CTA (one warpgroup) takes CHUNK elements of one row,
consecutive CTAs consecutive chunks, moving them between GMEM and registers in 16-byte vectors
a thread where the rows allow; the last chunk of a row stops at its end.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.shapes import check_rows, check_shape
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty, empty_elementwise
from asyncdsl.kernels.swiglu import CHUNK, LOG2E, check_chunk


@on_stream
def swiglu_backward(dy, a, b, *, stream=None):
    """(da, db), the gradients of y = silu(a) · b given dy (all bfloat16 matrices of one shape)."""
    da, db = empty(a, a.shape, a.dtype), empty(b, b.shape, b.dtype)
    if not empty_elementwise(a, b=b, dy=dy):
        launch(swiglu_backward_kernel, dy, a, b, da, db, stream=stream, CHUNK=CHUNK)
    return da, db


@kernel(grid=lambda dy, a, b, da, db, CHUNK: (a.shape[0] * ad.cdiv(a.shape[1], CHUNK),), block=128)
def swiglu_backward_kernel(dy, a, b, da, db, CHUNK: constexpr):
    """CHUNK elements of one row a CTA, chunk number first (see `asyncdsl.kernels.swiglu`)."""
    check_chunk(CHUNK)
    check_shape("b", b, a.shape, "silu(a) * b takes them element by element")
    check_shape("dy", dy, a.shape, "one gradient an element of y")
    check_rows(("a", a), ("da", da))
    check_rows(("b", b), ("db", db))
    chunks = ad.cdiv(a.shape[1], CHUNK)
    cta = ad.program_id(0)
    window = (ad.ds(cta // chunks, 1), ad.ds(cta % chunks * CHUNK, CHUNK))
    gate = ad.load(a.at[window], layout=ad.strided(8)).astype(ad.float32)
    up = ad.load(b.at[window], layout=ad.strided(8)).astype(ad.float32)
    grad = ad.load(dy.at[window], layout=ad.strided(8)).astype(ad.float32)
    sigmoid = 1.0 / (1.0 + ad.exp2(gate * -LOG2E, approx=True))
    silu = gate * sigmoid
    ad.store(da.at[window], (grad * up * sigmoid * (1.0 + gate - silu)).astype(da.dtype))
    ad.store(db.at[window], (grad * silu).astype(db.dtype))


def reference_backward(dy: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple:
    """(da, db) in float64."""
    dy, a, b = (x.astype(np.float64) for x in (dy, a, b))
    sigmoid = 1 / (1 + np.exp(-a))
    return dy * b * sigmoid * (1 + a * (1 - sigmoid)), dy * a * sigmoid


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"swiglu_backward_kernel": ((ArraySpec((96, 3000), ad.bfloat16),) * 5, {"CHUNK": 1024})}
