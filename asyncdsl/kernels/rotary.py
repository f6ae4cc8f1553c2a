"""The rotary position embedding of queries and keys, as Llama-family models apply it, in one
launch for both: `q_out, k_out = asyncdsl.kernels.rotary(q, k, cos, sin)`.

q is (B, S, H, D) and k (B, S, H_kv, D), bfloat16, each token's heads side by side as the
projections leave them; cos and sin are (B, S, D), or (1, S, D) for positions every sequence
shares (transformers' position embeddings, of any float dtype the kernels read: bfloat16,
float16, float32).  With x1, x2 the halves of a head's D
elements and c1, c2, s1, s2 those of cos and sin at its position, a head becomes

    (x1 · c1 - x2 · s1,  x2 · c2 + x1 · s2)

(x · cos + rotate_half(x) · sin), computed in float32 and rounded once.  `inverse=True` applies
the transpose of that map, (y1 · c1 + y2 · s2, y2 · c2 - y1 · s1): the gradient of the inputs
from the outputs' (a rotation back by the same angles where the halves of sin are equal).

A CTA (one warpgroup) takes `tokens(D)` tokens of one sequence: it reads their cos and sin
once, then walks the heads of q and of k, moving each head's halves between GMEM and registers
directly (`asyncdsl.load` / `asyncdsl.store` of (tokens, D / 2) windows, 16-byte vectors a
thread, no shared memory); tokens past the sequence's end are never touched.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.shapes import check_shape
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty

TILE = 4096  # elements of a head's tokens a CTA takes at a time: 32 tokens of D = 128, 64 of 64


def tokens(d: int) -> int:
    """The tokens a CTA takes for head dim d: TILE elements, 16 float32 of each half of cos, sin
    and a head a thread, in about 120 registers: four CTAs a multiprocessor (64 tokens of
    D = 128 take 233 registers, two CTAs)."""
    return max(1, TILE // d)


def takes_head_dim(d: int) -> bool:
    """Whether the kernel rotates heads of d elements: powers of two from 16 to TILE (a CTA's
    tokens times D / 2 must be whole passes of its 128 threads' 8-element vectors, 1024
    elements, which tokens(D) makes only where D is a power of two)."""
    return 16 <= d <= TILE and not d & (d - 1)


@on_stream
def rotary(q, k, cos, sin, *, inverse: bool = False, q_out=None, k_out=None, stream=None):
    """q and k (see the module's docstring) rotated by cos and sin, in new arrays like them or
    in `q_out` and `k_out`; `inverse`: by the transposed map (the backward pass)."""
    q_out = empty(q, q.shape, q.dtype) if q_out is None else q_out
    k_out = empty(k, k.shape, k.dtype) if k_out is None else k_out
    launch(rotary_kernel, q, k, cos, sin, q_out, k_out, stream=stream, INVERSE=inverse)
    return q_out, k_out


@kernel(grid=lambda q, *_, **__: (ad.cdiv(q.shape[1], tokens(q.shape[3])), q.shape[0]), block=128,
        name="rotary")
def rotary_kernel(q, k, cos, sin, q_out, k_out, INVERSE: constexpr = False):
    _check(q, k, cos, sin, q_out, k_out, INVERSE)
    HALF, ROWS = q.shape[3] // 2, tokens(q.shape[3])
    rows, b = ad.ds(ad.program_id(0) * ROWS, ROWS), ad.program_id(1)
    layout = ad.strided(8)

    def halves(x, batch, *head):
        return [ad.load(x.at[(batch, rows, *head, ad.ds(i * HALF, HALF))], layout=layout).astype(ad.float32)
                for i in range(2)]

    # Each table's own batch extent: cos may be per sequence while sin is shared, or the reverse.
    c1, c2 = halves(cos, b if cos.shape[0] == q.shape[0] else 0)
    s1, s2 = halves(sin, b if sin.shape[0] == q.shape[0] else 0)
    if INVERSE:  # the transpose: x2's weight in the first half is s2, x1's in the second -s1
        s1, s2 = -s2, -s1
    for x, out in ((q, q_out), (k, k_out)):
        for h in ad.range(x.shape[2]):
            x1, x2 = halves(x, b, h)
            for i, half in enumerate((x1 * c1 - x2 * s1, x2 * c2 + x1 * s2)):
                ad.store(out.at[b, rows, h, ad.ds(i * HALF, HALF)], half.astype(out.dtype))


def _check(q, k, cos, sin, q_out, k_out, inverse) -> None:
    """Refuse at trace time what the kernel does not compute."""
    if len(q.shape) != 4 or len(k.shape) != 4 or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ad.TraceError(f"q and k must be (B, S, H, D) and (B, S, H_kv, D), got {tuple(q.shape)} and "
                            f"{tuple(k.shape)}", user_location())
    B, S, _, D = q.shape
    if not takes_head_dim(D):
        raise ad.TraceError(f"head dim {D}: the rotary kernel takes head dims that are powers of two from "
                            f"16 to {TILE}", user_location())
    if q.dtype != k.dtype or q.dtype not in (ad.bfloat16, ad.float16):
        raise ad.TraceError(f"q and k must both be bfloat16 or both float16, got {q.dtype} and {k.dtype}",
                            user_location())
    for name, table in (("cos", cos), ("sin", sin)):
        if tuple(table.shape) != (1, S, D):
            shared = f"(1, {S}, {D}) for positions the sequences share"
            check_shape(name, table, (B, S, D), f"one angle a position of each sequence, or {shared}")
        if table.dtype not in (ad.bfloat16, ad.float16, ad.float32):
            raise ad.TraceError(f"{name} must be bfloat16, float16 or float32, got {table.dtype}",
                                user_location())
    for name, out, source in (("q_out", q_out, q), ("k_out", k_out, k)):
        if tuple(out.shape) != tuple(source.shape) or out.dtype != source.dtype:
            raise ad.TraceError(f"{name} must be like {name[0]}: {tuple(source.shape)} {source.dtype}, got "
                                f"{tuple(out.shape)} {out.dtype}", user_location())
    if not isinstance(inverse, bool):
        raise ad.TraceError(f"INVERSE is True or False, got {inverse!r}", user_location())


def reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, inverse: bool = False) -> np.ndarray:
    """The rotation of x (B, S, H, D) in float64, rounded once to x's dtype."""
    wide, c, s = (a.astype(np.float64) for a in (x, cos[:, :, None], sin[:, :, None]))
    half = x.shape[-1] // 2
    (x1, x2), (c1, c2), (s1, s2) = ((a[..., :half], a[..., half:]) for a in (wide, c, s))
    if inverse:
        s1, s2 = -s2, -s1
    return np.concatenate([x1 * c1 - x2 * s1, x2 * c2 + x1 * s2], axis=-1).astype(x.dtype)


# Arguments `asyncdsl dump` traces the kernel with.
_Q, _K = ArraySpec((2, 100, 8, 128), ad.bfloat16), ArraySpec((2, 100, 2, 128), ad.bfloat16)
_ANGLES = ArraySpec((2, 100, 128), ad.float32)
EXAMPLE_ARGS: dict[str, tuple[tuple, dict]] = {"rotary_kernel": ((_Q, _K, _ANGLES, _ANGLES, _Q, _K), {})}
