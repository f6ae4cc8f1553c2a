"""Control flow that runs on the GPU: `asyncdsl.range` (`scf.for`) and `asyncdsl.when` (`scf.if`).

Python's own `for` and `if` over Python values unroll while tracing; these trace their body once.
What a body traces (a scalar, a tile, the loop's index) exists only inside it: a use after the
body is a `TraceError` at that line (`Tracer.emit` checks every operand).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xdsl.dialects import scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Region

from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.scalars import IndexLike, Scalar, condition_value, int32_index, is_index
from asyncdsl.ir_locations import to_ir_location


def range(start: IndexLike, stop: IndexLike | None = None, step: int = 1) -> Iterator[Scalar]:  # noqa: A001
    """A loop executed on the GPU (`scf.for`): its body is traced once with a traced index.

    Use Python's own `range` to unroll a loop while tracing instead.
    """
    tracer = tracing.current("asyncdsl.range")
    if stop is None:
        start, stop = 0, start
    for name, bound in (("start", start), ("stop", stop)):
        if not is_index(bound):
            raise TraceError(f"asyncdsl.range {name} must be an int or a traced index, got {bound!r}",
                             user_location())
    if not is_int(step) or step <= 0:
        raise TraceError(f"asyncdsl.range step must be a positive Python int, got {step!r}", user_location())
    location = user_location()
    end = scf.YieldOp()
    body = Block([end], arg_types=[IndexType()])
    if location:
        end.location = to_ir_location(location)
    loop = scf.ForOp(int32_index(start), int32_index(stop), int32_index(step), [], body)
    tracer.emit(loop, location)
    with tracer.inside(body):
        try:
            yield Scalar(body.args[0])
        except GeneratorExit:
            # Python closes the generator on `break` without letting it raise: report it at
            # the next op traced (or at the end of the kernel).
            tracer.defer_error(
                TraceError(
                    "leaving an asyncdsl.range loop early (break/return) cannot be traced: the "
                    "loop runs on the GPU; use asyncdsl.when to skip work inside it",
                    location,
                )
            )


@contextmanager
def when(condition: Scalar | bool) -> Iterator[None]:
    """Run the block only where `condition` holds (`scf.if`), uniformly per warpgroup."""
    tracer = tracing.current("asyncdsl.when")
    location = user_location()
    cond = condition_value(condition)
    end = scf.YieldOp()
    then = Block([end])
    if location:
        end.location = to_ir_location(location)
    branch = scf.IfOp(cond, [], Region(then))
    tracer.emit(branch, location)
    with tracer.inside(then):
        yield
