"""The on-device profiler on the H200: a profiled pipelined copy and a warp-specialized copy give
traces whose regions nest, whose order per warpgroup is the program's, and whose total matches
the kernel time CUDA events measure."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import hopper_or_skip
from profile_kernels import CONSUMER_REGIONS, PRODUCER_REGIONS, profiled_pipelined_copy, specialized_copy
from support import random_bits

import asyncdsl as ad
from asyncdsl.runtime import device_facts, to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

# Large enough (a 512 MiB copy, about 0.25 ms) that the few microseconds between a CUDA event and
# the kernel's first instruction stay far below 5 %; one CTA per SM, each streaming ~250 tiles.
SHAPE = (16384, 8192)
CONFIG = {"BM": 64, "BN": 64, "STAGES": 4}


def expected_stream(tiles: int, stages: int) -> list[str]:
    """The regions inside "stream" of one CTA that copies `tiles` tiles, in program order."""
    names = []
    for t in range(tiles):
        names += ["wait load", "store"]
        if t >= 1 and t + stages - 1 < tiles:
            names.append("refill")
    return names


@pytest.fixture(scope="module")
def pipelined():
    ctas = device_facts(0).multiprocessor_count
    src = random_bits(SHAPE, ad.float32)
    src_d, dst_d = to_device(src), to_device(np.zeros_like(src))
    profiled_pipelined_copy.profile(src_d, dst_d, CTAS=ctas, **CONFIG)  # compile, load, warm up
    profile = profiled_pipelined_copy.profile(src_d, dst_d, CTAS=ctas, **CONFIG)
    assert np.array_equal(to_host(dst_d).view(np.uint32), src.view(np.uint32))
    return profile, ctas


def test_a_record_per_cta_on_a_real_sm(pipelined):
    profile, ctas = pipelined
    assert profile.unit == "ns"
    assert sorted(track.cta for track in profile.tracks) == list(range(ctas))
    # %smid numbering may have gaps (docs/hardware.md §15): count SMs, do not bound their ids.
    assert 1 < len({track.sm for track in profile.tracks}) <= device_facts(0).multiprocessor_count


def test_regions_nest_and_follow_the_program(pipelined):
    profile, ctas = pipelined
    tiles = (SHAPE[0] // CONFIG["BM"]) * (SHAPE[1] // CONFIG["BN"])
    for track, (start, end) in profile.tracks.items():
        spans = profile.spans_of(track)
        assert [s.name for s in spans if s.depth == 0] == ["fill", "stream", "drain"]
        stream = next(s for s in spans if s.name == "stream")
        inner = [s for s in spans if s.depth == 1]
        mine = (tiles - track.cta + ctas - 1) // ctas
        assert [s.name for s in inner] == expected_stream(mine, CONFIG["STAGES"])
        assert all(stream.start <= s.start <= s.end <= stream.end for s in inner)
        assert all(start <= s.start <= s.end <= end for s in spans)
        outer = [s for s in spans if s.depth == 0]
        assert all(a.end <= b.start for a, b in zip(outer, outer[1:]))


def test_the_trace_spans_the_kernel_time_cuda_events_measure(pipelined):
    profile, _ = pipelined
    assert profile.event_ns is not None
    assert abs(profile.total - profile.event_ns) <= 0.05 * profile.event_ns, (profile.total, profile.event_ns)


def test_a_warp_specialized_trace_shows_both_roles_in_order():
    tiles = 64
    x = random_bits((132 * 32, tiles * 32), ad.float32)
    x_d, y_d = to_device(x), to_device(np.zeros_like(x))
    profile = specialized_copy.profile(x_d, y_d, B=32)
    assert np.array_equal(to_host(y_d).view(np.uint32), x.view(np.uint32))
    for cta in range(132):
        producer, consumer = (profile.spans_of(t) for t in sorted(
            (t for t in profile.tracks if t.cta == cta), key=lambda t: t.warpgroup))
        assert [s.name for s in producer] == list(PRODUCER_REGIONS * tiles)
        assert [s.name for s in consumer] == list(CONSUMER_REGIONS * tiles)
        loads = [s for s in producer if s.name == "load"]
        stores = [s for s in consumer if s.name == "store"]
        # The consumer stores tile k only after the producer issued its load (one SM, one clock).
        assert all(load.start < store.start for load, store in zip(loads, stores))


def event_ns(launch, repeat: int = 10) -> float:
    """Median time of `launch()` between CUDA events on the default stream."""
    from asyncdsl.runtime import driver

    cu = driver.api()
    samples = []
    for _ in range(repeat):
        start, end = (driver.check(cu.cuEventCreate(0), "cuEventCreate") for _ in range(2))
        driver.check(cu.cuEventRecord(start, cu.CUstream(0)), "cuEventRecord")
        launch()
        driver.check(cu.cuEventRecord(end, cu.CUstream(0)), "cuEventRecord")
        driver.check(cu.cuEventSynchronize(end), "cuEventSynchronize")
        samples.append(driver.check(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime") * 1e6)
        cu.cuEventDestroy(start)
        cu.cuEventDestroy(end)
    return float(np.median(samples))


def test_profiling_costs_the_pipelined_copy_at_most_three_percent():
    ctas = device_facts(0).multiprocessor_count
    src = random_bits(SHAPE, ad.float32)
    src_d, dst_d = to_device(src), to_device(np.zeros_like(src))
    plain = event_ns(lambda: profiled_pipelined_copy(src_d, dst_d, CTAS=ctas, **CONFIG))
    profiled = float(np.median([profiled_pipelined_copy.profile(src_d, dst_d, CTAS=ctas, **CONFIG).event_ns
                                for _ in range(10)]))
    assert profiled <= 1.03 * plain, (profiled, plain)


def test_a_profiled_gemm_keeps_program_order_in_every_warpgroup_and_spans_the_event_time():
    """The GEMM example with its dozen regions a K step: per producer, "wait free" then "load" for
    every K step of its tiles; per consumer, every tile's K steps (each "wait loaded", "mma",
    "wait mma", "release") then its "epilogue"; the result stays exact; the trace spans the
    CUDA-event time within 5 %."""
    import ml_dtypes

    from asyncdsl.kernels.gemm_cooperative import matmul

    m, n, k = 8192, 8192, 2048
    ctas = device_facts(0).multiprocessor_count
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    a_d, b_d, c_d = to_device(a), to_device(b), to_device(np.zeros((m, n), ml_dtypes.bfloat16))
    matmul.profile(a_d, b_d, c_d, CTAS=ctas)  # compile, load, warm up
    profile = matmul.profile(a_d, b_d, c_d, CTAS=ctas)
    rows = rng.choice(m, 64, replace=False)  # exact on integers: check a sample of rows
    expected = (a[rows].astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(to_host(c_d)[rows].view(np.uint16), expected.view(np.uint16))

    tiles, k_steps = (m // 128) * (n // 256), k // 64
    for track in profile.tracks:
        steps = (tiles - track.cta + ctas - 1) // ctas * k_steps
        spans = profile.spans_of(track)
        outer = [s.name for s in spans if s.depth == 0]
        if track.warpgroup == 2:
            assert outer == ["wait free", "load"] * steps
            continue
        assert outer == (["k step"] * k_steps + ["epilogue"]) * (steps // k_steps)
        inner = [s.name for s in spans if s.depth == 1]
        assert inner == ["wait loaded", "mma", "wait mma", "release"] * steps
    assert abs(profile.total - profile.event_ns) <= 0.05 * profile.event_ns, (profile.total, profile.event_ns)
