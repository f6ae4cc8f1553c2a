"""The PTX every test compiles, by hash: a pytest plugin for showing that a change of the compiler's
code leaves every kernel's PTX byte-identical.

    python3 -m pytest -q --ptx-digests=before.json                            # the CPU suite
    python3 -m pytest -q --ptx-digests=gpu.json --compile-only tests/gpu
    python3 tests/ptx_digests.py before.json after.json                        # compare

`--ptx-digests` records, per test, the sha256 of the PTX of every module the test compiled.
`--compile-only` lets the GPU tests run on a machine without a GPU so far as compiling goes: a
kernel call, `interpret` and `profile` compile their kernel and launch nothing, arrays stay on the
host; the tests' own checks then fail or pass by chance, which is not what such a run is for.
The comparison names the PTX compiled in one run only, with a test that compiled it.  Kernels
that hypothesis draws are left out: which examples it draws can differ between runs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--ptx-digests", metavar="PATH", help="write the sha256 of every PTX each test compiles")
    parser.addoption("--compile-only", action="store_true",
                     help="let tests/gpu compile their kernels on a machine without a GPU, launching none")


class Digests:
    """The hashes of the PTX compiled under each test, by node id."""

    def __init__(self, path: Path):
        self.path = path
        self.by_test: dict[str, set[str]] = defaultdict(set)
        self.current = "<collection>"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        # Kernels hypothesis draws are not recorded: which examples it draws can differ between
        # runs, so they would make a comparison noisy; the fixed kernels of every test are.
        drawn = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        self.current = None if drawn else item.nodeid
        yield
        self.current = "<between tests>"

    def record(self, ptx: str) -> None:
        if self.current is not None:
            self.by_test[self.current].add(hashlib.sha256(ptx.encode()).hexdigest())

    def pytest_sessionfinish(self, session):
        worker = getattr(session.config, "workerinput", {}).get("workerid")
        if worker is not None:  # a pytest-xdist worker: its share, which the controller merges
            _write(self.path.with_name(f"{self.path.name}.{worker}"), self.by_test)
            return
        for share in sorted(self.path.parent.glob(f"{self.path.name}.gw*")):
            for test, hashes in json.loads(share.read_text()).items():
                self.by_test[test].update(hashes)
            share.unlink()
        _write(self.path, self.by_test)


def _write(path: Path, by_test: dict[str, set[str]]) -> None:
    path.write_text(json.dumps({test: sorted(hashes) for test, hashes in sorted(by_test.items())}, indent=0))


def pytest_configure(config):
    path = config.getoption("--ptx-digests")
    if path:
        digests = Digests(Path(path))
        config.pluginmanager.register(digests, "ptx-digests-recorder")
        from asyncdsl.passes import pipeline

        passes_and_ptx = pipeline._passes_and_ptx

        def recording(*args, **kwargs):
            compiled = passes_and_ptx(*args, **kwargs)
            digests.record(compiled.ptx)
            return compiled

        # Wrapped after the trace, not around it: a frame of this file on the stack while a kernel
        # is traced would be the "user's line" of the errors the library's kernels raise.
        pipeline._passes_and_ptx = recording
    if config.getoption("--compile-only"):
        compile_instead_of_launching()


def compile_instead_of_launching(patch=setattr, compiled=lambda kernel: None) -> None:
    """From here on (or, with `monkeypatch.setattr` as `patch`, for one test) a kernel call,
    `interpret`, `profile` and `prepare` compile their kernel, hand it to `compiled` and launch
    nothing; the runtime reports an H200 and keeps arrays on the host."""
    import numpy as np

    import asyncdsl
    from asyncdsl import runtime
    from asyncdsl.runtime import driver

    hopper = driver.DeviceFacts(0, "compile-only stand-in for an H200", (9, 0), 232448, 132, 13000)
    for module in (runtime, driver):
        patch(module, "has_gpu", lambda: True)
        patch(module, "device_facts", lambda device=0: hopper)
    patch(runtime, "to_device", lambda array, *args, **kwargs: np.array(array, copy=True))
    patch(runtime, "to_host", lambda array, *args, **kwargs: np.array(array, copy=True))

    def compile_only(self, *args, stream=None, devices=None, **kwargs):
        compiled(self.compile(*args, **kwargs))

    def profile_only(self, *args, stream=None, **kwargs):
        compiled(self.compile(*args, profile=True, **kwargs))

    def prepare_only(self, *args, stream=None, **kwargs):
        compiled(self.compile(*args, **kwargs))
        return lambda *arrays, stream=None: None  # a prepared call that launches nothing

    kernel_class = type(asyncdsl.kernel(lambda: None))
    for name, replacement in (("__call__", compile_only), ("interpret", compile_only),
                              ("profile", profile_only), ("prepare", prepare_only)):
        patch(kernel_class, name, replacement)


def compare(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    """The PTX modules compiled in one run only, each with the tests that compiled it.  The runs
    are compared as wholes: which test compiles a kernel first, and so compiles it at all, can
    differ between runs (a kernel is compiled once a process, and pytest-xdist deals the tests
    out afresh each run)."""
    old, new = _tests_by_hash(before), _tests_by_hash(after)
    return ([f"gone: {digest[:12]} (compiled by {min(old[digest])})" for digest in sorted(old.keys() - new)]
            + [f"new: {digest[:12]} (compiled by {min(new[digest])})" for digest in sorted(new.keys() - old)])


def _tests_by_hash(run: dict[str, list[str]]) -> dict[str, set[str]]:
    tests: dict[str, set[str]] = defaultdict(set)
    for test, hashes in run.items():
        for digest in hashes:
            tests[digest].add(test)
    return tests


if __name__ == "__main__":
    first, second = (json.loads(Path(name).read_text()) for name in sys.argv[1:3])
    changed = compare(first, second)
    total = len(_tests_by_hash(first))
    print("\n".join(changed) if changed else f"identical: {total} distinct PTX modules")
    sys.exit(1 if changed else 0)
