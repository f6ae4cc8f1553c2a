"""On the H200: a prepared call copies what a call of the kernel copies, for the arrays it was
prepared with and for arrays at new addresses, and refuses another layout; `asyncdsl.warmup`
loads every kernel, so that the first calls compile nothing; a second process's autotuned call
takes the first's choice from the disk without timing anything."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gpu_support import hopper_or_skip

import asyncdsl as ad
from asyncdsl.examples.tile_copy import tile_copy
from asyncdsl.jit import specializations
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(57)


def source_and_poisoned(shape=(256, 128)):
    x = RNG.standard_normal(shape).astype(np.float32)
    return x, np.full(shape, np.nan, np.float32)


def test_a_prepared_call_copies_like_a_call_and_refuses_another_layout():
    x, y = source_and_poisoned()
    xd, yd = to_device(x), to_device(y)
    copy = tile_copy.prepare(xd, yd, BM=64, BN=64)
    assert np.isnan(to_host(yd)).all()  # prepared, not launched
    copy(xd, yd)
    np.testing.assert_array_equal(to_host(yd), x)
    for _ in range(3):  # arrays at addresses the call has not seen
        x2, y2 = source_and_poisoned()
        x2d, y2d = to_device(x2), to_device(y2)
        copy(x2d, y2d)
        np.testing.assert_array_equal(to_host(y2d), x2)
    small, _ = source_and_poisoned((128, 128))
    with pytest.raises(ad.ArgumentError, match="prepared for src of shape"):
        copy(to_device(small), yd)


def test_after_a_warmup_the_first_calls_compile_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ASYNCDSL_KERNEL_CACHE", "1")
    kernel = ad.kernel(tile_copy.fn, grid=tile_copy.grid)  # a kernel no earlier test compiled
    shapes = ((256, 128), (512, 256), (64, 64))
    report = ad.warmup([kernel.specialization(ad.ArraySpec(s, ad.float32), ad.ArraySpec(s, ad.float32),
                                              BM=64, BN=64) for s in shapes], processes=2)
    assert report.count("compiled") == 3 and all(w.load_seconds > 0 for w in report.kernels), str(report)

    def no_compile(*args, **kwargs):
        raise AssertionError("a call after the warm-up compiled")

    monkeypatch.setattr(specializations, "compile_module", no_compile)
    for shape in shapes:
        x, y = source_and_poisoned(shape)
        yd = to_device(y)
        kernel(to_device(x), yd, BM=64, BN=64)
        np.testing.assert_array_equal(to_host(yd), x)


TUNING = textwrap.dedent("""
    import numpy as np
    import asyncdsl as ad
    import asyncdsl.jit.autotune as autotune_module
    from asyncdsl.examples.tile_copy import tile_copy
    from asyncdsl.runtime import to_device, to_host

    timed = []
    measure = autotune_module.device_milliseconds

    def counting(*args, **kwargs):
        timed.append(1)
        return measure(*args, **kwargs)

    autotune_module.device_milliseconds = counting
    tuned = ad.autotune([ad.Choice(tile_copy, BM=b, BN=b) for b in (32, 64, 128)])
    x = np.arange(512 * 256, dtype=np.float32).reshape(512, 256)
    y = to_device(np.zeros_like(x))
    tuned(to_device(x), y)
    assert np.array_equal(to_host(y), x)
    print(tuned.chosen(to_device(x), y).name, len(timed), sep="|")
""")


def test_a_second_process_takes_the_tuning_from_disk(tmp_path):
    environment = {**os.environ, "ASYNCDSL_CACHE_DIR": str(tmp_path / "cache"), "ASYNCDSL_KERNEL_CACHE": "1"}

    def run():
        done = subprocess.run([sys.executable, "-c", TUNING], env=environment, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        name, timed = done.stdout.strip().splitlines()[-1].split("|")
        return name, int(timed)

    first, timed = run()
    assert timed == 3
    assert run() == (first, 0)
