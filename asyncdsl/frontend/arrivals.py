"""The barrier arrival rule, checked where it can be counted while tracing.

A phase of an mbarrier completes after exactly `arrival_count` arrivals (and the bytes its
expect-tx announced).  Each copy onto a barrier is one arrival (`arrive=False`: none), each
`arrive(n)` is n, each `arrive_expect_tx` one, and code that every warpgroup of a CTA runs
arrives once per warpgroup.  So the arrivals a warpgroup makes on a barrier before a run of `w`
waits on it (since its previous wait) must be `w * arrival_count`: with more, a phase completes
before its last copy has landed and the wait passes over bytes still in flight (or a later wait
waits for a phase no one completes); with fewer, the wait never ends.

Where the count is known while tracing, a different one is a `TraceError` at the wait, naming the
barrier, its arrivals and the count it expects.  Known means: the barrier is one of its group by
a Python int, every arrival and wait on it sits in straight-line code or in `asyncdsl.range`
loops of literal bounds, all at the kernel's top level or all in one warpgroup role, and none is
conditional (`when`, a copy's `predicate`), collective (arrivals in other CTAs), a wait with an
explicit `parity`, or an op this check does not know.  A barrier that is not counted this way
is left to the interpreter, whose `DeadlockError` lists the arrivals each phase got.  A run of
waits with no arrival before it gets no verdict: its arrivals may come from another role.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.memory_attrs import BarriersType
from asyncdsl.errors import TraceError
from asyncdsl.frontend.launch_shape import LaunchShape
from asyncdsl.ir_locations import from_ir_location

# Loops whose body waits are unrolled this many times at most: from the third iteration on,
# every iteration's runs of arrivals and waits repeat the second's.
_UNROLLED = 3


class _Uncountable(Exception):
    """The barrier's arrivals cannot be counted while tracing."""


@dataclass
class _Arrivals:
    count: int
    ops: list[Operation] = field(default_factory=list)


@dataclass
class _Wait:
    op: ir.WaitOp


def check_arrivals(body: Block, launch: LaunchShape) -> None:
    """Raise a TraceError at the first wait whose arrivals break the rule (see the module)."""
    for barrier, index, uses in _barrier_uses(body):
        try:
            loops: set[Operation] = set()
            contexts = {_context(op, body, loops) for op in uses}
            if len(contexts) != 1:
                raise _Uncountable
            (context,) = contexts
            warpgroups = launch.num_warpgroups if context is None else len(context.warpgroup_indices)
            events = _events(context.body.block if context is not None else body, barrier, index, loops)
        except _Uncountable:
            continue
        _check(events, barrier, index, warpgroups)


def _barrier_uses(body: Block) -> Iterable[tuple[ir.AllocBarriersOp, int, list[Operation]]]:
    """Each barrier of a group allocated in `body`, by position, with the ops that name it; a
    group also named by a traced index, or whose value goes elsewhere, is left out.  Barriers are
    allocated at the top level or in a role's body (`core.allocation_tracer`): no deeper walk."""
    roles = [op.body.block.ops for op in body.ops if isinstance(op, ir.WarpgroupRoleOp)]
    for alloc in (op for ops in (body.ops, *roles) for op in ops):
        if not isinstance(alloc, ir.AllocBarriersOp):
            continue
        by_index: dict[int, list[Operation]] = {}
        try:
            for use in alloc.result.uses:
                by_index.setdefault(_index(use.operation), []).append(use.operation)
        except _Uncountable:
            continue
        for index, uses in by_index.items():
            yield alloc, index, uses


def _index(op: Operation) -> int:
    """The position of the barrier `op` names, when it is a constant."""
    operand: SSAValue | None
    if isinstance(op, (ir.WaitOp, ir.ArriveOp, ir.ArriveExpectTxOp)):
        operand = op.index
    else:
        operand = getattr(op, "barrier_index", None)
    if not isinstance(operand, SSAValue):
        raise _Uncountable
    value = _constant(operand)
    if value is None:
        raise _Uncountable
    return value


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _context(op: Operation, body: Block, loops: set[Operation]) -> ir.WarpgroupRoleOp | None:
    """The warpgroup role `op` runs in (None: every warpgroup), adding the loops around it to
    `loops`; conditional code is uncountable."""
    kernel = body.parent_op()
    parent = op.parent_op()
    role = None
    while parent is not None and parent is not kernel:
        if isinstance(parent, ir.WarpgroupRoleOp):
            if role is not None:
                raise _Uncountable
            role = parent
        elif isinstance(parent, scf.ForOp):
            loops.add(parent)
        else:
            raise _Uncountable
        parent = parent.parent_op()
    return role


def _names(op: Operation, barrier: ir.AllocBarriersOp, index: int) -> bool:
    return any(operand is barrier.result for operand in op.operands) and _index(op) == index


def _events(block: Block, barrier: ir.AllocBarriersOp, index: int, loops: set[Operation]
            ) -> list[_Arrivals | _Wait]:
    """The arrivals and waits on the barrier in `block`, in program order, counted through the
    `loops` that hold them."""
    events: list[_Arrivals | _Wait] = []
    for op in block.ops:
        if op in loops:
            events += _loop_events(op, barrier, index, loops)
        elif any(isinstance(o, BarriersType) for o in op.operand_types) and _uses(op, barrier):
            if _names(op, barrier, index):
                events.append(_event(op))
    return events


def _uses(op: Operation, barrier: ir.AllocBarriersOp) -> bool:
    return any(operand is barrier.result for operand in op.operands)


def _loop_events(loop: scf.ForOp, barrier: ir.AllocBarriersOp, index: int, loops: set[Operation]
                 ) -> list[_Arrivals | _Wait]:
    body = _events(loop.body.block, barrier, index, loops)
    if not body:
        return []
    start, stop, step = (_constant(v) for v in (loop.lb, loop.ub, loop.step))
    if start is None or stop is None or step is None:
        raise _Uncountable
    trips = max(0, -(-(stop - start) // step))
    arrivals = [e for e in body if isinstance(e, _Arrivals)]
    if len(arrivals) == len(body):
        total = _Arrivals(0)
        for event in arrivals:
            total.count += event.count * trips
            total.ops += event.ops
        return [total] if trips else []
    return body * min(trips, _UNROLLED)


def _event(op: Operation) -> _Arrivals | _Wait:
    if isinstance(op, ir.WaitOp):
        if op.parity is not None:
            raise _Uncountable
        return _Wait(op)
    if isinstance(op, ir.ArriveOp):
        if op.collective is not None:
            raise _Uncountable
        return _Arrivals(op.count.value.data, [op])
    if isinstance(op, ir.ArriveExpectTxOp):
        return _Arrivals(1, [op])
    if isinstance(op, ir.AsyncCopyOp):
        if op.predicate is not None or op.cluster_dims or op.partition is not None:
            raise _Uncountable
        return _copy_arrivals(op)
    if isinstance(op, (ir.AsyncCopyIm2colOp, ir.AsyncCopyRowsOp)):
        if getattr(op, "predicate", None) is not None:
            raise _Uncountable
        return _copy_arrivals(op)
    raise _Uncountable


def _copy_arrivals(op: ir.AsyncCopyOp | ir.AsyncCopyIm2colOp | ir.AsyncCopyRowsOp) -> _Arrivals:
    # An `arrive=False` copy only adds bytes: the error's list of arrivals leaves it out.
    return _Arrivals(1, [op]) if op.arrive.value.data else _Arrivals(0)


def _check(events: list[_Arrivals | _Wait], barrier: ir.AllocBarriersOp, index: int, warpgroups: int) -> None:
    expected = barrier.arrival_count.value.data
    arrivals = _Arrivals(0)
    waits: list[ir.WaitOp] = []
    for event in events + [_Arrivals(0)]:
        if isinstance(event, _Wait):
            waits.append(event.op)
            continue
        if waits:
            if arrivals.count and arrivals.count * warpgroups != len(waits) * expected:
                raise _error(barrier, index, arrivals, waits, warpgroups)
            arrivals, waits = _Arrivals(0), []
        arrivals.count += event.count
        arrivals.ops += event.ops


def _error(barrier: ir.AllocBarriersOp, index: int, arrivals: _Arrivals, waits: list[ir.WaitOp],
           warpgroups: int) -> TraceError:
    expected = barrier.arrival_count.value.data
    group = barrier.result.type.count.data
    name = f"the barrier allocated at {_line(barrier)}" + (f" (position {index})" if group > 1 else "")
    what = "; ".join(sorted({f"{_kind(op)} at {_line(op)}" for op in arrivals.ops}))
    total = arrivals.count * warpgroups
    each = (f", {arrivals.count} in each of the {warpgroups} warpgroups that run them"
            if warpgroups > 1 else "")
    phases = f"the {len(waits)} waits" if len(waits) > 1 else "the wait"
    advice = (f"; if those arrivals are one phase, allocate it with asyncdsl.barrier(arrival_count={total})"
              if len(waits) == 1 else "")
    return TraceError(
        f"{name} has arrival_count={expected}, but {total} arrival(s) come before {phases} here "
        f"({what}{each}), where {len(waits) * expected} are expected: a phase completes after exactly "
        "arrival_count arrivals (a copy onto the barrier is one, arrive(n) is n, arrive_expect_tx is one), "
        "so with more a wait passes "
        f"while copies are still landing, and with fewer it never ends{advice}",
        from_ir_location(waits[0]),
    )


def _kind(op: Operation) -> str:
    if isinstance(op, ir.ArriveOp):
        return f"arrive({op.count.value.data})"
    if isinstance(op, ir.ArriveExpectTxOp):
        return "arrive_expect_tx"
    return "the copy"


def _line(op: Operation) -> str:
    location = from_ir_location(op)
    return str(location) if location is not None else "an unknown line"
