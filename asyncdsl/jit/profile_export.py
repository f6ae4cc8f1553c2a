"""A `Profile` as files: Chrome trace JSON, Perfetto's native trace, a timeline picture.

The JSON is the Trace Event Format that chrome://tracing and ui.perfetto.dev read: complete events
(`"ph": "X"`, start `ts` and `dur` in microseconds) with metadata naming each process and thread.
A GPU profile puts each SM in a process (`pid` = SM id) and each warpgroup in a thread of it
(`tid` = CTA id × warpgroups per CTA + warpgroup); an interpreter profile has no SMs and puts each
CTA in a process.  Every track carries the warpgroup's whole kernel as its outermost slice, so
idle time shows, and the regions nest inside it.  Interpreter ticks are written as microseconds
(one tick each) and `otherData.clock` says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from asyncdsl.errors import ArgumentError, is_int

if TYPE_CHECKING:
    from asyncdsl.jit.profile_report import Profile, Track

_US_PER_UNIT = {"ns": 1e-3, "ticks": 1.0}


def _process(profile: Profile, track: Track) -> tuple[int, str]:
    if track.sm is None:
        return track.cta, f"CTA {track.cta}"
    return track.sm, f"SM {track.sm}"


def _thread(profile: Profile, track: Track) -> int:
    return track.cta * profile.warpgroups_per_cta + track.warpgroup


def shown_tracks(profile: Profile, sms: int | None) -> list[Track]:
    """The tracks on the first `sms` SMs (CTAs in the interpreter), all of them for None, in
    SM, CTA, warpgroup order."""
    if sms is not None and (not is_int(sms) or sms < 1):
        raise ArgumentError(f"sms must be a positive int (how many SMs to show) or None, got {sms!r}")
    chosen = sorted({_process(profile, track)[0] for track in profile.tracks})[:sms]
    return sorted((t for t in profile.tracks if _process(profile, t)[0] in set(chosen)), key=_sort_key)


def chrome_trace(profile: Profile, sms: int | None = None) -> dict:
    """The profile as a Trace Event Format object (what `Profile.save` writes), of the first `sms`
    SMs only when given (a GEMM's whole trace is millions of slices)."""
    scale = _US_PER_UNIT[profile.unit]
    origin = profile.start
    events, processes = [], {}
    for track in shown_tracks(profile, sms):
        start, end = profile.tracks[track]
        pid, process_name = _process(profile, track)
        tid = _thread(profile, track)
        processes[pid] = process_name
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track.label()}})
        where = {"cta": track.cta, "warpgroup": track.warpgroup, "sm": track.sm}
        events.append(_slice(profile.kernel, "kernel", pid, tid, start - origin, end - start, scale, where))
        for span in profile.spans_of(track):
            events.append(_slice(span.name, "region", pid, tid, span.start - origin, span.duration, scale,
                                 {**where, "depth": span.depth + 1}))
    for pid, name in processes.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
    other: dict[str, str | float] = {"kernel": profile.kernel,
             "clock": "ns" if profile.unit == "ns" else "interpreter ticks (1 tick = 1 us)"}
    if profile.event_ns is not None:
        other["cuda_event_ns"] = profile.event_ns
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def _sort_key(track: Track) -> tuple[int, int, int]:
    return (-1 if track.sm is None else track.sm, track.cta, track.warpgroup)


def _slice(name: str, category: str, pid: int, tid: int, start: float, duration: float, scale: float,
           args: dict) -> dict:
    return {"ph": "X", "name": name, "cat": category, "pid": pid, "tid": tid,
            "ts": round(start * scale, 3), "dur": round(duration * scale, 3), "args": args}


def save(profile: Profile, path: Path, sms: int | None = None) -> list[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)  # a trace goes where it is asked to, folders and all
    path.write_text(json.dumps(chrome_trace(profile, sms)))
    written = [path]
    try:
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder
    except ImportError:
        return written
    native = path.with_suffix(".pftrace")
    native.write_bytes(_native_trace(profile, TraceProtoBuilder(), sms))
    written.append(native)
    return written


def _native_trace(profile: Profile, builder, sms: int | None = None) -> bytes:
    """Perfetto's protobuf trace: a track per warpgroup under a track per SM (or CTA), slices as
    begin/end track events in nanoseconds (one per tick in the interpreter)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

    sequence = 1
    to_ns = 1.0 if profile.unit == "ns" else 1000.0
    origin = profile.start
    parents: dict[int, int] = {}

    def describe(uuid: int, name: str, parent: int | None) -> None:
        packet = builder.add_packet()
        packet.track_descriptor.uuid = uuid
        packet.track_descriptor.name = name
        if parent is not None:
            packet.track_descriptor.parent_uuid = parent

    def stamp(time: float, kind, uuid: int, name: str | None) -> None:
        packet = builder.add_packet()
        packet.timestamp = int(round((time - origin) * to_ns))
        packet.trusted_packet_sequence_id = sequence
        packet.track_event.type = kind
        packet.track_event.track_uuid = uuid
        if name is not None:
            packet.track_event.name = name

    for number, track in enumerate(shown_tracks(profile, sms)):
        start, end = profile.tracks[track]
        pid, process_name = _process(profile, track)
        if pid not in parents:
            parents[pid] = 1 + len(parents)
            describe(parents[pid], process_name, None)
        uuid = 1_000_000 + number
        describe(uuid, track.label(), parents[pid])
        # Slices in time order; an end before a begin at the same time, inner ends before outer.
        marks = [(start, 1, 0, profile.kernel), (end, 0, 0, None)]
        for span in profile.spans_of(track):
            marks += [(span.start, 1, span.depth + 1, span.name), (span.end, 0, -(span.depth + 1), None)]
        for time, begins, _, name in sorted(marks, key=lambda mark: mark[:3]):
            stamp(time, TrackEvent.TYPE_SLICE_BEGIN if begins else TrackEvent.TYPE_SLICE_END, uuid, name)
    return builder.serialize()


def plot(profile: Profile, path: Path, sms: int, window: tuple[float, float] | None = None) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("Profile.plot needs matplotlib: pip install 'asyncdsl[plot]'") from None
    if window is not None:
        if len(window) != 2 or not window[0] < window[1]:
            raise ArgumentError(
                f"Profile.plot: window must be (first, last) with first < last, got {window!r}")
    scale, unit = (1e-3, "us") if profile.unit == "ns" else (1.0, "ticks")
    tracks = shown_tracks(profile, sms)
    if window is not None:
        # Only the warpgroups alive in the window: an SM runs many CTAs one after another.
        tracks = [t for t in tracks if (profile.tracks[t][0] - profile.start) * scale <= window[1]
                  and (profile.tracks[t][1] - profile.start) * scale >= window[0]]
    shown = sorted({_process(profile, track) for track in tracks})
    names = profile.region_names()
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(names)}
    deepest = profile.max_depth() + 1
    figure, axes = plt.subplots(figsize=(12, 0.5 + 0.45 * len(tracks)))
    origin = profile.start
    for row, track in enumerate(tracks):
        start, end = profile.tracks[track]
        axes.barh(row, (end - start) * scale, left=(start - origin) * scale, height=0.9, color="0.9")
        for span in profile.spans_of(track):
            left, width = (span.start - origin) * scale, span.duration * scale
            if window is not None and (left + width < window[0] or left > window[1]):
                continue  # not drawn: a GEMM's whole trace is millions of bars
            height = 0.8 * (1 - span.depth / (deepest + 1))
            axes.barh(row, width, left=left, height=height, color=colours[span.name])
    axes.set_yticks(range(len(tracks)))
    axes.set_yticklabels(
        [t.label() if t.sm is None else f"SM {t.sm} · {t.label()}" for t in tracks], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(unit)
    if window is not None:
        axes.set_xlim(*window)
    axes.set_title(f"{profile.kernel}: {', '.join(name for _, name in shown)}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[name]) for name in names]
    if handles:
        axes.legend(handles, names, loc="upper right", fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
