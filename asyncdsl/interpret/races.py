"""Shared-memory races between warpgroups (their register-tile loads and stores) and the copy engine.

The interpreter completes every async copy when it is issued (see `asyncdsl.interpret`), so a
race never shows up in the data; it shows up here instead.  Each async access leaves a record
over the SMEM byte range it touched, with the event after which it is over:

- a TMA load's write is over when its mbarrier phase has completed: whoever reads those bytes,
  or writes them again, must know that phase (`clocks.barrier_key`);
- a TMA store's read is over when the issuing warpgroup's `await_async_copy` has retired its
  bulk group: whoever writes those bytes must know that (`clocks.bulk_key`);
- a cp.async write (`GenericWrite`) is over when its commit group has been awaited or its
  mbarrier phase has completed; it is made through the generic proxy, so the async proxy (TMA
  and bulk copies) must also know of a proxy fence (`fence_async_smem`) made after that by a
  warpgroup that knew the write was over;
- a register-tile store (`ld/st.shared`, also a `GenericWrite`) is over at once for the
  warpgroup that made it and for whoever synchronises with that warpgroup afterwards
  (`clocks.shared_access_key`), and needs the same proxy fence before async-proxy use; a
  register-tile load (`GenericRead`) is over alike, and whoever overwrites the bytes (a TMA load
  into the same buffer, say) must know it.  Generic-proxy accesses need no fence between them.

"Know" is the happens-before of `clocks`: waiting on the barrier oneself, or synchronising with
someone who did.  Byte ranges are intervals: buffers and their views never interleave, and a
swizzled box stays inside the rows it pads.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from asyncdsl.errors import RaceError, SourceLocation
from asyncdsl.interpret.clocks import VectorClock


@dataclass(frozen=True)
class AsyncWrite:
    """SMEM bytes [start, end) landed by the `copy` (a TMA load, a bulk copy, ...) at `origin`
    in `phase` of a barrier."""

    start: int
    end: int
    barrier_key: Hashable
    phase: int
    barrier_name: str
    origin: str
    copy: str = "TMA load"
    location: SourceLocation | None = field(default=None, compare=False)  # `origin`, for errors

    def over_for(self, clock: VectorClock) -> bool:
        return clock.knows(self.barrier_key, self.phase + 1)

    def read_too_early(self, what: str, start: int, end: int, clock: VectorClock) -> str:
        return (
            f"{what} reads shared memory bytes [{start}, {end}) that the {self.copy} at "
            f"{self.origin} writes asynchronously, before waiting for phase {self.phase} of "
            f"{self.barrier_name} that the load completes on (wait on that barrier first, or "
            "synchronise with a warpgroup that did)"
        )

    def overwritten_too_early(self, what: str, start: int, end: int, clock: VectorClock) -> str:
        return (
            f"{what} writes shared memory bytes [{start}, {end}) that the {self.copy} at "
            f"{self.origin} may still be writing: wait for phase {self.phase} of "
            f"{self.barrier_name} first"
        )


@dataclass
class GenericWrite:
    """SMEM bytes [start, end) written through the generic proxy by the `writer` (a cp.async
    copy, a register-tile store) at `origin`; it is over once `done_key` counts `done` (its
    commit group awaited, its barrier phase completed, the store made: `how` says what to wait
    for, for messages).  `fenced` is the proxy fence (key, count) after which the async proxy
    may use the bytes, once a warpgroup made one."""

    start: int
    end: int
    done_key: Hashable
    done: int
    how: str
    origin: str
    fenced: tuple[Hashable, int] | None = None
    writer: str = "cp.async copy"

    def done_for(self, clock: VectorClock) -> bool:
        return clock.knows(self.done_key, self.done)

    def over_for(self, clock: VectorClock) -> bool:
        """Over for the async proxy: done, then fenced."""
        return self.done_for(clock) and self.fenced is not None and clock.knows(*self.fenced)

    def _advice(self, clock: VectorClock) -> str:
        if not self.done_for(clock):
            return f"{self.how} first"
        return f"the {self.writer} is over, but fence_async_smem() must order it before async-proxy use"

    def read_too_early(self, what: str, start: int, end: int, clock: VectorClock) -> str:
        return (
            f"{what} reads shared memory bytes [{start}, {end}) that the {self.writer} at "
            f"{self.origin} writes through the generic proxy: {self._advice(clock)}"
        )

    def overwritten_too_early(self, what: str, start: int, end: int, clock: VectorClock) -> str:
        return (
            f"{what} writes shared memory bytes [{start}, {end}) that the {self.writer} at "
            f"{self.origin} may still be writing: {self._advice(clock)}"
        )


@dataclass(frozen=True)
class AsyncRead:
    """SMEM bytes [start, end) read by the `copy` (a TMA store, a bulk store) at `origin`, in
    bulk group `group`."""

    start: int
    end: int
    bulk_key: Hashable
    group: int
    issuer: str
    origin: str
    copy: str = "TMA store"

    @property
    def key(self) -> Hashable:
        return self.bulk_key

    def over_for(self, clock: VectorClock) -> bool:
        return clock.knows(self.bulk_key, self.group)

    def overwritten_too_early(self, what: str, start: int, end: int) -> str:
        return (
            f"{what} overwrites shared memory bytes [{start}, {end}) that the {self.copy} at "
            f"{self.origin} ({self.issuer}) may still be reading: that warpgroup's "
            "await_async_copy has not retired the store's bulk group before this write "
            "(read_only=True suffices)"
        )


@dataclass(frozen=True)
class GenericRead:
    """SMEM bytes [start, end) read into registers by `reader` at `origin`: its `count`-th
    access counted under `key` (`clocks.shared_access_key`), over for whoever knows that."""

    start: int
    end: int
    key: Hashable
    count: int
    reader: str
    origin: str

    def over_for(self, clock: VectorClock) -> bool:
        return clock.knows(self.key, self.count)

    def overwritten_too_early(self, what: str, start: int, end: int) -> str:
        return (
            f"{what} overwrites shared memory bytes [{start}, {end}) that {self.reader} reads "
            f"into registers at {self.origin}: synchronise with that warpgroup after its read "
            "first (a CTA barrier, or an mbarrier it arrives on)"
        )


@dataclass(frozen=True)
class WgmmaRead(GenericRead):
    """SMEM bytes an operand of the wgmma at `origin` reads: over as a register read is, except
    that `count` numbers the issuing warpgroup's wgmma groups (`clocks.wgmma_key`), which a
    `wgmma_wait` retires."""

    def overwritten_too_early(self, what: str, start: int, end: int) -> str:
        return (
            f"{what} overwrites shared memory bytes [{start}, {end}) that the wgmma at {self.origin} "
            f"({self.reader}) may still be reading: release the buffer only after a wgmma_wait that "
            "retires that wgmma"
        )


class AsyncAccessLog:
    """The async accesses to one CTA's shared memory, and the generic-proxy ones (cp.async,
    register tiles), that some warpgroup may not know are over."""

    def __init__(self):
        self._writes: list[AsyncWrite | GenericWrite] = []
        self._reads: list[AsyncRead | GenericRead] = []

    def check_read(self, start: int, end: int, clock: VectorClock, what: str, generic: bool = False) -> None:
        """`what` (by a warpgroup knowing `clock`) reads [start, end): loads must have landed.
        A `generic`-proxy reader (ld.shared) needs no proxy fence after a generic write."""
        for write in self._writes:
            # The same proxy: a generic write is done for a generic reader without a fence.
            over = (write.done_for(clock) if generic and isinstance(write, GenericWrite)
                    else write.over_for(clock))
            if write.start < end and start < write.end and not over:
                overlap = (max(start, write.start), min(end, write.end))
                raise RaceError(write.read_too_early(what, *overlap, clock))

    def check_write(self, start: int, end: int, clock: VectorClock, what: str, generic: bool = False) -> None:
        """`what` writes [start, end): earlier loads must have landed, stores must have read.
        A `generic`-proxy writer (cp.async, st.shared) needs no proxy fence after another one."""
        for read in self._reads:
            if read.start < end and start < read.end and not read.over_for(clock):
                raise RaceError(read.overwritten_too_early(what, max(start, read.start), min(end, read.end)))
        for write in self._writes:
            if write.start < end and start < write.end:
                if not (write.done_for(clock) if generic and isinstance(write, GenericWrite)
                        else write.over_for(clock)):
                    raise RaceError(
                        write.overwritten_too_early(what, max(start, write.start), min(end, write.end), clock)
                    )

    def fence_generic_writes(self, clock: VectorClock, fence: tuple[Hashable, int]) -> None:
        """A warpgroup knowing `clock` made the proxy fence `fence`: the generic writes it knows
        are over become usable by the async proxy for whoever knows the fence."""
        for write in self._writes:
            if isinstance(write, GenericWrite) and write.fenced is None and write.done_for(clock):
                write.fenced = fence

    def unlanded_load(self, clocks: Sequence[VectorClock]) -> AsyncWrite | None:
        """An async load into this CTA that none of `clocks` (its warpgroups at exit) knows has
        landed: one whose barrier phase nobody waited for."""
        for write in self._writes:
            if isinstance(write, AsyncWrite) and not any(write.over_for(clock) for clock in clocks):
                return write
        return None

    def record_write(self, write: AsyncWrite | GenericWrite) -> None:
        # Accesses the new write covers are over for everyone who passed check_write, and the
        # bytes now hold the new write's data: only the new record matters there.
        self._writes = [w for w in self._writes if not _covers(write, w)]
        self._reads = [r for r in self._reads if not _covers(write, r)]
        self._writes.append(write)

    def record_read(self, read: AsyncRead | GenericRead) -> None:
        # A later group (or access) of the same warpgroup is over after (and so implies) an
        # earlier one.
        self._reads = [r for r in self._reads if not (_covers(read, r) and r.key == read.key)]
        self._reads.append(read)


def _covers(outer, inner) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end
