"""Shared test fixtures: assembling PTX (plain helpers live in support.py)."""

from __future__ import annotations

import gc
import os

import assembled
import pytest
from hypothesis import settings

# --ptx-digests and --compile-only (ptx_digests.py): the PTX of every kernel the tests compile, by hash.
from ptx_digests import pytest_addoption, pytest_configure  # noqa: F401 - pytest's hooks, by name

from asyncdsl import runtime
from asyncdsl.jit import specializations as specializations_module
from asyncdsl.runtime import ptxas as ptxas_module
from asyncdsl.runtime.ptxas import find_ptxas

# Installed before any test module imports `assemble`: each distinct PTX is assembled once a run.
_assembled_directory = assembled.install()

# The shared helpers (support.py) assert too: let pytest explain their failures as it does the tests'.
pytest.register_assert_rewrite("support")

# Tests count compilations and traces: kernels an earlier test (or run) compiled must not come
# from the disk.  The tests of that cache turn it on for themselves, in a directory of their own.
os.environ.setdefault("ASYNCDSL_KERNEL_CACHE", "0")

# Hypothesis's per-example deadline (200 ms) times the machine, not the law: in a parallel run on
# a small CI machine one slow example of a law that holds fails it.  Examples stay bounded by
# each test's max_examples, which `support.examples` scales by the profile: the default profile
# (CI's) draws half of each test's count, `--hypothesis-profile=deep` all of it.
settings.register_profile("asyncdsl", deadline=None, max_examples=50)
settings.register_profile("deep", deadline=None, max_examples=100)
settings.load_profile("asyncdsl")


def pytest_unconfigure(config):
    if _assembled_directory is not None:
        assembled.remove(_assembled_directory)
    # After this hook pytest collects garbage five times over, for exceptions raised in finalizers
    # of objects in reference cycles; a run ends holding every kernel its tests compiled, and each
    # collection walks all of it (11 s of a two-worker run's CPU).  One collection finds those
    # exceptions; what survives it is frozen out of the other four.
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def ptxas():
    """Assemble PTX for sm_90a (the `test` extra installs ptxas; its absence is a failure)."""
    assert find_ptxas() is not None, "ptxas is required: pip install 'asyncdsl[test]'"

    def run(ptx: str, arch: str = "sm_90a") -> str:
        return ptxas_module.assemble(ptx, arch)[1]

    return run


@pytest.fixture
def compilations(monkeypatch):
    """How many modules the kernels compile from here on (a one-element list)."""
    count = [0]
    compile_module = specializations_module.compile_module

    def counting(*args, **kwargs):
        count[0] += 1
        return compile_module(*args, **kwargs)

    monkeypatch.setattr(specializations_module, "compile_module", counting)
    return count


class RecordingKernel:
    """Stands in for a loaded kernel: records launches instead of making them, as (path, grid,
    addresses[, scalars]): "checked" for the full path, "warm" for a prepared launch; grids as
    the three dims a launch takes; scalars only for kernels that take some."""

    def __init__(self, binary):
        self.binary = binary
        self.calls = []

    def record(self, path, grid, addresses, scalars):
        scalars = (tuple(scalars),) if scalars else ()
        self.calls.append((path, runtime.launch_grid(grid), tuple(addresses), *scalars))

    def launch(self, grid, arrays, stream=None, scalars=()):
        self.record("checked", grid, (a.address for a in arrays), scalars)

    def prepare(self, grid):
        return RecordingLaunch(self, grid)


class RecordingLaunch:
    """Stands in for a prepared launch: records its launches in its kernel's calls."""

    def __init__(self, kernel, grid):
        self.kernel, self.grid = kernel, grid

    def launch(self, addresses, stream, scalars=(), grid=None):
        self.kernel.record("warm", grid or self.grid, addresses, scalars)


@pytest.fixture
def recorded(monkeypatch):
    """Kernel calls load `RecordingKernel`s (by binary) instead of loading anything."""
    loaded: dict = {}
    monkeypatch.setattr(runtime, "load_kernel",
                        lambda binary, device=0: loaded.setdefault(binary, RecordingKernel(binary)))
    return loaded

