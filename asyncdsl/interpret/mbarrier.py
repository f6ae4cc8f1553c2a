"""The mbarrier object as docs/hardware.md §2.1 describes it.

State: the number of completed phases (its low bit is the parity the hardware keeps), the arrivals
still pending in the current phase, and the tx-count (bytes announced by expect-tx and not yet
delivered by async copies).  The current phase completes when pending arrivals and tx-count are
both zero; then pending is reloaded with the arrival count.  `try_wait.parity P` succeeds once the
phase of parity P has completed, i.e. while the current (incomplete) phase has the other parity,
so a wait that falls two phases behind aliases exactly as it does on the GPU.

The tx-count may go negative while arrivals are still pending (a copy may land before its
expect-tx, which that arrival then balances), but not once every arrival is in: then nothing
can bring it back, and those are more bytes than the phase expected.
"""

from __future__ import annotations

from collections.abc import Hashable

from asyncdsl.errors import BarrierError
from asyncdsl.interpret.clocks import VectorClock


class MBarrier:
    """One mbarrier, initialised with `arrival_count` before the kernel body runs."""

    def __init__(self, key: Hashable, name: str, arrival_count: int):
        self.key = key
        self.name = name
        self.arrival_count = arrival_count
        self.completed_phases = 0
        self.pending = arrival_count
        self.tx_count = 0
        self.arrivals: list[str] = []  # who arrived in the current phase, for a deadlock report
        # What the arrivers knew (released into the barrier), and what a wait that sees the
        # latest completed phase acquires.
        self._released = VectorClock()
        self.completed_clock = VectorClock()

    @property
    def current_phase(self) -> int:
        return self.completed_phases

    def phase_completed(self, parity: int) -> bool:
        """What `try_wait.parity parity` answers now."""
        return (self.completed_phases & 1) != parity

    def arrive(self, count: int, clock: VectorClock, by: str = "an arrival") -> None:
        """`count` arrivals by a warpgroup that knows `clock` (a release); `by` names the op and
        warpgroup for a deadlock report."""
        if count > self.pending:
            raise BarrierError(
                f"{count} arrival(s) on {self.name}, but its phase {self.current_phase} has only "
                f"{self.pending} of its {self.arrival_count} arrivals left: more arrivals than the "
                f"arrival count ({self.arrival_count}) allows in one phase"
                + (f" (the phase waits only for {self.tx_count} tx bytes)" if self.pending == 0 else "")
            )
        self.pending -= count
        self.arrivals.append(by if count == 1 else f"{by} ({count} arrivals)")
        self._released.join(clock)
        if self.pending == 0 and self.tx_count < 0:
            raise BarrierError(
                f"the last arrival on {self.name} leaves phase {self.current_phase} with "
                f"{-self.tx_count} more bytes completed by async copies than expect-tx announced"
            )
        self._complete_if_done()

    def arrive_expect_tx(self, num_bytes: int, clock: VectorClock, by: str = "an arrival") -> None:
        """`mbarrier.arrive.expect_tx`: announce `num_bytes`, then arrive once."""
        self.tx_count += num_bytes
        self.arrive(1, clock, by)

    def complete_tx(self, num_bytes: int) -> int:
        """An async copy delivered `num_bytes`; returns the phase they count towards."""
        phase = self.current_phase
        expected = self.tx_count
        self.tx_count -= num_bytes
        if self.tx_count < 0 and self.pending == 0:
            raise BarrierError(
                f"a TMA copy completed {num_bytes} bytes on {self.name}, but its phase {phase} "
                f"expected only {max(expected, 0)} more (every arrival is in, so nothing can "
                "announce the rest): more bytes completed than were expected"
            )
        self._complete_if_done()
        return phase

    def _complete_if_done(self) -> None:
        if self.pending == 0 and self.tx_count == 0:
            self.completed_phases += 1
            self.pending = self.arrival_count
            self.arrivals = []
            self.completed_clock = self._released.copy()
            self.completed_clock.advance(self.key, self.completed_phases)

    def describe(self) -> str:
        """The state a deadlock report shows."""
        phase = self.current_phase
        if self.tx_count >= 0:
            tx = f"{self.tx_count} tx bytes still expected"
        else:
            tx = f"{-self.tx_count} tx bytes completed before being expected"
        came = "; ".join(self.arrivals) if self.arrivals else "none"
        return (
            f"phase {phase} (parity {phase & 1}) incomplete, {self.pending} of "
            f"{self.arrival_count} arrivals pending, {tx}; the phase expects {self.arrival_count} "
            f"arrival(s) (its arrival_count) and got {self.arrival_count - self.pending}: {came}"
        )
