"""L2 prefetch on the H200: kernels with prefetches run and copy bit-exactly (and like the
interpreter on the same inputs), and a copy that prefetches the tile after next while it loads is
not slower than the same copy without prefetches.

Timing: CUDA events around each launch, the two kernels alternated 40 times after a warm-up, and
the medians compared; "not slower" allows 10% for run-to-run noise (the kernel moves 256 MiB,
tens of microseconds on the H200).
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from gpu_support import hopper_or_skip
from support import random_bits

import asyncdsl as ad
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(7)
NOISE = 1.10


@ad.kernel(grid=lambda x, y, B, AHEAD: (x.shape[0] // B,))
def row_band_copy(x, y, B: ad.constexpr, AHEAD: ad.constexpr):
    """Each CTA copies its B rows tile by tile through a two-slot ring; with AHEAD > 0 it also
    prefetches, at tile k, tile k + AHEAD into L2."""
    row = ad.program_id(0) * B
    tiles = x.shape[1] // B
    slots = ad.smem((2, B, B), x.dtype)
    full = ad.barrier(num=2)
    ad.async_copy(x.at[ad.ds(row, B), ad.ds(0, B)], slots.at[0], barrier=full[0])
    for k in ad.range(tiles):
        slot = k % 2
        if AHEAD:
            with ad.when(k + AHEAD < tiles):
                ad.async_prefetch(x.at[ad.ds(row, B), ad.ds((k + AHEAD) * B, B)])
        with ad.when(k + 1 < tiles):
            ad.await_async_copy(0, read_only=True)  # the store of tile k - 1 has left its slot
            following = (k + 1) % 2
            ad.async_copy(x.at[ad.ds(row, B), ad.ds((k + 1) * B, B)], slots.at[following],
                          barrier=full[following])
        full[slot].wait()
        ad.async_copy(slots.at[slot], y.at[ad.ds(row, B), ad.ds(k * B, B)])
    ad.await_async_copy(0)


@ad.kernel(grid=lambda x, y: (x.shape[0] // 64,))
def predicated_prefetch_copy(x, y):
    """Odd CTAs prefetch their rows (with a swizzled, tiled view), every CTA copies its rows."""
    i = ad.program_id(0)
    tiling = ad.TileTransform((8, 32))
    rows = x.at[ad.ds(i * 64, 64), :]
    ad.async_prefetch(rows, transforms=tiling, swizzle=128, predicate=i % 2 == 1)
    tile = ad.smem((8, x.shape[1] // 32, 8, 32), x.dtype)
    bar = ad.barrier()
    ad.async_copy(rows, tile, barrier=bar, transforms=tiling, swizzle=128)
    bar.wait()
    ad.async_copy(tile, y.at[ad.ds(i * 64, 64), :], transforms=tiling, swizzle=128)
    ad.await_async_copy(0)


def test_prefetching_copies_are_bit_exact_and_match_the_interpreter():
    x = random_bits((512, 256), ad.float32, RNG)
    y_device = to_device(np.zeros_like(x))
    predicated_prefetch_copy(to_device(x), y_device)
    assert to_host(y_device).tobytes() == x.tobytes()
    interpreted = np.zeros_like(x)
    predicated_prefetch_copy.interpret(x, interpreted)
    assert interpreted.tobytes() == x.tobytes()


@pytest.mark.parametrize("ahead", [0, 2])
def test_the_ring_copy_is_bit_exact_with_and_without_prefetch(ahead):
    x = random_bits((256, 1024), ad.bfloat16, RNG)
    y_device = to_device(np.zeros_like(x))
    row_band_copy(to_device(x), y_device, B=64, AHEAD=ahead)
    assert to_host(y_device).tobytes() == x.tobytes()
    interpreted = np.zeros_like(x)
    row_band_copy.interpret(x, interpreted, B=64, AHEAD=ahead)
    assert interpreted.tobytes() == x.tobytes()


def _event_ms(torch, launch) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    launch()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def test_prefetching_the_tile_after_next_is_not_slower():
    torch = pytest.importorskip("torch")  # CUDA events and a large device array
    x = torch.randn((8192, 4096), device="cuda", dtype=torch.float32)  # 128 MiB, 128 CTAs
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream()  # the stream the events are recorded on
    plain = lambda: row_band_copy(x, y, B=64, AHEAD=0, stream=stream)  # noqa: E731
    ahead = lambda: row_band_copy(x, y, B=64, AHEAD=2, stream=stream)  # noqa: E731
    for _ in range(5):
        plain()
        ahead()
    torch.cuda.synchronize()
    plain_ms, ahead_ms = [], []
    for _ in range(40):
        plain_ms.append(_event_ms(torch, plain))
        ahead_ms.append(_event_ms(torch, ahead))
    assert torch.equal(x, y)
    plain_median, ahead_median = statistics.median(plain_ms), statistics.median(ahead_ms)
    print(f"row_band_copy median: {plain_median:.4f} ms without prefetch, {ahead_median:.4f} ms with")
    assert ahead_median <= plain_median * NOISE
