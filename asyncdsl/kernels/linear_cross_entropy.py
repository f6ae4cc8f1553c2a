"""The last layer of a language model and its cross-entropy, fused so that the logits are never
held whole: `loss, dh, dweight = asyncdsl.kernels.linear_cross_entropy(h, weight, targets)` for
hidden states h (N, Hd) and the output projection weight (V, Hd), bfloat16, gives the loss of
logits = h @ weightᵀ against `targets` (as `asyncdsl.kernels.cross_entropy` does) and its
gradients dh (bfloat16) and dweight (float32).

The rows go in chunks of CHUNK (`chunk_rows`: chunk logits about the size of h, as Liger Kernel
sizes them).  Each chunk takes four kernels on one (CHUNK, V) buffer:

    z = h_c @ weightᵀ          the tensor cores read weight's (V, Hd) slices transposed
    z ← dz                     `cross_entropy_rows` in place: losses and gradient, one pass
    dh_c = dz @ weight         `asyncdsl.kernels.gemm`
    dweight += dzᵀ @ h_c       dz's slices read transposed, the tiles added into float32

dweight is summed in float32 over the chunks (bfloat16 sums of many chunks lose the small
gradients of rare tokens) by the GEMM's TMA reduce-adds: one CTA adds each tile of a chunk's
product, and the chunks' kernels follow one another on one stream, so each element takes its
additions one a chunk in the order of the chunks, and dweight is the same bits on every run.
The count of valid targets is taken once, on the device, before the first chunk, so "mean"
scales every chunk alike.  V and Hd must be multiples of 8 (16-byte rows for the copies).
"""

from __future__ import annotations

import numbers

from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.blocks.shapes import row_length
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.cross_entropy import (
    REDUCTIONS,
    count_valid,
    cross_entropy_rows,
    no_rows,
    target_words,
    vector_total,
)
from asyncdsl.kernels.cross_entropy import config as cross_entropy_config
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.gemm_choice import gemm
from asyncdsl.kernels.gemm_cooperative import INTERPRETED_CTAS, cooperative
from asyncdsl.kernels.outputs import empty, zeros


@on_stream
def linear_cross_entropy(h, weight, targets, *, ignore_index: int = -100, reduction: str = "mean",
                         chunk: int | None = None, stream=None):
    """(loss, dh, dweight) of cross_entropy(h @ weightᵀ, targets), the logits made CHUNK rows at
    a time (`chunk`, default `chunk_rows`); loss as `asyncdsl.kernels.cross_entropy` gives it
    (with every target ignored, "mean" is nan and the gradients 0, as torch's are), dh like h,
    dweight float32."""
    if reduction not in REDUCTIONS:
        raise ad.ArgumentError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}", user_location())
    n, hidden = len(h), row_length("h", h)
    vocabulary = row_length("weight", weight)
    if vocabulary != hidden or hidden % 8 or weight.shape[0] % 8:
        raise ad.ArgumentError(f"h (N, Hd) = {tuple(h.shape)} and weight (V, Hd) = {tuple(weight.shape)} "
                               "must share Hd, and V and Hd must be multiples of 8", user_location())
    v = weight.shape[0]
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral)
                              or chunk <= 0 or chunk % 4):
        raise ad.ArgumentError(f"chunk must be a positive multiple of 4 rows (each chunk's float32 losses "
                               f"start on a 16-byte boundary), got {chunk!r}", user_location())
    if not n:  # no rows: nothing to launch, dweight sums none
        dweight = zeros(weight, weight.shape, ad.float32)
        return no_rows(h, reduction), empty(h, h.shape, h.dtype), dweight
    rows = int(chunk) if chunk is not None else chunk_rows(n, v, hidden)
    ctas = INTERPRETED_CTAS if on_host(h) else multiprocessors(h) // 2 * 2
    words = target_words(targets)
    count = empty(h, (1,), ad.float32)
    launch(count_valid, words, count, stream=stream, IGNORE=ignore_index)
    losses, dh = empty(h, (n,), ad.float32), empty(h, h.shape, h.dtype)
    dweight = zeros(weight, weight.shape, ad.float32)
    logits = empty(h, (min(rows, n), v), h.dtype)
    for start in range(0, n, rows):
        end = min(start + rows, n)
        h_c, z = h[start:end], logits[:end - start]
        launch(matmul_transposed, h_c, weight, z, stream=stream, CTAS=ctas, TRANSPOSED="b")
        launch(cross_entropy_rows, z, words[start:end], count, losses[start:end], z, stream=stream,
               IGNORE=ignore_index, MEAN=reduction == "mean", **cross_entropy_config(v))
        gemm(z, weight, out=dh[start:end], ctas=ctas, stream=stream)
        launch(matmul_transposed, z, h_c, dweight, stream=stream, CTAS=ctas, TRANSPOSED="a", ADDS=True)
    if reduction == "none":
        return losses, dh, dweight
    total = empty(h, (1,), ad.float32)
    launch(vector_total, losses, total, stream=stream)
    return total.reshape(()), dh, dweight


def chunk_rows(n: int, v: int, hidden: int) -> int:
    """Rows of a chunk: a chunk's logits about as large as h (n · Hd elements), a power of two of
    at least 128 rows (the GEMM's tile) and no more than n needs."""
    target = max(1, n * hidden // v)
    rows = 128
    while rows < target and rows < n:
        rows *= 2
    return rows


@kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384)
def matmul_transposed(a, b, c, CTAS: constexpr, TRANSPOSED: constexpr, ADDS: constexpr = False):
    """`asyncdsl.kernels.gemm_cooperative`'s kernel with a (TRANSPOSED "a": a is (K, M)) or b
    ("b": b is (N, K)) read transposed; ADDS: the product added into a float32 c (TMA
    reduce-adds)."""
    if TRANSPOSED not in ("a", "b"):
        raise ad.TraceError(f"TRANSPOSED names the operand given transposed, 'a' or 'b', got {TRANSPOSED!r}",
                            user_location())
    cooperative(a, b, c, CTAS, GemmConfig(), transposed=TRANSPOSED, adds=ADDS)


# Arguments `asyncdsl dump` traces each kernel with: a chunk's logits and its dweight product.
EXAMPLE_ARGS = {"matmul_transposed": ((ArraySpec((4096, 2048), ad.bfloat16),
                                       ArraySpec((32000, 2048), ad.bfloat16),
                                       ArraySpec((4096, 32000), ad.bfloat16)),
                                      {"CTAS": 132, "TRANSPOSED": "b"})}
