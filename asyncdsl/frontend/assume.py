"""`asyncdsl.multiple_of`: telling the compiler what it cannot prove about a traced index;
`check_all`: stating what a kernel expects of data it reads.

A tiled TMA copy needs its traced start on a tile boundary and a copy of 4-bit elements an even
one; the compiler proves that from the arithmetic that made the start (`pid * 64` is a multiple of
64) and asks for a hint where it cannot (`ad.multiple_of(offsets[i], 64)`, Triton's
`tl.multiple_of`).  The hint is checked where the kernel runs checked: always in the interpreter,
and on the GPU with ASYNCDSL_DEBUG=1.

`check_all(tile, message)` states that every element of a bool tile holds, for data the kernel
reads and guards itself (a block table's page numbers inside the cache: the gathers through it
skip the pages outside).  The interpreter raises an `AssumptionError` at its line where one is
false, as a debug-mode kernel does after its launch; otherwise it costs nothing on the GPU.
"""

from __future__ import annotations

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.scalars import IndexLike, Scalar, index_value, is_index
from asyncdsl.frontend.tiles import RegisterTile


def multiple_of(value: IndexLike, divisor: int) -> IndexLike:
    """`value`, which the caller promises is a multiple of `divisor` (a positive Python int)."""
    if not is_int(divisor) or divisor < 1:
        raise TraceError(f"asyncdsl.multiple_of needs a positive Python int divisor, got {divisor!r}",
                         user_location())
    if not is_index(value):
        raise TraceError(f"asyncdsl.multiple_of takes an integer or a traced index, got {value!r}",
                         user_location())
    if isinstance(value, int):
        if value % divisor:
            raise TraceError(f"asyncdsl.multiple_of({value}, {divisor}): {value} is not a "
                             f"multiple of {divisor}", user_location())
        return value
    tracer = tracing.current("asyncdsl.multiple_of")
    return Scalar(tracer.emit(ir.MultipleOfOp(index_value(value), divisor)).results[0])


def check_all(condition, message: str) -> None:
    """Every element of the bool tile `condition` holds (`message` says what a false one means)."""
    what = "check_all"
    if not isinstance(condition, RegisterTile) or condition.dtype != dtypes.BOOL:
        raise TraceError(f"{what} takes a bool tile (a comparison), got {condition!r}", user_location())
    if not isinstance(message, str):
        raise TraceError(f"{what}: the message must be a str, got {message!r}", user_location())
    tracing.current(what).emit(ir.CheckTileOp(condition.use(what), message))
