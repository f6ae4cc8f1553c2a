"""The sums of the columns of a float32 matrix of partial sums, added in a fixed order:
`asyncdsl.kernels.column_sums.sum_columns(partial, out)`.

The backward kernels of the norms leave one float32 row of partial sums a CTA (each CTA's share of
dw = Σ_rows dy∘x̂, say); this kernel finishes the sum.  Each CTA takes WIDTH columns and sweeps
the rows ROWS at a time, adding each step's (ROWS, WIDTH) tile element by element into float32
registers (ROWS loads in flight a thread where one row at a time would wait on each), then the
ROWS rows of the running sums into one.  The order is fixed by the configuration, so the result
is the same bits on every run, whatever the GPU's scheduling: no atomics."""

from __future__ import annotations

from asyncdsl.blocks.row_reductions import accumulate
from asyncdsl.blocks.shapes import check_shape
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream

ROWS = 32  # rows a step: 8 a warp
WIDTH = 128  # columns a CTA: one 16-byte vector a lane a row, and many CTAs for a few thousand columns


@on_stream
def sum_columns(partial, out, *, stream=None):
    """out[j] = Σ_i partial[i, j] (float32 sums in a fixed order, rounded once to out's type);
    returns out."""
    launch(column_sums, partial, out, stream=stream, ROWS=ROWS, WIDTH=WIDTH)
    return out


@kernel(grid=lambda partial, out, ROWS, WIDTH: (ad.cdiv(partial.shape[1], WIDTH),))
def column_sums(partial, out, ROWS: constexpr, WIDTH: constexpr):
    """WIDTH columns of `partial` a CTA, its rows ROWS at a time."""
    check_shape("out", out, partial.shape[1:], "one sum a column of partial")
    if partial.dtype != ad.float32:
        raise ad.TraceError(f"partial must be float32, got {partial.dtype}", user_location())
    columns = ad.ds(ad.program_id(0) * WIDTH, WIDTH)
    running = ad.registers((ROWS, WIDTH), ad.float32)
    total = accumulate(running, 0, ad.cdiv(partial.shape[0], ROWS),
                       lambda step: running[...] + ad.load(partial.at[ad.ds(step * ROWS, ROWS), columns]))
    ad.store(out.at[columns], total.sum(axis=0).astype(out.dtype))


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"column_sums": ((ArraySpec((264, 4096), ad.float32), ArraySpec((4096,), ad.bfloat16)),
                                {"ROWS": ROWS, "WIDTH": WIDTH})}
