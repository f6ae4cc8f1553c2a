"""(B, H, S, D) -> (B, S, H, D), the head/sequence swap of attention layouts, done by TMA:
`y = asyncdsl.kernels.permute_bhsd(x)`.

Each CTA takes one batch and a block of BS sequence positions across all heads.  Its load views
`x[b, :, s0:s0+BS, :]` (H, BS, D) through `TransposeTransform((1, 0, 2))`, so the box lands in
shared memory as (BS, H, D), which is exactly `y[b, s0:s0+BS, :, :]`: the store is a plain box.
The permutation is done by the copy engine's addressing; no thread touches the data.  What it
measured against torch is in docs/performance.md, the block sizes tried in
docs/notes/2026-12-04-row-kernel-choices.md.
"""

from __future__ import annotations

from asyncdsl.blocks.shapes import check_shape
from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty

TILE_BYTES = 64 * 1024  # the most a CTA's (BS, H, D) tile takes by default


@on_stream
def permute_bhsd(x, *, block_s: int | None = None, out=None, stream=None):
    """x (B, H, S, D) as (B, S, H, D), in a new array like x or in `out`; `block_s` sequence
    positions a CTA (default: 16, fewer where the tile would pass TILE_BYTES)."""
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) != 4:
        raise ad.ArgumentError(f"x must be (B, H, S, D), got shape {shape}", user_location())
    batches, heads, length, dim = shape
    y = empty(x, (batches, length, heads, dim), x.dtype) if out is None else out
    block_s = block_s or choose(shape, as_dtype(x.dtype).itemsize)
    launch(permute_bhsd_kernel, x, y, stream=stream, BS=block_s)
    return y


def choose(shape: tuple[int, int, int, int], itemsize: int) -> int:
    """The sequence positions a CTA for x of `shape` (B, H, S, D): 16, halved while the tile is
    larger than TILE_BYTES."""
    block = 16
    while block > 1 and block * shape[1] * shape[3] * itemsize > TILE_BYTES:
        block //= 2
    return block


@kernel(grid=lambda x, y, BS: (x.shape[0], ad.cdiv(x.shape[2], BS)), name="permute_bhsd")
def permute_bhsd_kernel(x, y, BS: constexpr):
    if len(x.shape) != 4:
        raise ad.TraceError(f"x must be (B, H, S, D), got shape {tuple(x.shape)}", user_location())
    batches, heads, length, dim = x.shape
    check_shape("y", y, (batches, length, heads, dim), "x's (B, H, S, D) as (B, S, H, D)")
    batch, s0 = ad.program_id(0), ad.program_id(1) * BS
    tile = ad.smem((BS, heads, dim), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(
        x.at[batch, :, ad.ds(s0, BS), :], tile, barrier=loaded, transforms=ad.TransposeTransform((1, 0, 2))
    )
    loaded.wait()
    ad.async_copy(tile, y.at[batch, ad.ds(s0, BS), :, :])
    ad.await_async_copy(0, read_only=True)


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"permute_bhsd_kernel": ((ArraySpec((2, 16, 1000, 64), ad.bfloat16),
                                         ArraySpec((2, 1000, 16, 64), ad.bfloat16)), {"BS": 32})}
