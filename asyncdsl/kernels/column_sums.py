"""The sums of the columns of a float32 matrix of partial sums, added in the order of its rows:
`asyncdsl.kernels.column_sums.sum_columns(partial, out)`.

The backward kernels of the norms leave one float32 row of partial sums a CTA (each CTA's share of
dw = Σ_rows dy∘x̂, say); this kernel finishes the sum.  Each CTA takes WIDTH columns and adds the
rows one after the other into a float32 register row, so that the result is the same bits on
every run, whatever the GPU's scheduling: no atomics."""

from __future__ import annotations

from asyncdsl.blocks.row_reductions import accumulate
from asyncdsl.blocks.shapes import check_shape
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch

WIDTH = 1024  # columns a CTA: 8 float32 a thread


def sum_columns(partial, out, *, stream=None):
    """out[j] = Σ_i partial[i, j] (float32 sums in the order of the rows, rounded once to out's
    type); returns out."""
    launch(column_sums, partial, out, stream=stream, WIDTH=WIDTH)
    return out


@kernel(grid=lambda partial, out, WIDTH: (ad.cdiv(partial.shape[1], WIDTH),))
def column_sums(partial, out, WIDTH: constexpr):
    """WIDTH columns of `partial` a CTA, its rows added in order."""
    check_shape("out", out, partial.shape[1:], "one sum a column of partial")
    if partial.dtype != ad.float32:
        raise ad.TraceError(f"partial must be float32, got {partial.dtype}", user_location())
    columns = ad.ds(ad.program_id(0) * WIDTH, WIDTH)
    running = ad.registers((1, WIDTH), ad.float32)
    total = accumulate(running, 0, partial.shape[0],
                       lambda i: running[...] + ad.load(partial.at[ad.ds(i, 1), columns]))
    ad.store(out.at[columns], total.sum(axis=0).astype(out.dtype))


# Arguments `asyncdsl dump` traces the kernel with.
EXAMPLE_ARGS = {"column_sums": ((ArraySpec((132, 4096), ad.float32), ArraySpec((4096,), ad.bfloat16)),
                                {"WIDTH": WIDTH})}
