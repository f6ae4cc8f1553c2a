"""Reading a GPU profile buffer back (`asyncdsl.hw.profile.decode_records`), on buffers written
here the way the lowering's stores write them."""

from __future__ import annotations

import numpy as np
import pytest

from asyncdsl.hw import profile as layout

CAPACITY = 4
NS_PER_CYCLE = 0.5  # a 2 GHz SM clock


def write_record(words, index, *, cta, warpgroup, sm, entry_ns, entry_clock, cycles, events, recorded=None):
    """Fill record `index` as a warpgroup would: header stores at entry and exit, then one
    (tag, low clock word) per event that fits; `events` are (region, exit, cycles after entry)."""
    base = index * (layout.record_bytes(CAPACITY) // 4)
    wide = np.array([entry_ns, entry_clock, entry_ns + int(cycles * NS_PER_CYCLE), entry_clock + cycles],
                    dtype=np.uint64)
    words[base : base + 8] = wide.view(np.uint32)
    words[base + layout.SM_ID // 4] = sm
    words[base + layout.CTA_ID // 4] = cta
    words[base + layout.WARPGROUP // 4] = warpgroup
    words[base + layout.EVENT_COUNT // 4] = len(events) if recorded is None else recorded
    for slot, (region, exit, after) in enumerate(events[:CAPACITY]):
        at = base + layout.HEADER_WORDS + 2 * slot
        words[at] = layout.tag(region, exit)
        words[at + 1] = (entry_clock + after) & 0xFFFFFFFF


def buffer(ctas=2, warpgroups=2):
    return np.zeros(layout.buffer_bytes(CAPACITY, ctas, warpgroups) // 4, dtype=np.uint32)


def test_records_come_back_on_one_nanosecond_time_base():
    words = buffer()
    start = 1_790_000_000_123_456_789  # a start value beyond float64's exact integers
    for index in range(4):
        cta, warpgroup = divmod(index, 2)
        # Each CTA on its own SM (its own cycle counter); its second warpgroup enters 100 ns later.
        write_record(words, index, cta=cta, warpgroup=warpgroup, sm=10 + cta,
                     entry_ns=start + 300 * cta + 100 * warpgroup,
                     entry_clock=10**6 * (cta + 1) + 200 * warpgroup, cycles=2_000,
                     events=[(0, False, 200), (1, False, 400), (1, True, 600), (0, True, 1_000)])
    records = layout.decode_records(words, CAPACITY, 2, 2)
    assert [(r.cta, r.warpgroup, r.sm) for r in records] == [(0, 0, 10), (0, 1, 10), (1, 0, 11), (1, 1, 11)]
    last = records[3]
    assert last.start == 400 and last.end == 400 + 1_000  # relative to the earliest entry
    assert [(e.region, e.exit, e.time) for e in last.events] == [
        (0, False, 500.0), (1, False, 600.0), (1, True, 700.0), (0, True, 900.0)]
    assert last.recorded == 4


def test_the_warpgroups_of_a_cta_share_its_cycle_counter():
    """A coarse %globaltimer must not reorder a producer's and a consumer's events: within a CTA
    times come from the SM's cycle counter, anchored once."""
    words = buffer(1, 2)
    start = 1_790_000_000_000_000_000
    # Both warpgroups read the same timer value (it ticked coarsely), 400 cycles apart on the SM.
    write_record(words, 0, cta=0, warpgroup=0, sm=1, entry_ns=start, entry_clock=1_000, cycles=10_000,
                 events=[(0, False, 100), (0, True, 500)])
    write_record(words, 1, cta=0, warpgroup=1, sm=1, entry_ns=start, entry_clock=1_400, cycles=10_000,
                 events=[(1, False, 150), (1, True, 300)])
    first, second = layout.decode_records(words, CAPACITY, 1, 2)
    assert second.start == 200.0  # 400 cycles after the first, not at the same timer value
    assert first.events[1].time < second.events[0].time  # cycle 1_500 before cycle 1_550


def test_the_low_clock_word_is_unwrapped_in_program_order():
    words = buffer(1, 1)
    entry_clock = 2**32 - 100  # the low word wraps between the first and second event
    write_record(words, 0, cta=0, warpgroup=0, sm=0, entry_ns=10**12, entry_clock=entry_clock, cycles=2**33,
                 events=[(0, False, 50), (0, True, 150), (0, False, 2**32 + 10), (0, True, 2**32 + 500)])
    (record,) = layout.decode_records(words, CAPACITY, 1, 1)
    assert [e.time for e in record.events] == [c * NS_PER_CYCLE for c in (50, 150, 2**32 + 10, 2**32 + 500)]


def test_dropped_events_are_counted_and_not_read():
    words = buffer(1, 1)
    events = [(0, exit, 10 * i) for i, exit in enumerate([False, True] * 4)]
    write_record(words, 0, cta=0, warpgroup=0, sm=3, entry_ns=10**12, entry_clock=0, cycles=1_000,
                 events=events)
    (record,) = layout.decode_records(words, CAPACITY, 1, 1)
    assert record.recorded == 8 and len(record.events) == CAPACITY


def test_a_record_the_kernel_did_not_write_is_reported():
    words = buffer(1, 2)
    write_record(words, 0, cta=0, warpgroup=0, sm=0, entry_ns=10**12, entry_clock=0, cycles=10, events=[])
    with pytest.raises(ValueError, match=r"record 1 \(CTA 0, warpgroup 1\) was not written"):
        layout.decode_records(words, CAPACITY, 1, 2)


def test_records_keep_64_bit_fields_aligned():
    for capacity in (1, 2, 3, 1024):
        assert layout.record_bytes(capacity) % 8 == 0
    assert (layout.ENTRY_TIMER % 8 == layout.ENTRY_CLOCK % 8 == layout.EXIT_TIMER % 8
            == layout.EXIT_CLOCK % 8 == 0)
    assert layout.EVENTS % 8 == 0  # events are stored as 8-byte vectors
