"""Profiler regions in kernel code: `with asyncdsl.region("name"):`.

A region names a stretch of what a warpgroup does (waiting for a slot, issuing copies, computing).
Regions nest and may sit inside `asyncdsl.range` and `asyncdsl.when`.  They trace to markers only
when the kernel is traced for profiling (`Kernel.profile`); in every other call they trace
nothing, so a kernel keeps its regions in production at no cost.  A region times what its body
issues: one around an async copy ends when the copy is issued, not when it lands, unless the
region also holds the wait.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing


@contextmanager
def region(name: str) -> Iterator[None]:
    """Time the body as region `name` of the executing warpgroup when the kernel is profiled."""
    tracer = tracing.current("asyncdsl.region")
    location = user_location()
    if not isinstance(name, str) or not name:
        raise TraceError(f"asyncdsl.region takes a non-empty str name, got {name!r}", location)
    block = tracer.block
    if tracer.profiling:
        tracer.emit(ir.RegionBeginOp(name), location)
    yield
    if tracer.block is not block:
        # Only a loop generator advanced by hand inside the `with` can do this.
        raise TraceError(
            f"region {name!r} began in one block and ends in another (an asyncdsl.range or asyncdsl.when "
            "entered inside it must also end inside it)",
            location,
        )
    if tracer.profiling:
        tracer.emit(ir.RegionEndOp(name), location)
