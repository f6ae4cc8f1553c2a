"""`Profile`: the summary table, the Chrome/Perfetto trace it saves, the timeline it draws."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profile_kernels import specialized_copy
from support import examples, random_bits

import asyncdsl as ad
from asyncdsl.hw.profile import RegionEvent, WarpgroupRecord
from asyncdsl.jit.profile_report import Profile

# The parts of the Trace Event Format (the JSON chrome://tracing and ui.perfetto.dev read) this
# trace uses: complete events with microsecond times, and metadata naming processes and threads.
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents", "displayTimeUnit"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["ph", "name", "pid", "tid"],
                "properties": {"pid": {"type": "integer"}, "tid": {"type": "integer"},
                               "name": {"type": "string"}},
                "oneOf": [
                    {"properties": {"ph": {"const": "X"}, "ts": {"type": "number", "minimum": 0},
                                    "dur": {"type": "number", "minimum": 0}, "cat": {"type": "string"},
                                    "args": {"type": "object"}},
                     "required": ["ts", "dur"]},
                    {"properties": {"ph": {"const": "M"}, "name": {"enum": ["process_name", "thread_name"]},
                                    "args": {"type": "object", "required": ["name"]}},
                     "required": ["args"]},
                ],
            },
        },
    },
}


@pytest.fixture(scope="module")
def interpreted():
    x = random_bits((64, 128), ad.float32)
    return specialized_copy.interpret_profile(x, np.zeros_like(x), B=32)


def gpu_like() -> Profile:
    """A profile as decoded from a GPU buffer: two SMs, nanoseconds, CUDA-event time."""
    records = [
        WarpgroupRecord(0, 0, 7, 0.0, 1000.0, (RegionEvent(0, False, 100.0), RegionEvent(1, False, 200.0),
                                               RegionEvent(1, True, 300.0), RegionEvent(0, True, 900.0)), 4),
        WarpgroupRecord(1, 0, 9, 50.0, 1200.0, (RegionEvent(1, False, 60.0), RegionEvent(1, True, 460.0)), 2),
    ]
    return Profile("k", ("outer", "inner"), records, "ns", 1, event_ns=1250.0)


def test_the_chrome_trace_follows_the_trace_event_format(interpreted, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    written = interpreted.save(tmp_path / "k.trace.json")
    assert written[0] == tmp_path / "k.trace.json"
    trace = json.loads(written[0].read_text())
    jsonschema.validate(trace, TRACE_SCHEMA)
    jsonschema.validate(gpu_like().chrome_trace(), TRACE_SCHEMA)


def test_a_trace_is_saved_into_folders_that_do_not_exist_yet(interpreted, tmp_path):
    path = tmp_path / "traces" / "today" / "k.trace.json"
    assert interpreted.save(path)[0] == path
    assert json.loads(path.read_text())["traceEvents"]


def test_the_chrome_trace_has_a_track_per_warpgroup_with_nested_slices(interpreted):
    trace = interpreted.chrome_trace()
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    by_track = {}
    for event in slices:
        by_track.setdefault((event["pid"], event["tid"]), []).append(event)
    assert len(by_track) == 4  # 2 CTAs x 2 warpgroups
    for events in by_track.values():
        kernel = [e for e in events if e["cat"] == "kernel"]
        assert len(kernel) == 1 and kernel[0]["name"] == "specialized_copy"
        outer = kernel[0]
        for event in events:
            if event["cat"] == "region":
                assert outer["ts"] <= event["ts"] and event["ts"] + event["dur"] <= outer["ts"] + outer["dur"]
                assert event["args"]["depth"] == 1
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"CTA 0", "CTA 1", "CTA 0 warpgroup 1"} <= names
    assert trace["otherData"]["clock"].startswith("interpreter ticks")


def test_a_gpu_trace_puts_warpgroups_under_their_sm_in_microseconds():
    trace = gpu_like().chrome_trace()
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in slices} == {7, 9}
    inner = next(e for e in slices if e["name"] == "inner" and e["pid"] == 7)
    assert inner["ts"] == 0.2 and inner["dur"] == 0.1 and inner["args"]["depth"] == 2
    assert trace["otherData"]["cuda_event_ns"] == 1250.0


def test_the_native_perfetto_trace_balances_its_slices(interpreted, tmp_path):
    pytest.importorskip("perfetto.trace_builder.proto_builder")
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    written = interpreted.save(tmp_path / "k.trace.json")
    assert written[1] == tmp_path / "k.trace.pftrace"
    trace = Trace.FromString(written[1].read_bytes())
    depth = {}
    for packet in trace.packet:
        if packet.HasField("track_event"):
            uuid = packet.track_event.track_uuid
            depth[uuid] = (depth.get(uuid, 0)
                           + (1 if packet.track_event.type == TrackEvent.TYPE_SLICE_BEGIN else -1))
            assert depth[uuid] >= 0
    assert len(depth) == 4 and set(depth.values()) == {0}


def test_the_summary_has_a_row_per_region_and_role(interpreted):
    rows = {(row["region"], row["warpgroup"]): row for row in interpreted.summary_rows()}
    assert set(rows) == {("wait slot", 0), ("load", 0), ("wait tile", 1), ("store", 1)}
    assert all(row["count"] == 8 for row in rows.values())  # 4 tiles x 2 CTAs
    assert all(0 < row["share"] < 1 and row["p50"] <= row["p99"] for row in rows.values())
    text = interpreted.summary(file=io.StringIO())
    assert "wait slot" in text and "ticks" in text


def test_a_gpu_summary_is_in_microseconds_and_shows_the_cuda_event_time():
    profile = gpu_like()
    text = profile.summary(file=io.StringIO())
    assert "1.200 us from first entry to last exit" in text and "1.250 us between CUDA events" in text
    inner = next(row for row in profile.summary_rows() if row["region"] == "inner")
    assert inner["count"] == 2 and inner["mean"] == 250.0
    assert inner["share"] == pytest.approx(500.0 / 2150.0)


def test_regions_that_do_not_nest_are_a_bug_not_a_trace():
    crossed = WarpgroupRecord(0, 0, 0, 0.0, 10.0, (RegionEvent(0, False, 1.0), RegionEvent(1, False, 2.0),
                                                   RegionEvent(0, True, 3.0), RegionEvent(1, True, 4.0)), 4)
    with pytest.raises(ValueError, match="not the innermost open region"):
        Profile("k", ("a", "b"), [crossed], "ns", 1).summary_rows()


def test_a_profile_decodes_its_records_only_when_its_regions_are_looked_at():
    decoded = []

    def records():
        decoded.append(True)
        return [
            WarpgroupRecord(0, 0, 3, 0.0, 10.0, (RegionEvent(0, False, 1.0), RegionEvent(0, True, 4.0)), 2)]

    profile = Profile("k", ("a",), records, "ns", 1, event_ns=12.0)
    assert profile.event_ns == 12.0 and not decoded
    assert [(span.name, span.start, span.end) for span in profile.spans] == [("a", 1.0, 4.0)]
    assert profile.total == 10.0 and len(decoded) == 1  # decoded once


def test_plot_draws_a_timeline(interpreted, tmp_path):
    pytest.importorskip("matplotlib")
    path = interpreted.plot(tmp_path / "timeline.png", sms=1)
    assert path.read_bytes().startswith(b"\x89PNG")


def test_plot_draws_only_the_window_asked_for(interpreted, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    drawn = []
    real_barh = plt.Axes.barh

    def barh(axes, *args, **kwargs):
        drawn.append(kwargs.get("left"))
        return real_barh(axes, *args, **kwargs)

    plt.Axes.barh = barh
    try:
        interpreted.plot(tmp_path / "all.png", sms=1)
        everything = len(drawn)
        drawn.clear()
        interpreted.plot(tmp_path / "window.png", sms=1, window=(0.0, 1.0))
    finally:
        plt.Axes.barh = real_barh
    assert 0 < len(drawn) < everything
    with pytest.raises(ad.ArgumentError, match="window must be"):
        interpreted.plot(tmp_path / "bad.png", window=(5.0, 5.0))


def test_a_windowed_plot_shows_only_the_warpgroups_alive_in_it(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    # Two CTAs one after the other on SM 0, in ns: a window over the second shows its track only.
    spans = (RegionEvent(0, False, 1000.0), RegionEvent(0, True, 2000.0))
    records = [WarpgroupRecord(0, 0, 0, 0.0, 5000.0, spans, 2),
               WarpgroupRecord(1, 0, 0, 6000.0, 9000.0,
                               tuple(RegionEvent(0, e.exit, e.time + 6000.0) for e in spans), 2)]
    profile = Profile("k", ("a",), records, "ns", 1)
    labels = []
    real = plt.Axes.set_yticklabels

    def set_yticklabels(axes, names, **kwargs):
        labels.append(list(names))
        return real(axes, names, **kwargs)

    plt.Axes.set_yticklabels = set_yticklabels
    try:
        profile.plot(tmp_path / "window.png", sms=1, window=(6.5, 8.0))
        profile.plot(tmp_path / "all.png", sms=1)
    finally:
        plt.Axes.set_yticklabels = real
    assert labels == [["SM 0 · CTA 1 warpgroup 0"], ["SM 0 · CTA 0 warpgroup 0", "SM 0 · CTA 1 warpgroup 0"]]


def _stack_spans(events):
    """The spans of a record by the obvious stack walk: (region, start, end, depth), by start."""
    spans, open_regions = [], []
    for event in events:
        if not event.exit:
            open_regions.append(event)
            continue
        if not open_regions or open_regions[-1].region != event.region:
            return None
        begin = open_regions.pop()
        spans.append((begin.region, begin.time, event.time, len(open_regions)))
    return None if open_regions else sorted(spans, key=lambda span: (span[1], span[3]))


@st.composite
def _event_sequences(draw):
    """Events of a warpgroup: well nested (regions in regions, 3 names), sometimes with one event
    changed (a region left open, closed twice or under another name), times non-decreasing."""
    events, stack, time = [], [], 0.0
    for _ in range(draw(st.integers(0, 40))):
        time += draw(st.sampled_from([0.0, 1.0, 2.5]))
        if stack and draw(st.booleans()):
            events.append(RegionEvent(stack.pop(), True, time))
        else:
            region = draw(st.integers(0, 2))
            stack.append(region)
            events.append(RegionEvent(region, False, time))
    while stack:
        time += 1.0
        events.append(RegionEvent(stack.pop(), True, time))
    if events and draw(st.booleans()):
        index = draw(st.integers(0, len(events) - 1))
        region, exit, at = events[index]
        events[index] = draw(
            st.sampled_from([RegionEvent((region + 1) % 3, exit, at), RegionEvent(region, not exit, at)]))
    return events


@given(_event_sequences())
@settings(max_examples=examples(300), deadline=None)
def test_the_array_pairing_of_events_is_the_stack_walks(events):
    record = WarpgroupRecord(0, 1, 0, 0.0, 1000.0, tuple(events), len(events))
    expected = _stack_spans(events)
    profile = Profile("k", ("a", "b", "c"), [record], "ns", 2)
    if expected is None:
        with pytest.raises(ValueError, match="innermost open region|left open"):
            profile.summary_rows()
        return
    (track,) = profile.tracks
    spans = [(("a", "b", "c").index(s.name), s.start, s.end, s.depth) for s in profile.spans_of(track)]
    assert sorted(spans, key=lambda span: (span[1], span[3])) == expected
    assert [(s[1], s[3]) for s in spans] == [(e[1], e[3]) for e in expected]  # ordered by start, then depth


def test_a_trace_of_the_first_sms_only(interpreted, tmp_path):
    everything = interpreted.chrome_trace()["traceEvents"]
    first = interpreted.chrome_trace(sms=1)["traceEvents"]
    assert {e["pid"] for e in everything} == {0, 1} and {e["pid"] for e in first} == {0}
    assert [e for e in everything if e["pid"] == 0] == first
    (path, *_) = interpreted.save(tmp_path / "first.json", sms=1)
    assert json.loads(path.read_text())["traceEvents"] == first
    with pytest.raises(ad.ArgumentError, match="sms must be"):
        interpreted.chrome_trace(sms=0)
