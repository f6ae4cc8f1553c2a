"""The interpreter's profile: regions on its logical clock, per warpgroup, in program order."""

from __future__ import annotations

import numpy as np
from profile_kernels import CONSUMER_REGIONS, PRODUCER_REGIONS, profiled_pipelined_copy, specialized_copy
from support import random_bits, same_bytes

import asyncdsl as ad

TILES = 4  # tiles per row block of the (64, 4 * 32) input


def specialized_profile():
    x = random_bits((64, TILES * 32), ad.float32)
    y = np.zeros_like(x)
    profile = specialized_copy.interpret_profile(x, y, B=32)
    assert same_bytes(x, y)  # profiling does not change what the kernel does
    return profile


def test_a_track_per_cta_and_warpgroup_in_ticks():
    profile = specialized_profile()
    assert profile.unit == "ticks"
    assert sorted((t.cta, t.warpgroup, t.sm) for t in profile.tracks) == [(0, 0, None), (0, 1, None),
                                                                       (1, 0, None), (1, 1, None)]


def test_each_warpgroup_enters_its_regions_in_program_order():
    profile = specialized_profile()
    for track in profile.tracks:
        expected = (PRODUCER_REGIONS if track.warpgroup == 0 else CONSUMER_REGIONS) * TILES
        spans = profile.spans_of(track)
        assert tuple(span.name for span in spans) == expected
        start, end = profile.tracks[track]
        assert all(start <= a.start <= a.end <= b.start <= end for a, b in zip(spans, spans[1:]))


def test_the_two_roles_interleave_as_the_ring_allows():
    """A tile is stored after it is loaded, and a slot is refilled only after the store that
    emptied it: the logical clock orders the producer's and consumer's regions causally."""
    profile = specialized_profile()
    for cta in (0, 1):
        producer = {}
        consumer = {}
        for track, spans in ((t, profile.spans_of(t)) for t in profile.tracks if t.cta == cta):
            table = producer if track.warpgroup == 0 else consumer
            for span in spans:
                table.setdefault(span.name, []).append(span)
        for k in range(TILES):
            assert producer["load"][k].end < consumer["store"][k].start
        for k in range(TILES - 2):
            assert consumer["store"][k].end < producer["wait slot"][k + 2].end
        # Interleaved, not one role after the other.
        assert consumer["store"][0].start < producer["load"][TILES - 1].start


def test_regions_nest():
    x = random_bits((256, 256), ad.float32)
    y = np.zeros_like(x)
    profile = profiled_pipelined_copy.interpret_profile(x, y, BM=64, BN=64, STAGES=3, CTAS=4)
    assert same_bytes(x, y)
    for track in profile.tracks:
        spans = profile.spans_of(track)
        assert [s.name for s in spans if s.depth == 0] == ["fill", "stream", "drain"]
        stream = next(s for s in spans if s.name == "stream")
        inner = [s for s in spans if s.depth == 1]
        assert [s.name for s in inner] == ["wait load", "store"] + ["wait load", "store", "refill"] + \
            ["wait load", "store"] * 2  # 16 tiles over 4 CTAs; one refill (tile 3) each
        assert all(stream.start <= s.start <= s.end <= stream.end for s in inner)


def test_an_unprofiled_run_records_nothing_and_returns_nothing():
    x = random_bits((64, TILES * 32), ad.float32)
    y = np.zeros_like(x)
    assert specialized_copy.interpret(x, y, B=32) is None
    assert same_bytes(x, y)


def test_asyncdsl_interpret_makes_profile_use_the_interpreter(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    x = random_bits((64, TILES * 32), ad.float32)
    y = np.zeros_like(x)
    profile = specialized_copy.profile(x, y, B=32)
    assert profile.unit == "ticks" and len(profile.spans) == 2 * 2 * 2 * TILES
    assert same_bytes(x, y)  # written back in place, as an ordinary call under ASYNCDSL_INTERPRET=1
