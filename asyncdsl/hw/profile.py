"""The on-device profiler's buffer: what one warpgroup writes, and reading it back.

A profiled kernel takes one GMEM buffer holding a record per (CTA, warpgroup), in the order
`cta * warpgroups_per_cta + warpgroup` (CTAs linear, x fastest).  The warpgroup's leader thread
writes it: a header at kernel entry and exit, and one event per region entry or exit.  Counts are
u32 words, little-endian:

    word  0-1   %globaltimer at kernel entry (ns, u64)
    word  2-3   %clock64 at kernel entry (SM cycles, u64)
    word  4-5   %globaltimer at exit
    word  6-7   %clock64 at exit
    word  8     %smid
    word  9     linear CTA id
    word 10     warpgroup index
    word 11     events the warpgroup recorded, dropped ones included
    word 12...  events: (tag, %clock low 32 bits); tag = region number + (exit << 31)

An event past the record's capacity is counted and dropped, never written: the buffer is never
written past its end, and the host reports the overflow.  Events carry cycles because reading
%clock costs one instruction; the entry/exit pairs turn cycles into nanoseconds on the one time
base %globaltimer gives every SM (docs/hardware.md §15).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

HEADER_WORDS = 12
EVENT_WORDS = 2
EXIT_BIT = 1 << 31
MAX_REGION_NAMES = EXIT_BIT  # region numbers are the tag's low 31 bits
MAX_EVENTS_PER_WARPGROUP = 2**27  # keeps a record's byte size and the event count in 32 bits
DEFAULT_EVENTS_PER_WARPGROUP = 1024

# Byte offsets of the header fields (the lowering writes them, `decode_records` reads them).
ENTRY_TIMER, ENTRY_CLOCK, EXIT_TIMER, EXIT_CLOCK = 0, 8, 16, 24
SM_ID, CTA_ID, WARPGROUP, EVENT_COUNT = 32, 36, 40, 44
EVENTS = 4 * HEADER_WORDS


def record_bytes(events_per_warpgroup: int) -> int:
    """The bytes of one (CTA, warpgroup) record: a multiple of 8, so 64-bit fields stay aligned."""
    return 4 * (HEADER_WORDS + EVENT_WORDS * events_per_warpgroup)


def buffer_bytes(events_per_warpgroup: int, ctas: int, warpgroups_per_cta: int) -> int:
    return record_bytes(events_per_warpgroup) * ctas * warpgroups_per_cta


def tag(region: int, exit: bool) -> int:
    """The first word of an event: which region, and whether the warpgroup enters or leaves it."""
    return region | (EXIT_BIT if exit else 0)


class RegionEvent(NamedTuple):
    """A warpgroup entering (`exit` False) or leaving region number `region` at `time`."""

    region: int
    exit: bool
    time: float


class EventColumns(Sequence):
    """A record's events as three arrays, region numbers, exit flags and times, in program order:
    what the GPU decoder makes (a GEMM's profile holds millions of events, too many to make an
    object each); indexing gives `RegionEvent`s.  `of` turns any sequence of events into one."""

    def __init__(self, regions: np.ndarray, exits: np.ndarray, times: np.ndarray):
        self.regions, self.exits, self.times = regions, exits, times

    @staticmethod
    def of(events: Sequence[RegionEvent]) -> EventColumns:
        if isinstance(events, EventColumns):
            return events
        return EventColumns(np.array([e.region for e in events], dtype=np.int64),
                            np.array([e.exit for e in events], dtype=bool),
                            np.array([e.time for e in events], dtype=np.float64))

    def __len__(self) -> int:
        return len(self.regions)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return RegionEvent(int(self.regions[index]), bool(self.exits[index]), float(self.times[index]))


@dataclass(frozen=True)
class WarpgroupRecord:
    """What one warpgroup of one CTA recorded, its times in the profile's unit (ns on the GPU,
    logical ticks in the interpreter).  `recorded` counts every event the warpgroup reached,
    also those dropped past the capacity (then it exceeds `len(events)`)."""

    cta: int
    warpgroup: int
    sm: int | None  # None in the interpreter, which has no SMs
    start: float
    end: float
    events: Sequence[RegionEvent]  # a tuple, or the decoder's `EventColumns`
    recorded: int


def _record_table(words: np.ndarray, events_per_warpgroup: int, records: int) -> np.ndarray:
    """A GPU buffer's u32 words as one row per (CTA, warpgroup) record."""
    per_record = HEADER_WORDS + EVENT_WORDS * events_per_warpgroup
    return np.asarray(words, dtype=np.uint32)[: per_record * records].reshape(records, per_record)


def recorded_counts(words: np.ndarray, events_per_warpgroup: int, ctas: int,
                    warpgroups_per_cta: int) -> np.ndarray:
    """How many region events each (CTA, warpgroup) record of a GPU buffer reached, dropped ones
    included, in record order: read off the headers alone, without decoding the events."""
    table = _record_table(words, events_per_warpgroup, ctas * warpgroups_per_cta)
    return table[:, EVENT_COUNT // 4].astype(np.int64)


def decode_records(
    words: np.ndarray, events_per_warpgroup: int, ctas: int, warpgroups_per_cta: int
) -> list[WarpgroupRecord]:
    """The records of a GPU buffer (u32 `words`), on one nanosecond time base starting at 0, the
    earliest kernel entry of any warpgroup.

    Cycles become nanoseconds at one rate for the whole launch, total nanoseconds over total
    cycles of every warpgroup's lifetime: the SMs share one clock frequency, and pooling keeps the
    rate accurate when %globaltimer ticks coarsely on short-lived warpgroups.  The warpgroups of a
    CTA share one SM and its cycle counter, so they share one anchor on the nanosecond base (the
    first of them to enter): their events order exactly as the SM saw them, which a producer and
    its consumers are compared by.  A record whose header does not name its own CTA and warpgroup
    means the kernel did not write it (ValueError: a lowering bug, never the user's)."""
    count = ctas * warpgroups_per_cta
    table = _record_table(words, events_per_warpgroup, count)
    # entry timer, entry clock, exit timer, exit clock
    wide = table[:, :8].copy().view(np.uint64).astype(np.int64)
    for index in range(count):
        cta, warpgroup = divmod(index, warpgroups_per_cta)
        if ((int(table[index, CTA_ID // 4]), int(table[index, WARPGROUP // 4])) != (cta, warpgroup)
                or wide[index, 0] == 0):
            raise ValueError(
                f"profile record {index} (CTA {cta}, warpgroup {warpgroup}) was not written by the kernel")
    cycles = int((wide[:, 3] - wide[:, 1]).sum())
    ns_per_cycle = float((wide[:, 2] - wide[:, 0]).sum()) / cycles if cycles > 0 else 0.0
    first = wide[:, 1].reshape(ctas, warpgroups_per_cta).argmin(axis=1)  # each CTA's first warpgroup in
    anchors = wide[np.arange(ctas) * warpgroups_per_cta + first][:, :2]  # its (timer, clock) at entry
    # %globaltimer's start value is not stated and may exceed float64's exact integers: subtract
    # it in integers before going to floats (docs/hardware.md §15).
    base_ns = int(anchors[:, 0].min())

    def nanoseconds(cta: int, clock: int) -> float:
        anchor_ns, anchor_clock = anchors[cta]
        return float(int(anchor_ns) - base_ns) + (clock - int(anchor_clock)) * ns_per_cycle

    origin = min(nanoseconds(index // warpgroups_per_cta, int(wide[index, 1])) for index in range(count))
    records = []
    for index in range(count):
        row = table[index]
        cta, warpgroup = divmod(index, warpgroups_per_cta)
        recorded = int(row[EVENT_COUNT // 4])
        entry_clock = int(wide[index, 1])
        kept = min(recorded, events_per_warpgroup)
        tags = row[HEADER_WORDS:HEADER_WORDS + 2 * kept:2]
        stamps = row[HEADER_WORDS + 1:HEADER_WORDS + 2 * kept:2].astype(np.int64)
        # Events are in program order, so each clock follows the last one: unwrap the low words.
        previous = np.concatenate(([entry_clock & 0xFFFFFFFF], stamps[:-1]))
        clocks = entry_clock + np.cumsum((stamps - previous) & 0xFFFFFFFF)
        anchor_ns, anchor_clock = anchors[cta]
        times = float(int(anchor_ns) - base_ns) + (clocks - int(anchor_clock)) * ns_per_cycle - origin
        events = EventColumns((tags & ~np.uint32(EXIT_BIT)).astype(np.int64),
                              (tags >> 31).astype(bool), times)
        records.append(WarpgroupRecord(
            cta, warpgroup, int(row[SM_ID // 4]), nanoseconds(cta, entry_clock) - origin,
            nanoseconds(cta, int(wide[index, 3])) - origin, events, recorded,
        ))
    return records
