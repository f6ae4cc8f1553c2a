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
from asyncdsl.hw.profile import WarpgroupRecord


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
    def _decoded(self) -> tuple[dict[Track, tuple[float, float]], dict[Track, list[Span]]]:
        records = self._records() if callable(self._records) else self._records
        tracks: dict[Track, tuple[float, float]] = {}
        spans: dict[Track, list[Span]] = {}
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
        """Every region execution, track by track."""
        return [span for spans in self._decoded[1].values() for span in spans]

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
        return list(dict.fromkeys(span.name for span in self.spans))

    def spans_of(self, track: Track) -> list[Span]:
        """The spans of one warpgroup, in the order it entered them."""
        return list(self._decoded[1][track])

    # -- reports --------------------------------------------------------------------------------
    def summary_rows(self) -> list[dict]:
        """Per region and warpgroup index (a role): count, mean, p50, p99 of the durations, and
        the share of those warpgroups' kernel time spent in the region."""
        lifetime: dict[int, float] = {}
        for track, (start, end) in self.tracks.items():
            lifetime[track.warpgroup] = lifetime.get(track.warpgroup, 0.0) + end - start
        grouped: dict[tuple[str, int], list[float]] = {}
        for span in self.spans:
            grouped.setdefault((span.name, span.track.warpgroup), []).append(span.duration)
        rows = []
        for (name, warpgroup), durations in grouped.items():
            values = np.asarray(durations)
            rows.append({
                "region": name, "warpgroup": warpgroup, "count": len(durations),
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
                f"{row['region'][:24]:<24} {row['warpgroup']:>3} {row['count']:>7} {row['mean'] * scale:>10.3f} "
                f"{row['p50'] * scale:>10.3f} {row['p99'] * scale:>10.3f} {row['share']:>7.1%}"
            )
        text = "\n".join(lines)
        print(text, file=file or sys.stdout)
        return text

    def chrome_trace(self) -> dict:
        from asyncdsl.frontend.profile_export import chrome_trace

        return chrome_trace(self)

    def save(self, path: str | Path) -> list[Path]:
        """Write the Chrome/Perfetto trace JSON to `path` (ui.perfetto.dev and chrome://tracing open
        it) and, when the `perfetto` package is installed, Perfetto's native trace beside it
        (`.pftrace`).  Returns the paths written."""
        from asyncdsl.frontend.profile_export import save

        return save(self, Path(path))

    def plot(self, path: str | Path, sms: int = 4, window: tuple[float, float] | None = None) -> Path:
        """Draw the timelines of the warpgroups on the first `sms` SMs (in the interpreter, CTAs)
        into an image at `path` (needs matplotlib: pip install 'asyncdsl[plot]').  `window`
        (first, last), in µs on the GPU and ticks in the interpreter from the profile's start,
        draws only that stretch: a few K steps of a GEMM instead of its whole run."""
        from asyncdsl.frontend.profile_export import plot

        return plot(self, Path(path), sms, window)

    def __repr__(self) -> str:
        return (f"<Profile of {self.kernel}: {len(self.tracks)} warpgroups, {len(self.spans)} spans, "
                f"{self.total:.0f} {self.unit}>")


def _nested_spans(record: WarpgroupRecord, track: Track, region_names: Sequence[str]) -> list[Span]:
    """The spans of one record: its events pair up as a stack (the frontend nests them)."""
    spans, open_regions = [], []
    for event in record.events:
        if not event.exit:
            open_regions.append(event)
            continue
        if not open_regions or open_regions[-1].region != event.region:
            raise ValueError(f"profile of {track.label()}: region {region_names[event.region]!r} ends "
                             "where it was not the innermost open region")
        begin = open_regions.pop()
        spans.append(Span(region_names[begin.region], track, begin.time, event.time, len(open_regions)))
    if open_regions:
        raise ValueError(f"profile of {track.label()}: regions left open at the kernel's exit")
    spans.sort(key=lambda span: (span.start, span.depth))
    return spans


def check_capacity(
    kernel: str, recorded: Sequence[int], warpgroups_per_cta: int, capacity: int, definition: SourceLocation | None
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
        f"(entries and exits), more than the {capacity} a warpgroup's profile record holds ({len(overflowed)} "
        f"warpgroup(s) overflowed; the events past the end were dropped); profile with "
        f"@asyncdsl.kernel(..., profile_events={recorded[worst]}) or more",
        definition,
    )
