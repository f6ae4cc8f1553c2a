"""A lock per cache key that every process on the machine sees, so that processes starting at once
(the ranks of one job, a pool warming a workload up) compile each kernel once between them.

The lock is `flock` on a file beside the cached one: held by the process, released by the kernel
when it exits however it exits, so a crash mid-compile leaves no stale lock. A process that waits
on it reads the cache again once it holds it (the compile it waited for has filed its result).
A directory that cannot hold the lock file costs the lock, not the compile: the cache stays an
optimisation.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # no flock (Windows): each process compiles what it misses, as without a cache
    fcntl = None


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[bool]:
    """Hold the lock of `path` (a file created for it) for the block; yields whether a lock is held
    (False where none can be taken: see the module docstring)."""
    descriptor = None
    if fcntl is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError:
            if descriptor is not None:
                os.close(descriptor)
            descriptor = None
    try:
        yield descriptor is not None
    finally:
        if descriptor is not None:
            assert fcntl is not None, "a descriptor is locked only where flock exists"
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            os.close(descriptor)
