"""Warpgroup matrix multiply: `asyncdsl.wgmma` and `asyncdsl.wgmma_wait`.

    acc = ad.registers((128, 256), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, a_buf, b_buf, accumulate=kk > 0)   # acc += a @ b (acc = a @ b where false)
    ad.wgmma_wait(0)                                 # every wgmma of this warpgroup is done
    out[...] = acc[...].astype(ad.bfloat16)

`a` is an (M, K) shared-memory buffer or a 16-bit register tile, `b` a (K, N) buffer; a buffer
holding the transpose of the operand (K contiguous in B, M in A) is passed as `buf.T`.  Buffers
must be laid out the way the tensor cores read them (`TileTransform((8, S))` with an S-element
swizzle span, `hw.wgmma`), which is also how a TMA copy with the same layout fills them.

The accumulators a role's wgmmas use must fit its registers with room for the rest
(`hw.wgmma.check_accumulator_budget`): an accumulator ptxas cannot keep in registers serializes
the wgmma pipeline and spills, so it is a trace-time error at the wgmma that adds it.

A wgmma runs asynchronously: until a `wgmma_wait` retires it, its accumulator must not be read
or written by ordinary code (a trace-time error, at the line that does it) and its operand
buffers must not be overwritten (the interpreter's race check).  `wgmma_wait(n)` retires all but
the newest `n` groups of the warpgroup, in issue order.  The trace-time check follows program
order, so a wait inside an `asyncdsl.when` counts as if it always ran.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import MmaError, TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.refs import SmemRef, TransposedSmem
from asyncdsl.frontend.registers import RegisterRef, in_flight
from asyncdsl.frontend.roles import register_budget
from asyncdsl.frontend.scalars import condition_value
from asyncdsl.frontend.tiles import RegisterTile
from asyncdsl.hw.wgmma import check_accumulator_budget, register_count

# Per kernel being traced, per role (named as `register_budget` names it): each accumulator
# its wgmmas use, and the registers a thread gives it.
_ACCUMULATORS: WeakKeyDictionary = WeakKeyDictionary()


def _operand(value, name: str, registers_allowed: bool) -> tuple[SSAValue, bool]:
    what = "asyncdsl.wgmma"
    if isinstance(value, SmemRef):
        return value.value, False
    if isinstance(value, TransposedSmem):
        return value.ref.value, True
    if registers_allowed and isinstance(value, RegisterTile):
        return value.use(what), False
    kinds = "a shared-memory buffer (or its .T) or a 16-bit register tile" if registers_allowed else (
        "a shared-memory buffer (or its .T)")
    raise TraceError(f"{what}: {name} must be {kinds}, got {value!r}", user_location())


def wgmma(acc: RegisterRef, a, b, accumulate=True) -> None:
    """Issue `acc += a @ b` on the tensor cores (`acc = a @ b` where `accumulate` is false: a
    Python bool or a traced condition), asynchronously: see `wgmma_wait`."""
    what = "asyncdsl.wgmma"
    tracer = tracing.current(what)
    if not isinstance(acc, RegisterRef):
        raise TraceError(
            f"{what}: acc must be registers (asyncdsl.registers(..., layout=asyncdsl.WGMMA)), got {acc!r}",
            user_location())
    a_value, a_transposed = _operand(a, "a", registers_allowed=True)
    b_value, b_transposed = _operand(b, "b", registers_allowed=False)
    location = user_location()
    tracer.emit(
        ir.WgmmaOp(acc.value, a_value, b_value, condition_value(accumulate), a_transposed, b_transposed),
        location)
    budget, where = register_budget(tracer)
    accumulators = _ACCUMULATORS.setdefault(tracer, {}).setdefault(where, {})
    line = f" (line {location.line})" if location is not None else ""
    accumulators.setdefault(acc.value, (f"{acc.shape[0]}x{acc.shape[1]}{line}", register_count(acc.shape)))
    try:
        check_accumulator_budget(list(accumulators.values()), budget, where)
    except MmaError as error:
        raise TraceError(error.message, location) from None
    in_flight(tracer).issue(acc, location)


def wgmma_wait(pending: int = 0) -> None:
    """Wait until at most `pending` of this warpgroup's wgmma groups (the newest) still run."""
    what = "asyncdsl.wgmma_wait"
    tracer = tracing.current(what)
    if not is_int(pending) or pending < 0:
        raise TraceError(f"{what}: pending must be a Python int >= 0, got {pending!r}", user_location())
    tracer.emit(ir.WgmmaWaitOp(pending))
    in_flight(tracer).retire(pending)
