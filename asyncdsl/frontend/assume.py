"""`asyncdsl.multiple_of`: telling the compiler what it cannot prove about a traced index.

A tiled TMA copy needs its traced start on a tile boundary and a copy of 4-bit elements an even
one; the compiler proves that from the arithmetic that made the start (`pid * 64` is a multiple of
64) and asks for a hint where it cannot (`ad.multiple_of(offsets[i], 64)`, Triton's
`tl.multiple_of`).  The hint is checked where the kernel runs checked: always in the interpreter,
and on the GPU with ASYNCDSL_DEBUG=1.
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.scalars import IndexLike, Scalar, index_value, is_index


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
