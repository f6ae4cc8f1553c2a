"""`asyncdsl.save_workload` / `load_workload`: the specialisations a process compiled, written to a
file and read back as the same `Specialization`s (kernel, specs, constexprs), which a new process
warms up from the disk cache without tracing; what a file cannot name is refused when saving."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl import dtypes
from asyncdsl.examples.tile_copy import tile_copy
from asyncdsl.jit.specs import ScalarSpec


@ad.kernel(grid=(1,), block=128)
def scaled_rows(x, y, n: int, SHAPE: ad.constexpr, KIND: ad.constexpr = ad.float32,
                NOTE: ad.constexpr = None):
    """A kernel of every constexpr kind a workload file keeps (a tuple, a dtype, None, a string)."""
    ad.store(y.at[0:SHAPE[0]], ad.load(x.at[0:SHAPE[0]]).astype(KIND))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ASYNCDSL_KERNEL_CACHE", "1")
    monkeypatch.delenv("ASYNCDSL_INTERPRET", raising=False)


def compiled_here():
    f32, bf16 = ad.ArraySpec((64, 64), ad.float32), ad.ArraySpec((128, 64), ad.bfloat16)
    tile_copy.compile(f32, f32, BM=32, BN=32)
    tile_copy.compile(bf16, bf16, BM=64, BN=64)
    rows = ad.ArraySpec((256,), ad.float32)
    scaled_rows.compile(rows, rows, 48, SHAPE=(128, 1), KIND=ad.float32, NOTE="twice")
    return [tile_copy.specialization(f32, f32, BM=32, BN=32),
            tile_copy.specialization(bf16, bf16, BM=64, BN=64),
            scaled_rows.specialization(rows, rows, 48, SHAPE=(128, 1), KIND=ad.float32, NOTE="twice")]


def test_what_a_process_compiled_is_seen_saved_and_loaded_back(cache, tmp_path):
    wanted = compiled_here()
    seen = ad.seen_specializations()
    assert all(specialization in seen for specialization in wanted)
    path = tmp_path / "run.workload"
    ad.save_workload(path, wanted)
    loaded = ad.load_workload(path)
    assert loaded == wanted
    assert loaded[2].constexprs == {"SHAPE": (128, 1), "KIND": ad.float32, "NOTE": "twice"}
    assert loaded[2].specs[2] == ScalarSpec("int", 16)  # 48: a multiple of 16, compiled in
    report = ad.warmup(loaded, processes=1, load=False)
    assert [warmed.source for warmed in report.kernels] == ["memory"] * 3


FIRST_RUN = """
import sys
import asyncdsl as ad
from asyncdsl.examples.tile_copy import tile_copy
for rows, tile in ((256, 32), (128, 64)):
    spec = ad.ArraySpec((rows, 64), ad.float16)
    tile_copy.specialization(spec, spec, BM=tile, BN=32).binary()  # compiled and filed, as a launch does
ad.save_workload(sys.argv[1])  # everything this process holds
"""
NEXT_RUN = """
import sys
import asyncdsl as ad
report = ad.warmup(ad.load_workload(sys.argv[1]), processes=1, load=False)
print(" ".join(warmed.source for warmed in report.kernels),
      sum(len(kernel.specializations.compiled) for kernel in ad.Kernel.defined()))
"""


def test_a_new_process_warms_the_file_up_from_the_disk_cache(cache, tmp_path):
    # Both runs are fresh processes: the disk cache's key covers the user's modules loaded (the
    # tests' own among them here), which two runs of one program share.
    path = str(tmp_path / "run.workload")
    runs = [subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=300)
            for code in (FIRST_RUN, NEXT_RUN)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr + runs[1].stderr
    assert len(json.loads(open(path).read())["kernels"]) == 2
    assert runs[1].stdout.split() == ["disk", "disk", "0"]  # read from the disk, nothing traced


def test_what_a_file_cannot_name_is_refused_when_saving(cache, tmp_path):
    def made_here(x, y, B: ad.constexpr):
        ad.store(y, ad.load(x))

    local = ad.kernel(made_here, grid=(1,), block=128)
    spec = ad.ArraySpec((128,), ad.float32)
    with pytest.raises(ad.ArgumentError, match="made_here .* is no global of an importable module"):
        ad.save_workload(tmp_path / "w", [local.specialization(spec, spec, B=1)])
    refusal = "NOTE is <built-in function len>, a builtin_function_or_method: a workload file keeps"
    with pytest.raises(ad.ArgumentError, match=refusal):
        ad.save_workload(tmp_path / "w", [scaled_rows.specialization(spec, spec, 1, SHAPE=(128,), NOTE=len)])
    # A subclass of a kept type is part of the kernel's key, and would load as its base type.
    with pytest.raises(ad.ArgumentError, match=r"NOTE is np.float64\(2.0\), a float64"):
        ad.save_workload(tmp_path / "w",
                         [scaled_rows.specialization(spec, spec, 1, SHAPE=(128,), NOTE=np.float64(2.0))])
    script = ad.kernel(made_here, grid=(1,), block=128)
    script.fn.__module__ = "__main__"  # a kernel of the script a process runs: another cannot import it
    with pytest.raises(ad.ArgumentError, match="not the script it runs"):
        ad.save_workload(tmp_path / "w", [script.specialization(spec, spec, B=1)])


def test_a_bool_dtype_constexpr_survives_the_file(cache, tmp_path):
    rows = ad.ArraySpec((256,), ad.float32)
    wanted = [scaled_rows.specialization(rows, rows, 3, SHAPE=(128,), NOTE=("mask", dtypes.BOOL))]
    ad.save_workload(tmp_path / "w", wanted)
    assert ad.load_workload(tmp_path / "w") == wanted


def test_floats_come_back_with_their_bits(cache, tmp_path):
    rows = ad.ArraySpec((256,), ad.float32)
    wanted = [scaled_rows.specialization(rows, rows, 3, SHAPE=(128,), NOTE=value)
              for value in (float("nan"), -float("nan"), -0.0, (0.5, float("inf")))]
    ad.save_workload(tmp_path / "w", wanted)
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith("w")] == ["w"]  # nothing beside
    loaded = ad.load_workload(tmp_path / "w")
    assert loaded == wanted and len(set(loaded)) == 4  # a NaN is the NaN of its bits, -0.0 not 0.0
    assert math.copysign(1.0, loaded[2].constexprs["NOTE"]) == -1.0


def test_a_file_that_is_no_workload_or_names_a_kernel_gone_is_refused(tmp_path):
    (tmp_path / "a").write_text("{}")
    with pytest.raises(ad.ArgumentError, match="is no workload file"):
        ad.load_workload(tmp_path / "a")
    (tmp_path / "b").write_text("not json")
    with pytest.raises(ad.ArgumentError, match="is no workload file"):
        ad.load_workload(tmp_path / "b")
    gone = {"format": "asyncdsl workload 1", "kernels": [
        {"module": "asyncdsl.examples.tile_copy", "kernel": "no_such_kernel", "specs": [], "constexprs": {}}]}
    (tmp_path / "c").write_text(json.dumps(gone))
    with pytest.raises(ad.ArgumentError, match="tile_copy.no_such_kernel, which that module no longer"):
        ad.load_workload(tmp_path / "c")
    moved = {"format": "asyncdsl workload 1", "kernels": [
        {"module": "no_such_package.kernels", "kernel": "k", "specs": [], "constexprs": {}}]}
    (tmp_path / "d").write_text(json.dumps(moved))
    with pytest.raises(ad.ArgumentError, match="no_such_package.kernels.k, whose module does not import"):
        ad.load_workload(tmp_path / "d")
    bad_dtype = {"module": "m", "kernel": "k", "specs": [{"shape": [4], "dtype": "bool9"}], "constexprs": {}}
    for broken in ({"module": "m"}, bad_dtype, "a string"):
        (tmp_path / "e").write_text(json.dumps({"format": "asyncdsl workload 1", "kernels": [broken]}))
        with pytest.raises(ad.ArgumentError, match="kernel entry 0 is not one save_workload writes") as error:
            ad.load_workload(tmp_path / "e")
        assert error.value.location.file == __file__


def test_by_default_what_a_file_cannot_name_is_left_out_with_a_warning(cache, tmp_path):
    def made_here(x, y):
        ad.store(y, ad.load(x))

    spec = ad.ArraySpec((128,), ad.float32)
    local = ad.kernel(made_here, grid=(1,), block=128)  # alive while the test runs: seen
    local.compile(spec, spec)
    wanted = compiled_here()
    with pytest.warns(UserWarning, match=r"left out \d+ specialisation.*made_here"):
        written = ad.save_workload(tmp_path / "w")
    assert all(specialization in written for specialization in wanted)
    assert all(specialization.kernel.__name__ != "made_here" for specialization in written)
    # By name: whatever else the test run compiled may hold a NaN constexpr, never equal to itself.
    assert [s.name for s in ad.load_workload(tmp_path / "w")] == [s.name for s in written]

