"""The state of one trace: the module being built, where ops go, and the user's source lines.

Every op the frontend builds goes through `Tracer.emit`, which stamps it with the user's source
location and runs its verifier, turning a verifier failure into a `TraceError` at that line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xdsl.dialects import builtin
from xdsl.ir import Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import index_constant
from asyncdsl.errors import SourceLocation, TraceError, user_location
from asyncdsl.frontend.specs import LaunchShape
from asyncdsl.ir_locations import to_ir_location


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

    def visible(self, block: Block) -> bool:
        """Whether values defined in `block` can be used at the current point: `block` is the
        current one or encloses it (a loop or branch body ends when its tracing does)."""
        return block in self._blocks

    def defer_error(self, error: TraceError) -> None:
        """Record an error found where it cannot be raised; the next `emit` or `finish` raises it."""
        self._deferred = self._deferred or error

    def finish(self) -> None:
        """The body was traced to its end: raise what was deferred."""
        if self._deferred is not None:
            raise self._deferred

    def emit(self, op: Operation, location: SourceLocation | None = None) -> Operation:
        """Append `op` at the current point, located at the user's line, and verify it."""
        location = self._append(op, location)
        try:
            op.verify_()  # this op's own rules; the enclosing block is still being built
        except VerifyException as error:
            op.detach()
            raise TraceError(str(error), location) from None
        return op

    def emit_valid(self, op: Operation) -> Operation:
        """`emit` for an op that is valid by construction: index arithmetic, whose operands were
        checked to be indices.  Those are most of a kernel's ops, and their generic verifier costs
        as much again as building them."""
        self._append(op, None)
        return op

    def _append(self, op: Operation, location: SourceLocation | None) -> SourceLocation | None:
        self.finish()
        location = location or user_location()
        if location is not None:
            op.location = to_ir_location(location)
        terminator = self._terminators[-1]
        if terminator is None:
            self.block.add_op(op)  # some verifiers look at the parent, so verify in place
        else:
            self.block.insert_op_before(op, terminator)
        return location

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
