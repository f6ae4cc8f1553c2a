"""`asyncdsl.warmup` on the CPU: a workload's kernels compiled by forked workers into the disk
cache and read from there by the caller, which traces none of them; a second warm-up finds them
in memory, a fresh kernel object (as in a new process) on disk; ptxas assembles each on request;
a kernel that does not compile raises its own error at the caller's line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import asyncdsl as ad
from asyncdsl.runtime.ptxas import find_ptxas


def copy_tiles(x, y, B: ad.constexpr):
    """A tile copy in B x B tiles (the workload's kernel)."""
    i, j = ad.program_id(0), ad.program_id(1)
    buf = ad.smem((B, B), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(i * B, B), ad.ds(j * B, B)], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(i * B, B), ad.ds(j * B, B)])
    ad.await_async_copy(0)


def grid(x, y, B):
    return (x.shape[0] // B, x.shape[1] // B)


def workload(kernel):
    """The kernel at three shapes, one of them in two tile sizes."""
    return [kernel.specialization(ad.ArraySpec(shape, ad.float32), ad.ArraySpec(shape, ad.float32), B=b)
            for shape, b in (((64, 64), 32), ((128, 64), 32), ((128, 128), 64), ((128, 128), 32))]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ASYNCDSL_KERNEL_CACHE", "1")
    monkeypatch.delenv("ASYNCDSL_INTERPRET", raising=False)
    return tmp_path / "cache" / "binary"


def test_workers_compile_into_the_disk_cache_and_the_caller_traces_nothing(cache):
    kernel = ad.kernel(copy_tiles, grid=grid)
    report = ad.warmup(workload(kernel), processes=2, load=False)
    assert [warmed.source for warmed in report.kernels] == ["compiled"] * 4
    assert report.processes == 2 and report.count("compiled") == 4
    assert not kernel.specializations.compiled  # every binary came from the disk, none traced here
    assert len(kernel.specializations.binaries) == 4
    assert len(list(cache.rglob("*.kernel"))) == 4
    # What the warm-up compiled is what a call compiles: the same PTX as a trace in this process.
    first = workload(kernel)[0]
    assert first.binary().ptx == kernel.compile(*first.specs, **first.constexprs).ptx
    assert "4 kernels" in str(report) and "copy_tiles(64x64 float32, 64x64 float32, B=32)" in str(report)

    again = ad.warmup(workload(kernel), processes=2, load=False)
    assert [warmed.source for warmed in again.kernels] == ["memory"] * 4 and again.processes == 0
    fresh = ad.kernel(copy_tiles, grid=grid)  # what a new process holds: nothing in memory
    from_disk = ad.warmup(*workload(fresh), processes=2, load=False)
    assert [warmed.source for warmed in from_disk.kernels] == ["disk"] * 4
    assert not fresh.specializations.compiled


def test_one_process_compiles_here(cache):
    kernel = ad.kernel(copy_tiles, grid=grid)
    report = ad.warmup(workload(kernel)[:2], processes=1, load=False)
    assert [warmed.source for warmed in report.kernels] == ["compiled"] * 2 and report.processes == 1
    assert len(kernel.specializations.compiled) == 2


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_assemble_runs_ptxas_over_every_kernel(cache):
    report = ad.warmup(workload(ad.kernel(copy_tiles, grid=grid))[:2], processes=1, assemble=True)
    assert all(warmed.assemble_seconds > 0 and warmed.load_seconds == 0 for warmed in report.kernels)


def test_a_kernel_that_does_not_compile_raises_its_error_at_the_call(cache):
    kernel = ad.kernel(copy_tiles, grid=grid)
    bad = kernel.specialization(ad.ArraySpec((64, 64), ad.float32), ad.ArraySpec((64, 64), ad.float32), B=7)
    with pytest.raises(ad.AsyncDSLError) as raised:
        ad.warmup(workload(kernel)[0], bad, processes=2, load=False)
    assert raised.value.location is not None
    assert workload(kernel)[0].cached() is not None  # the good one was compiled all the same


def test_bad_arguments_are_named(cache):
    with pytest.raises(ad.ArgumentError, match="takes kernel.specialization"):
        ad.warmup(42)
    with pytest.raises(ad.ArgumentError, match="processes must be an int >= 1"):
        ad.warmup(processes=0)


RANK = """
import os, sys, time
from pathlib import Path
import asyncdsl as ad
from asyncdsl.examples.tile_copy import tile_copy

ready, ranks = Path(sys.argv[1]), int(sys.argv[2])
(ready / str(os.getpid())).touch()
while len(list(ready.iterdir())) < ranks:  # start together
    time.sleep(0.01)
specs = [ad.ArraySpec(shape, ad.float32) for shape in ((64, 64), (128, 64), (128, 128), (256, 64))]
report = ad.warmup([tile_copy.specialization(s, s, BM=32, BN=32) for s in specs], processes=1, load=False)
print(report.count("compiled"), report.count("disk"))
"""


def test_ranks_warming_up_at_once_compile_each_kernel_once_and_say_so(tmp_path):
    ranks, ready = 3, tmp_path / "ready"
    ready.mkdir()
    environment = {**os.environ, "ASYNCDSL_CACHE_DIR": str(tmp_path / "cache"), "ASYNCDSL_KERNEL_CACHE": "1"}
    running = [subprocess.Popen([sys.executable, "-c", RANK, str(ready), str(ranks)], env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(ranks)]
    counts = []
    for rank in running:
        out, err = rank.communicate(timeout=300)
        assert rank.returncode == 0, err
        counts.append(tuple(map(int, out.split())))
    assert sum(compiled for compiled, _ in counts) == 4  # each kernel compiled by one rank
    assert sum(disk for _, disk in counts) == 4 * (ranks - 1)  # and read from the disk by the others


def test_an_autotuned_call_names_every_choice_to_warm_up(cache):
    kernel = ad.kernel(copy_tiles, grid=grid)
    tuned = ad.autotune([ad.Choice(kernel, B=32), ad.Choice(kernel, B=64)])
    spec = ad.ArraySpec((128, 128), ad.float32)
    report = ad.warmup(tuned.specializations(spec, spec), processes=1, load=False)
    assert [w.name for w in report.kernels] == ["copy_tiles(128x128 float32, 128x128 float32, B=32)",
                                                "copy_tiles(128x128 float32, 128x128 float32, B=64)"]
    assert report.count("compiled") == 2


def die(index):
    """A worker killed mid-compile (out of memory, a signal)."""
    os._exit(3)


def test_a_worker_that_dies_leaves_its_kernels_to_the_caller(cache, monkeypatch):
    from asyncdsl.jit import warmup as warmup_module

    monkeypatch.setattr(warmup_module, "_compile_job", die)
    kernel = ad.kernel(copy_tiles, grid=grid)
    report = ad.warmup(workload(kernel)[:2], processes=2, load=False)
    assert [warmed.source for warmed in report.kernels] == ["compiled"] * 2
    assert len(kernel.specializations.compiled) == 2  # compiled here instead
