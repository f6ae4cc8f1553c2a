"""Shared-memory races between warpgroups and the copy engine.

The interpreter completes every async copy when it is issued (see `asyncdsl.interpret`), so a
race never shows up in the data; it shows up here instead.  Each async access leaves a record
over the SMEM byte range it touched, with the event after which it is over:

- a TMA load's write is over when its mbarrier phase has completed: whoever reads those bytes,
  or writes them again, must know that phase (`clocks.barrier_key`);
- a TMA store's read is over when the issuing warpgroup's `await_async_copy` has retired its
  bulk group: whoever writes those bytes must know that (`clocks.bulk_key`).

"Know" is the happens-before of `clocks`: waiting on the barrier oneself, or synchronising with
someone who did.  Byte ranges are intervals: buffers and their views never interleave, and a
swizzled box stays inside the rows it pads.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from asyncdsl.errors import RaceError
from asyncdsl.interpret.clocks import VectorClock


@dataclass(frozen=True)
class AsyncWrite:
    """SMEM bytes [start, end) landed by the TMA load at `origin` in `phase` of a barrier."""

    start: int
    end: int
    barrier_key: Hashable
    phase: int
    barrier_name: str
    origin: str

    def over_for(self, clock: VectorClock) -> bool:
        return clock.knows(self.barrier_key, self.phase + 1)


@dataclass(frozen=True)
class AsyncRead:
    """SMEM bytes [start, end) read by the TMA store at `origin`, in bulk group `group`."""

    start: int
    end: int
    bulk_key: Hashable
    group: int
    issuer: str
    origin: str

    def over_for(self, clock: VectorClock) -> bool:
        return clock.knows(self.bulk_key, self.group)


class AsyncAccessLog:
    """The async accesses to one CTA's shared memory that some warpgroup may not know are over."""

    def __init__(self):
        self._writes: list[AsyncWrite] = []
        self._reads: list[AsyncRead] = []

    def check_read(self, start: int, end: int, clock: VectorClock, what: str) -> None:
        """`what` (by a warpgroup knowing `clock`) reads [start, end): loads must have landed."""
        for write in self._writes:
            if write.start < end and start < write.end and not write.over_for(clock):
                raise RaceError(
                    f"{what} reads shared memory bytes [{max(start, write.start)}, "
                    f"{min(end, write.end)}) that the TMA load at {write.origin} writes "
                    f"asynchronously, before waiting for phase {write.phase} of {write.barrier_name} "
                    "that the load completes on (wait on that barrier first, or synchronise with "
                    "a warpgroup that did)"
                )

    def check_write(self, start: int, end: int, clock: VectorClock, what: str) -> None:
        """`what` writes [start, end): earlier loads must have landed, stores must have read."""
        for read in self._reads:
            if read.start < end and start < read.end and not read.over_for(clock):
                raise RaceError(
                    f"{what} overwrites shared memory bytes [{max(start, read.start)}, "
                    f"{min(end, read.end)}) that the TMA store at {read.origin} ({read.issuer}) "
                    "may still be reading: that warpgroup's await_async_copy has not retired the "
                    "store's bulk group before this write (read_only=True suffices)"
                )
        for write in self._writes:
            if write.start < end and start < write.end and not write.over_for(clock):
                raise RaceError(
                    f"{what} writes shared memory bytes [{max(start, write.start)}, "
                    f"{min(end, write.end)}) that the TMA load at {write.origin} may still be "
                    f"writing: wait for phase {write.phase} of {write.barrier_name} first"
                )

    def record_write(self, write: AsyncWrite) -> None:
        # Accesses the new write covers are over for everyone who passed check_write, and the
        # bytes now hold the new write's data: only the new record matters there.
        self._writes = [w for w in self._writes if not _covers(write, w)]
        self._reads = [r for r in self._reads if not _covers(write, r)]
        self._writes.append(write)

    def record_read(self, read: AsyncRead) -> None:
        # A later group of the same warpgroup retires after (and so implies) an earlier one.
        self._reads = [
            r for r in self._reads if not (_covers(read, r) and r.bulk_key == read.bulk_key)
        ]
        self._reads.append(read)


def _covers(outer, inner) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end
