"""`Profile`: the regions one profiled launch recorded, as nested spans per warpgroup.

`Kernel.profile` returns one.  A GPU profile is in nanoseconds from the earliest warpgroup's
kernel entry; an interpreter profile is in logical ticks (ops interpreted, `interpret/profile.py`).
Each track is one warpgroup of one CTA (on one SM, for the GPU); its spans are the regions it
entered, in program order, with their nesting depth.

    profile = kernel.profile(a, b, BM=128)
    profile.summary()                  # a table per region: count, mean, p50, p99, share
    profile.save("kernel.trace.json")  # for ui.perfetto.dev or chrome://tracing
    profile.plot("timeline.png")       # a few SMs' timelines (needs matplotlib)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TextIO

import numpy as np

from asyncdsl.errors import ResourceError, SourceLocation
from asyncdsl.hw.profile import EventColumns, WarpgroupRecord


@dataclass(frozen=True)
class Track:
    """One warpgroup of one CTA; `sm` is the SM it ran on (None in the interpreter)."""

    cta: int
    warpgroup: int
    sm: int | None

    def label(self) -> str:
        return f"CTA {self.cta} warpgroup {self.warpgroup}"


@dataclass(frozen=True)
class Span:
    """One execution of region `name` by the warpgroup of `track`, `depth` regions deep."""

    name: str
    track: Track
    start: float
    end: float
    depth: int

    @property
    def duration(self) -> float:
        return self.end - self.start


class Profile:
    """What one profiled launch of kernel `kernel` recorded (see the module docstring)."""

    def __init__(
        self,
        kernel: str,
        region_names: Sequence[str],
        records: Sequence[WarpgroupRecord] | Callable[[], Sequence[WarpgroupRecord]],
        unit: str,
        warpgroups_per_cta: int,
        event_ns: float | None = None,
    ):
        """`records` may be a function giving them: a GPU profile decodes its buffer (millions of
        events for a GEMM, seconds of host time) only when something looks at the regions, so
        `event_ns` costs nothing to read."""
        self.kernel = kernel
        self.unit = unit  # "ns" (GPU) or "ticks" (interpreter)
        self.warpgroups_per_cta = warpgroups_per_cta
        self.event_ns = event_ns  # the kernel's time by CUDA events around the launch (GPU only)
        self._region_names = region_names
        self._records = records

    @cached_property
    def _decoded(self) -> tuple[dict[Track, tuple[float, float]], dict[Track, _SpanColumns]]:
        records = self._records() if callable(self._records) else self._records
        tracks: dict[Track, tuple[float, float]] = {}
        spans: dict[Track, _SpanColumns] = {}
        for record in records:
            track = Track(record.cta, record.warpgroup, record.sm)
            tracks[track] = (record.start, record.end)
            spans[track] = _nested_spans(record, track, self._region_names)
        self._records = ()  # decoded: the raw records are not needed again
        return tracks, spans

    @property
    def tracks(self) -> dict[Track, tuple[float, float]]:
        """Each warpgroup's (kernel entry, kernel exit)."""
        return self._decoded[0]

    @cached_property
    def spans(self) -> list[Span]:
        """Every region execution, track by track (an object each: for a GEMM's millions,
        `summary_rows` and `spans_of` are the cheaper questions)."""
        return [span for track in self._decoded[1] for span in self.spans_of(track)]

    @property
    def start(self) -> float:
        return min(start for start, _ in self.tracks.values())

    @property
    def end(self) -> float:
        return max(end for _, end in self.tracks.values())

    @property
    def total(self) -> float:
        """From the first warpgroup's kernel entry to the last one's exit."""
        return self.end - self.start

    def region_names(self) -> list[str]:
        """The regions recorded, in the order they first appear, track by track."""
        seen: dict[str, None] = {}
        for columns in self._decoded[1].values():
            numbers, first = np.unique(columns.regions, return_index=True)
            for number in numbers[np.argsort(first)]:
                seen.setdefault(self._region_names[number])
        return list(seen)

    def max_depth(self) -> int:
        """How deep the deepest region nests (0: none inside another)."""
        return max((int(c.depths.max()) for c in self._decoded[1].values() if len(c.depths)), default=0)

    def spans_of(self, track: Track) -> list[Span]:
        """The spans of one warpgroup, in the order it entered them."""
        c = self._decoded[1][track]
        names = self._region_names
        return [Span(names[region], track, start, end, depth)
                for region, start, end, depth in zip(c.regions.tolist(), c.starts.tolist(), c.ends.tolist(),
                                                     c.depths.tolist())]

    # -- reports --------------------------------------------------------------------------------
    def summary_rows(self) -> list[dict]:
        """Per region and warpgroup index (a role): count, mean, p50, p99 of the durations, and
        the share of those warpgroups' kernel time spent in the region; rows in the order the
        regions first appear."""
        lifetime: dict[int, float] = {}
        for track, (start, end) in self.tracks.items():
            lifetime[track.warpgroup] = lifetime.get(track.warpgroup, 0.0) + end - start
        grouped: dict[tuple[str, int], list[np.ndarray]] = {}
        for track, columns in self._decoded[1].items():
            numbers, first = np.unique(columns.regions, return_index=True)
            durations = columns.ends - columns.starts
            for number in numbers[np.argsort(first)]:
                key = (self._region_names[number], track.warpgroup)
                grouped.setdefault(key, []).append(durations[columns.regions == number])
        rows = []
        for (name, warpgroup), parts in grouped.items():
            values = np.concatenate(parts)
            rows.append({
                "region": name, "warpgroup": warpgroup, "count": len(values),
                "mean": float(values.mean()), "p50": float(np.percentile(values, 50)),
                "p99": float(np.percentile(values, 99)),
                "share": float(values.sum()) / lifetime[warpgroup] if lifetime[warpgroup] else 0.0,
            })
        return rows

    def summary(self, file: TextIO | None = None) -> str:
        """Print (to `file`, default stdout) and return a table per region and warpgroup."""
        scale, unit = (1e-3, "us") if self.unit == "ns" else (1.0, "ticks")
        header = f"{'region':<24} {'wg':>3} {'count':>7} {'mean':>10} {'p50':>10} {'p99':>10} {'share':>7}"
        lines = [f"kernel {self.kernel}: {len(self.tracks)} warpgroups, {self.total * scale:.3f} {unit} "
                 f"from first entry to last exit"]
        if self.event_ns is not None:
            lines[0] += f" ({self.event_ns * 1e-3:.3f} us between CUDA events around the launch)"
        lines += [f"durations in {unit}", header, "-" * len(header)]
        for row in self.summary_rows():
            lines.append(
                f"{row['region'][:24]:<24} {row['warpgroup']:>3} {row['count']:>7} "
                f"{row['mean'] * scale:>10.3f} {row['p50'] * scale:>10.3f} {row['p99'] * scale:>10.3f} "
                f"{row['share']:>7.1%}"
            )
        text = "\n".join(lines)
        print(text, file=file or sys.stdout)
        return text

    def chrome_trace(self, sms: int | None = None) -> dict:
        from asyncdsl.jit.profile_export import chrome_trace

        return chrome_trace(self, sms)

    def save(self, path: str | Path, sms: int | None = None) -> list[Path]:
        """Write the Chrome/Perfetto trace JSON to `path` (its folders made if missing;
        ui.perfetto.dev and chrome://tracing open it) and, when the `perfetto` package is installed,
        Perfetto's native trace beside it
        (`.pftrace`); with `sms`, of the warpgroups on the first `sms` SMs (CTAs in the
        interpreter) only.  Returns the paths written."""
        from asyncdsl.jit.profile_export import save

        return save(self, Path(path), sms)

    def plot(self, path: str | Path, sms: int = 4, window: tuple[float, float] | None = None) -> Path:
        """Draw the timelines of the warpgroups on the first `sms` SMs (in the interpreter, CTAs)
        into an image at `path` (needs matplotlib: pip install 'asyncdsl[plot]').  `window`
        (first, last), in µs on the GPU and ticks in the interpreter from the profile's start,
        draws only that stretch: a few K steps of a GEMM instead of its whole run."""
        from asyncdsl.jit.profile_export import plot

        return plot(self, Path(path), sms, window)

    def __repr__(self) -> str:
        return (f"<Profile of {self.kernel}: {len(self.tracks)} warpgroups, "
                f"{sum(len(c.starts) for c in self._decoded[1].values())} spans, "
                f"{self.total:.0f} {self.unit}>")


@dataclass(frozen=True, eq=False)
class _SpanColumns:
    """One warpgroup's spans as arrays, ordered by start (outer before inner at one time)."""

    regions: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    depths: np.ndarray


def _nested_spans(record: WarpgroupRecord, track: Track, region_names: Sequence[str]) -> _SpanColumns:
    """The spans of one record: its events pair up as a stack (the frontend nests them).  In
    arrays: each event's level is the depth of the region it opens or closes; in a well-nested
    record the events of one level alternate entry, exit, each pair naming one region."""
    events = EventColumns.of(record.events)
    exits = events.exits
    depth_after = np.cumsum(np.where(exits, -1, 1))
    if len(depth_after) and (depth_after.min() < 0):
        bad = int(np.argmax(depth_after < 0))
        raise ValueError(f"profile of {track.label()}: region {region_names[int(events.regions[bad])]!r} "
                         "ends where it was not the innermost open region")
    if len(depth_after) and depth_after[-1] != 0:
        raise ValueError(f"profile of {track.label()}: regions left open at the kernel's exit")
    level = np.where(exits, depth_after + 1, depth_after)
    order = np.lexsort((np.arange(len(level)), level))
    opened, closed = order[0::2], order[1::2]
    crossed = exits[opened] | ~exits[closed] | (events.regions[opened] != events.regions[closed])
    if crossed.any():
        bad = int(closed[np.argmax(crossed)])
        raise ValueError(f"profile of {track.label()}: region {region_names[int(events.regions[bad])]!r} "
                         "ends where it was not the innermost open region")
    starts, depths = events.times[opened], level[opened] - 1
    chronological = np.lexsort((depths, starts))
    return _SpanColumns(events.regions[opened][chronological], starts[chronological],
                        events.times[closed][chronological], depths[chronological])


def check_capacity(
    kernel: str, recorded: Sequence[int], warpgroups_per_cta: int, capacity: int,
    definition: SourceLocation | None
) -> None:
    """Raise if a warpgroup reached more region events than its record holds (they were dropped,
    never written past the buffer), naming the capacity that would hold them all.  `recorded`
    holds each record's count, in record order (CTA by CTA, warpgroup by warpgroup)."""
    overflowed = [index for index, count in enumerate(recorded) if count > capacity]
    if not overflowed:
        return
    worst = max(overflowed, key=lambda index: recorded[index])
    cta, warpgroup = divmod(worst, warpgroups_per_cta)
    raise ResourceError(
        f"kernel {kernel}: CTA {cta} warpgroup {warpgroup} reached {recorded[worst]} region events "
        f"(entries and exits), more than the {capacity} a warpgroup's profile record holds "
        f"({len(overflowed)} warpgroup(s) overflowed; the events past the end were dropped); profile with "
        f"@asyncdsl.kernel(..., profile_events={recorded[worst]}) or more",
        definition,
    )
