"""What a warpgroup can wait for: an mbarrier phase, a CTA or cluster barrier, its bulk copies.

Each is a `scheduler.Blocker`: it says whether the warpgroup may go on, and describes itself for
a deadlock report.  CTA and cluster barriers are rendezvous of every warpgroup that has not
exited: `barrier.cluster.wait` waits for the non-exited threads of the cluster (PTX ISA), and
`bar.sync 0` is taken to do the same for the CTA.  A kernel's threads leave through the same
cluster barrier at the end (the lowered epilogue), so an explicit cluster barrier in one CTA meets
the exit of another, as on the GPU.  Meeting joins the clocks of everyone who met.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asyncdsl.errors import SourceLocation
from asyncdsl.interpret.clocks import joined
from asyncdsl.interpret.mbarrier import MBarrier

if TYPE_CHECKING:
    from asyncdsl.interpret.state import Warpgroup


class PhaseWait:
    """`mbarrier.try_wait.parity` in a loop: the phase of `parity` must complete."""

    at_kernel_exit = False

    def __init__(self, barrier: MBarrier, parity: int, location: SourceLocation | None):
        self.barrier = barrier
        self.parity = parity
        self.location = location

    def ready(self) -> bool:
        return self.barrier.phase_completed(self.parity)

    def describe(self) -> str:
        return (
            f"waits for the phase of parity {self.parity} of {self.barrier.name} to complete; "
            f"that barrier: {self.barrier.describe()}"
        )


class Rendezvous:
    """A barrier all live `members` must reach (`bar.sync 0`, `barrier.cluster`)."""

    def __init__(self, name: str, members: list[Warpgroup]):
        self.name = name
        self.members = members
        self.generation = 0
        self._arrived: list[Warpgroup] = []

    def arrive(self, warpgroup: Warpgroup) -> int:
        """`warpgroup` reaches the barrier; returns the generation it waits to see pass."""
        generation = self.generation
        self._arrived.append(warpgroup)
        self.release_if_complete()
        return generation

    def release_if_complete(self) -> None:
        """Let everyone through if every live member is here (also called when one exits)."""
        if not self._arrived:
            return
        if any(not m.exited and m not in self._arrived for m in self.members):
            return
        clock = joined(m.clock for m in self._arrived)
        for member in self._arrived:
            member.clock.join(clock)
        self._arrived = []
        self.generation += 1

    def describe_missing(self) -> str:
        missing = [m.label for m in self.members if not m.exited and m not in self._arrived]
        exited = [m.label for m in self.members if m.exited]
        text = f"{len(self._arrived)} of {len(self._arrived) + len(missing)} live warpgroups are there"
        if missing:
            text += f"; not yet: {', '.join(missing)}"
        if exited:
            text += f"; exited: {', '.join(exited)}"
        return text


class RendezvousWait:
    """Waiting at a `Rendezvous` until the generation it arrived in has passed."""

    def __init__(
        self,
        rendezvous: Rendezvous,
        generation: int,
        what: str,
        location: SourceLocation | None,
        at_kernel_exit: bool = False,
    ):
        self.rendezvous = rendezvous
        self.generation = generation
        self.what = what
        self.location = location
        self.at_kernel_exit = at_kernel_exit

    def ready(self) -> bool:
        return self.rendezvous.generation > self.generation

    def describe(self) -> str:
        return f"waits at {self.what} ({self.rendezvous.name}): {self.rendezvous.describe_missing()}"


class Proceed:
    """A blocking point that is always ready (copies complete when issued): a switch only."""

    at_kernel_exit = False

    def __init__(self, what: str, location: SourceLocation | None):
        self.what = what
        self.location = location

    def ready(self) -> bool:
        return True

    def describe(self) -> str:
        return self.what
