"""`Kernel.prepare` and the warm call against the fake driver (`tests/fake_driver.py`), which
records every driver call: a prepared call of arrays seen before makes one driver call,
`cuLaunchKernelEx`, and nothing else; arrays at new addresses add one patch of each tensor map
(`cuTensorMapReplaceAddress`), never an encode; another layout, a misaligned array or a scalar
that lost its divisibility is an error naming it, with nothing launched."""

from __future__ import annotations

import ctypes

import pytest
from fake_driver import RecordingDriver
from runtime_fakes import FakeCompiler, device_facts_of
from support import device_array

import asyncdsl as ad
from asyncdsl.runtime import driver, launch

pytest.importorskip("cuda.bindings")  # launch configurations are cuda-python objects (no GPU needed)

REPLACE_ADDRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


@ad.kernel(grid=lambda src, dst, rows, B: (src.shape[0] // B, src.shape[1] // B))
def copy_tiles(src, dst, rows: int, B: ad.constexpr):
    """A tile copy in B x B tiles; `rows`, a runtime scalar, is the row its tile rows start at."""
    i, j = ad.program_id(0), ad.program_id(1)
    buf = ad.smem((B, B), src.dtype)
    bar = ad.barrier()
    ad.async_copy(src.at[ad.ds(i * B, B), ad.ds(j * B, B)], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, dst.at[ad.ds(i * B, B), ad.ds(j * B, B)])
    ad.await_async_copy(0)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """The fake driver installed, with `cuTensorMapReplaceAddress` counting its patches."""
    fake = RecordingDriver()
    monkeypatch.setattr(driver, "_driver_module", fake)
    monkeypatch.setattr(driver, "_initialized", True)
    monkeypatch.setattr(driver, "_contexts", {0: fake.CUcontext(0x300)})
    monkeypatch.setattr(driver, "_facts", {0: device_facts_of(9, 0)})
    monkeypatch.setattr(driver, "_entry_points", {})
    monkeypatch.setattr(launch, "compiler_for", lambda device: FakeCompiler())
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ASYNCDSL_INTERPRET", raising=False)
    fake.patched = []

    def replace(image, address):
        fake.patched.append(address)
        return 0

    fake.entry_points["cuTensorMapReplaceAddress"] = fake.replace = REPLACE_ADDRESS(replace)
    # Looked up once a process (`cuGetProcAddress`): done here, so the counts are per call.
    driver.entry_point("cuTensorMapReplaceAddress", ctypes.c_void_p, ctypes.c_void_p)
    launch.clear_loaded_kernels()
    yield fake
    launch.clear_loaded_kernels()


def pair(base: int, shape=(128, 64)):
    return device_array(shape, base), device_array(shape, base + 0x100000)


def calls_of(fake, action) -> list[str]:
    fake.calls.clear()
    fake.patched.clear()
    action()
    return [name for name, _ in fake.calls]


def test_a_prepared_call_is_one_driver_call(fake):
    x, y = pair(0x7F0000000000)
    prepared = copy_tiles.prepare(x, y, 0, B=32)
    assert "cuLaunchKernelEx" not in [name for name, _ in fake.calls]  # prepared, not launched
    assert [name for name, _ in fake.calls].count("cuTensorMapEncodeTiled") == 2
    assert calls_of(fake, lambda: prepared(x, y, 0)) == ["cuLaunchKernelEx"]
    assert calls_of(fake, lambda: prepared(x, y, 32)) == ["cuLaunchKernelEx"]  # a new scalar value
    (_, (grid, stream, *_)), = fake.calls
    assert (grid, stream) == ((4, 2, 1), 0)
    x2, y2 = pair(0x7F0000400000)
    assert calls_of(fake, lambda: prepared(x2, y2, 0)) == ["cuLaunchKernelEx"]
    assert fake.patched == [x2.address, y2.address]  # patched copies, no encode
    assert calls_of(fake, lambda: prepared(x, y, 0)) == ["cuLaunchKernelEx"] and not fake.patched
    assert calls_of(fake, lambda: prepared(x, y, 0, stream=0x99)) == ["cuLaunchKernelEx"]
    assert fake.calls[0][1][1] == 0x99


def test_the_warm_call_of_a_kernel_is_one_driver_call(fake):
    x, y = pair(0x7F0000000000)
    copy_tiles(x, y, 0, B=32)  # the checked first call
    assert calls_of(fake, lambda: copy_tiles(x, y, 16, B=32)) == ["cuLaunchKernelEx"]
    x2, y2 = pair(0x7F0000400000)
    assert calls_of(fake, lambda: copy_tiles(x2, y2, 16, B=32)) == ["cuLaunchKernelEx"]
    assert fake.patched == [x2.address, y2.address]


def test_a_prepared_call_refuses_what_it_was_not_prepared_for(fake):
    x, y = pair(0x7F0000000000)
    prepared = copy_tiles.prepare(x, y, 16, B=32)
    fake.calls.clear()
    small, _ = pair(0x7F0000400000, shape=(64, 64))
    with pytest.raises(ad.ArgumentError, match=r"prepared for src of shape \(128, 64\), float32") as raised:
        prepared(small, y, 16)
    assert raised.value.location.file == __file__
    with pytest.raises(ad.ArgumentError, match=r"dst of copy_tiles starts at 0x7f0000100008, not a multiple"):
        prepared(x, device_array((128, 64), 0x7F0000100008), 16)
    with pytest.raises(ad.ArgumentError, match="prepared with rows a multiple of 16.*3 is not one"):
        prepared(x, y, 3)
    with pytest.raises(ad.ArgumentError, match=r"prepared for 3 runtime arguments \(src, dst, rows\), got 2"):
        prepared(x, y)
    with pytest.raises(ad.ArgumentError, match="argument 'rows'"):
        prepared(x, y, 2**40)
    assert not fake.calls  # nothing launched


def test_prepare_checks_like_a_first_call(fake, monkeypatch):
    x, y = pair(0x7F0000000000)
    with pytest.raises(ad.ArgumentError, match="is on cuda:1"):
        copy_tiles.prepare(x, device_array((128, 64), 0x7F0000100000).__class__(
            0x7F0000100000, (128, 64), (64, 1), ad.float32, 1), 0, B=32)
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    with pytest.raises(ad.ArgumentError, match="prepare makes a GPU launch"):
        copy_tiles.prepare(x, y, 0, B=32)
