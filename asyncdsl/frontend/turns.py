"""Warpgroups taking turns: `turns = asyncdsl.turns((0, 1))`, then `with turns.turn():` in each.

Two consumer warpgroups of an attention kernel that issue their tensor-core work whenever they
are ready end up issuing it together and then doing their softmax together, leaving the tensor
cores idle during it.  Taking turns to issue staggers them: while one does its softmax, the
other's matrix products run (FlashAttention-3's warpgroup scheduling).

The warpgroups of a group take turns in order, the first warpgroup first, cyclically: a `with
turns.turn():` body starts once the previous warpgroup's turn has ended.  Along the order no
party may take more turns than the one before it, and the first at most one more than the last
(of an odd number of tiles, the first takes the extra one); a party that takes more waits for
ever, which the interpreter reports as a deadlock.  Named barriers carry the turn: each group
takes one per warpgroup, after `bar.sync` 0 and the warpgroups' own barriers, 16 in all.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.core import allocation_tracer
from asyncdsl.frontend.roles import enclosing_role
from asyncdsl.hw.limits import NAMED_BARRIERS


class Turns:
    """Consecutive warpgroups `first`, `first + 1`, ... that take turns in that order."""

    def __init__(self, first: int, parties: int, barrier: int):
        self.group = (first, parties, barrier)
        self._open = False

    @property
    def warpgroups(self) -> tuple[int, ...]:
        first, parties, _ = self.group
        return tuple(range(first, first + parties))

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Run the body in the executing warpgroup's turn; the next warpgroup's turn begins
        when it ends.  Inside a role whose warpgroups all take part in these turns."""
        tracer = tracing.current("Turns.turn")
        location = user_location()
        role = enclosing_role(tracer.block)
        if role is None or not set(role.warpgroup_indices) <= set(self.warpgroups):
            where = ("outside any warpgroup role" if role is None
                     else f"in the role of warpgroups {role.warpgroup_indices}")
            raise TraceError(
                f"a turn is taken {where}, but only warpgroups {self.warpgroups} take these turns: take it "
                "inside a warpgroup_role of theirs",
                location,
            )
        if self._open:
            raise TraceError(
                "a turn is taken inside a turn of the same warpgroups: it would wait for itself", location)
        block = tracer.block
        tracer.emit(ir.TakeTurnOp(*self.group), location)
        self._open = True
        try:
            yield
        finally:
            self._open = False
        if tracer.block is not block:
            raise TraceError(
                "a turn began in one block and ends in another (an asyncdsl.range or asyncdsl.when entered "
                "inside it must also end inside it)",
                location,
            )
        tracer.emit(ir.PassTurnOp(*self.group), location)


def turns(warpgroups: Sequence[int]) -> Turns:
    """Let `warpgroups` (two or more consecutive warpgroup indices, ascending) take turns, the
    first one first.  Called at the kernel's top level, outside any role."""
    what = "asyncdsl.turns"
    tracer = allocation_tracer(what)
    location = user_location()
    indices = tuple(warpgroups) if isinstance(warpgroups, (tuple, list)) else None
    if (
        indices is None
        or len(indices) < 2
        or any(not is_int(i) for i in indices)
        or list(indices) != list(range(indices[0], indices[0] + len(indices)))
    ):
        raise TraceError(
            f"{what} takes two or more consecutive warpgroup indices in ascending order (Python ints), "
            f"got {warpgroups!r}",
            location,
        )
    count = tracer.launch.num_warpgroups
    if indices[0] < 0 or indices[-1] >= count:
        raise TraceError(f"{what}{indices}: the CTA has warpgroups 0..{count - 1}", location)
    if enclosing_role(tracer.block) is not None:
        raise TraceError(f"{what} is called at the kernel's top level, outside any warpgroup_role", location)
    taken = sum(op.parties.value.data for op in tracer.kernel_body.ops if isinstance(op, ir.AllocTurnsOp))
    barrier = 1 + count + taken  # after bar.sync 0 and each warpgroup's own
    if barrier + len(indices) > NAMED_BARRIERS:
        raise TraceError(
            f"{what}{indices} needs {len(indices)} more named barriers, but a CTA has {NAMED_BARRIERS}: "
            f"bar.sync 0, one for each of its {count} warpgroups and {taken} for earlier turns are taken",
            location,
        )
    tracer.emit(ir.AllocTurnsOp(indices[0], len(indices), barrier), location)
    return Turns(indices[0], len(indices), barrier)
