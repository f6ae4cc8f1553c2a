"""GPU timing and stream-ordered copies against a fake driver: what `device_milliseconds` enqueues
around each timed call (an L2 flush outside the events), the median it returns, and the checks
of `copy_on_stream`."""

from __future__ import annotations

import pytest

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError
from asyncdsl.runtime import DeviceArray, timing
from asyncdsl.runtime.buffers import copy_on_stream


def test_each_timed_call_follows_a_flush_and_sits_between_two_events(fake_driver, monkeypatch):
    fake = fake_driver()
    monkeypatch.setattr(timing, "_flush_buffers", {})
    fake.elapsed = [5.0, 1.0, 3.0]
    calls = []
    ms = timing.device_milliseconds(lambda: calls.append("call"), 0x55, warmup=2, repeat=3)
    assert ms == 3.0 and len(calls) == 5
    timed = [(name, args) for name, args in fake.calls if name in ("cuMemsetD32Async", "cuEventRecord")]
    flush = timed[0][1]
    assert flush[1:] == (0, 2 * (1 << 20) // 4, 0x55)  # twice the L2 (1 MiB at least), on the stream
    assert [name for name, _ in timed] == ["cuMemsetD32Async", "cuEventRecord", "cuEventRecord"] * 3
    assert [args for name, args in timed if name == "cuEventRecord"] == [(0x61, 0x55), (0x62, 0x55)] * 3
    assert sorted(args[0] for name, args in fake.calls if name == "cuEventDestroy") == [0x61, 0x62]


def test_the_events_are_destroyed_when_the_call_raises(fake_driver, monkeypatch):
    fake = fake_driver()
    monkeypatch.setattr(timing, "_flush_buffers", {})

    def broken():
        raise ArgumentError("no")

    with pytest.raises(ArgumentError):
        timing.device_milliseconds(broken, 0)
    assert sum(name == "cuEventDestroy" for name, _ in fake.calls) == 2


def test_copy_on_stream_copies_row_major_arrays_of_one_size(fake_driver):
    fake = fake_driver()
    a = DeviceArray(0x7F0000000000, (4, 8), (8, 1), dtypes.float32, 0)
    b = DeviceArray(0x7F0000001000, (32,), (1,), dtypes.float32, 0)
    copy_on_stream(a, b, 0x77)
    assert ("cuMemcpyDtoDAsync", (b.address, a.address, 128, 0x77)) in fake.calls
    with pytest.raises(ArgumentError, match="row-major"):
        copy_on_stream(DeviceArray(a.address, (4, 8), (1, 4), dtypes.float32, 0), b, 0)
    with pytest.raises(ArgumentError, match="differ in size"):
        copy_on_stream(a, DeviceArray(b.address, (16,), (1,), dtypes.float32, 0), 0)


def test_the_autotuner_puts_restored_arguments_back_after_each_choice(fake_driver, monkeypatch):
    import asyncdsl as ad
    import asyncdsl.jit.autotune as autotune_module

    @ad.kernel(grid=(1,))
    def fill(y, V: ad.constexpr):
        buf = ad.smem((64,), y.dtype)
        buf[...] = ad.full((64,), V, y.dtype)
        ad.fence_async_smem()
        ad.async_copy(buf, y.at[ad.ds(0, 64)])
        ad.await_async_copy(0)

    fake = fake_driver()
    monkeypatch.setattr(autotune_module.runtime, "has_gpu", lambda: True)
    monkeypatch.setattr(autotune_module, "device_milliseconds", lambda call, stream, **_: 1.0)
    y = DeviceArray(0x7F0000200000, (64,), (1,), dtypes.float32, 0)
    tuned = ad.autotune([ad.Choice(fill, V=1.0), ad.Choice(fill, V=2.0)], restore=("y",))
    tuned.chosen(y)
    copies = [args for name, args in fake.calls if name == "cuMemcpyDtoDAsync"]
    saved = copies[0][0]  # the copy y was saved into
    assert copies == [(saved, y.address, 256, 0), (y.address, saved, 256, 0), (y.address, saved, 256, 0)]
