"""The interpreter's turn-taking: a token that passes from warpgroup to warpgroup.

The GPU counts named-barrier arrivals; while no party takes more turns than the one before it
that is a token held by one party at a time, first by the first, which is what is modelled here.
Passing the turn releases what the passer knows and taking it acquires that (an arrival on a
named barrier synchronizes with the wait it completes).  A party that waits for a turn that never
comes (its predecessor exited) is a deadlock the scheduler reports, with the holder named.
"""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import SourceLocation
from asyncdsl.interpret.clocks import VectorClock
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.ir_locations import from_ir_location


class TurnToken:
    """Whose turn it is among warpgroups `first` .. `first + parties - 1` of one CTA."""

    def __init__(self, first: int, parties: int, where: str):
        self.first = first
        self.parties = parties
        self.where = where
        self.holder = first
        self.released = VectorClock()

    def pass_from(self, warpgroup: int, clock: VectorClock) -> None:
        self.holder = self.first + (warpgroup - self.first + 1) % self.parties
        self.released = clock.copy()


class TurnWait:
    """Waiting for `token` to come to `warpgroup`."""

    at_kernel_exit = False

    def __init__(self, token: TurnToken, warpgroup, location: SourceLocation | None):
        self.token = token
        self.warpgroup = warpgroup
        self.location = location

    def ready(self) -> bool:
        return self.token.holder == self.warpgroup.index

    def describe(self) -> str:
        holder = self.warpgroup.cta.warpgroups[self.token.holder]
        state = "has exited without passing it" if holder.exited else "has not passed it yet"
        return (f"waits for its turn among the warpgroups taking turns at {self.token.where}; warpgroup "
                f"{holder.index}, whose turn it is, {state} (no party may take more turns than "
                "the one before it)")


@register_impls
class TurnsFunctions(WarpgroupFunctions):
    """Allocating turns, taking one, passing it on."""

    def _token(self, op) -> TurnToken:
        first, parties, barrier = op.group
        tokens = self.warpgroup.cta.turns
        if barrier not in tokens:
            tokens[barrier] = TurnToken(first, parties, origin(op))
        return tokens[barrier]

    @impl(ir.AllocTurnsOp)
    def run_alloc_turns(self, interpreter: Interpreter, op: ir.AllocTurnsOp, args: PythonValues):
        self._token(op)
        return ()

    @impl(ir.TakeTurnOp)
    @diagnosed
    def run_take_turn(self, interpreter: Interpreter, op: ir.TakeTurnOp, args: PythonValues):
        token = self._token(op)
        self.warpgroup.wait_until(TurnWait(token, self.warpgroup, from_ir_location(op)))
        self.warpgroup.clock.join(token.released)
        return ()

    @impl(ir.PassTurnOp)
    @diagnosed
    def run_pass_turn(self, interpreter: Interpreter, op: ir.PassTurnOp, args: PythonValues):
        self._token(op).pass_from(self.warpgroup.index, self.warpgroup.clock)
        return ()
