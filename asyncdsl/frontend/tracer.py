"""The state of one trace: the module being built, where ops go, and the user's source lines.

Every op the frontend builds goes through `Tracer.emit`, which stamps it with the user's source
location and runs its verifier, turning a verifier failure into a `TraceError` at that line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from xdsl.dialects import builtin
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import index_constant
from asyncdsl.errors import SourceLocation, TraceError, user_location
from asyncdsl.frontend.launch_shape import LaunchShape
from asyncdsl.ir_locations import from_ir_location, to_ir_location

Op = TypeVar("Op", bound=Operation)

# The bodies the frontend opens, by their op, as kernel code writes them.
_BODIES = {
    "scf.for": "asyncdsl.range loop",
    "scf.if": "asyncdsl.when block",
    "asyncdsl.warpgroup_role": "asyncdsl.warpgroup_role block",
}


def defining_block(value: SSAValue) -> Block | None:
    """The block `value` is defined in (None for the result of an op not placed in one)."""
    owner = value.owner
    return owner if isinstance(owner, Block) else owner.parent_block()


class Tracer:
    """Builds the body of one kernel function."""

    def __init__(self, body: Block, launch: LaunchShape, profiling: bool = False):
        self.launch = launch
        self.profiling = profiling  # `asyncdsl.region` traces its markers only when set
        self._blocks = [body]
        # Loop and branch bodies are built with their terminator in place (their verifiers want
        # it); ops then go before it.
        self._terminators: list[Operation | None] = [None]
        # Whether each open block runs once per warpgroup where its parent does (a warpgroup
        # role's body), so that what is allocated there is allocated once, as at the top level.
        self._runs_once: list[bool] = [True]
        self._deferred: TraceError | None = None

    @property
    def block(self) -> Block:
        return self._blocks[-1]

    @property
    def kernel_body(self) -> Block:
        return self._blocks[0]

    @property
    def at_top_level(self) -> bool:
        """Whether code here runs once per warpgroup: in the kernel's body, or in a warpgroup
        role's (no loop or branch around it)."""
        return all(self._runs_once)

    def visible(self, block: Block | None) -> bool:
        """Whether values defined in `block` can be used at the current point: `block` is the
        current one or encloses it (a loop or branch body ends when its tracing does; a value
        of no block is never visible)."""
        return block in self._blocks

    def defer_error(self, error: TraceError) -> None:
        """Record an error found where it cannot be raised; the next `emit` or `finish` raises it."""
        self._deferred = self._deferred or error

    def finish(self) -> None:
        """The body was traced to its end: raise what was deferred."""
        if self._deferred is not None:
            raise self._deferred

    def emit(self, op: Op, location: SourceLocation | None = None) -> Op:
        """Append `op` at the current point, located at the user's line, and verify it."""
        location = self._append(op, location)
        try:
            op.verify_()  # this op's own rules; the enclosing block is still being built
        except VerifyException as error:
            op.detach()
            raise TraceError(str(error), location) from None
        return op

    def emit_valid(self, op: Op) -> Op:
        """`emit` for an op that is valid by construction: index arithmetic, whose operands were
        checked to be indices.  Those are most of a kernel's ops, and their generic verifier costs
        as much again as building them."""
        self._append(op, None)
        return op

    def _append(self, op: Operation, location: SourceLocation | None) -> SourceLocation | None:
        self.finish()
        location = location or user_location()
        # A value traced inside a loop, branch or role body exists only in it: the IR has no
        # value of it after the body, whatever Python's variable still holds.
        for operand in op.operands:
            block = defining_block(operand)
            if block is not None and block not in self._blocks:
                raise TraceError(self._escaped(operand, block), location)
        if location is not None:
            op.location = to_ir_location(location)
        terminator = self._terminators[-1]
        if terminator is None:
            self.block.add_op(op)  # some verifiers look at the parent, so verify in place
        else:
            self.block.insert_op_before(op, terminator)
        return location

    def _escaped(self, value: SSAValue, block: Block) -> str:
        """Why `value`, defined in `block`, inside a body whose tracing has ended, is not usable:
        the body is traced once, so the IR has no value of it after the body (the GPU would read
        a register the loop left at its bound, or one a skipped branch never set)."""
        body = block.parent_op()
        while body is not None and body.parent_block() not in self._blocks:
            body = body.parent_op()  # the outermost body that has ended
        if body is None:
            return "this traced value comes from another kernel's trace and cannot be used in this one"
        kind = _BODIES.get(body.name, f"{body.name} body")
        line = from_ir_location(body)
        where = f"the {kind} at line {line.line}" if line is not None else f"an {kind}"
        if isinstance(value, BlockArgument) and body.name == "scf.for" and block.parent_op() is body:
            return (
                f"the index of {where} exists only inside its body (the loop runs on the GPU and its "
                "body is traced once): compute what is needed after the loop from its bounds (where "
                "Python leaves the index at the last one: stop - 1 for a step of 1)"
            )
        if body.name == "asyncdsl.warpgroup_role":
            return (
                f"this traced value was computed inside {where}, which only its warpgroups run, and "
                "cannot be used after it: compute it outside the role (each warpgroup has registers "
                "of its own; warpgroups share values through shared memory)"
            )
        if isinstance(value.type, builtin.VectorType):
            return (
                f"this register tile was made inside {where} and cannot be used after it (the body is "
                "traced once); keep the value in an asyncdsl.registers(...) variable instead"
            )
        return (
            f"this traced value was computed inside {where} and cannot be used after it (the body "
            "is traced once and runs on the GPU, where the value exists only inside it): compute it "
            "outside the body, or write it into an asyncdsl.registers(...) variable inside (a tile: "
            "asyncdsl.full((1,), value, dtype)) and read that after"
        )

    def constant(self, value: int) -> SSAValue:
        return self.emit_valid(index_constant(value)).results[0]

    @contextmanager
    def inside(self, block: Block, runs_once: bool = False) -> Iterator[None]:
        """Emit into `block` (the body of a loop or branch), before its terminator; `runs_once`
        says that a warpgroup running the enclosing code runs the block once (a role's body)."""
        self._blocks.append(block)
        self._terminators.append(block.last_op)
        self._runs_once.append(runs_once)
        try:
            yield
        finally:
            self._blocks.pop()
            self._terminators.pop()
            self._runs_once.pop()


_active: list[Tracer] = []


def current(what: str) -> Tracer:
    """The tracer of the kernel being traced; `what` names the API for the error message."""
    if not _active:
        raise TraceError(
            f"{what} can only be used inside a function decorated with @asyncdsl.kernel",
            user_location(),
        )
    return _active[-1]


@contextmanager
def tracing(tracer: Tracer) -> Iterator[Tracer]:
    _active.append(tracer)
    try:
        yield tracer
    finally:
        _active.pop()


def new_module(*ops: Operation) -> builtin.ModuleOp:
    return builtin.ModuleOp(list(ops))
