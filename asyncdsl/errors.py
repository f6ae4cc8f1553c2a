"""The errors a user of asyncdsl can cause, and where in their source they happened.

Every error raised because of the user's kernel or arguments is an `AsyncDSLError` (a
`ValueError`), carries the user's source location when one is known, and states the rule that was
broken with the offending numbers.  Internal bugs stay ordinary Python exceptions.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from dataclasses import dataclass

# Frames inside these directories belong to asyncdsl itself; the first frame outside them is the
# user's line.  `dialects/` and `passes/` are installed as `asyncdsl.dialects`/`asyncdsl.passes`
# but live beside the package in a source checkout, so all three roots are listed.
_PACKAGE_ROOT = os.path.dirname(os.path.abspath(__file__))
_OWN_ROOTS = tuple(
    os.path.join(os.path.dirname(_PACKAGE_ROOT), name) + os.sep
    for name in ("asyncdsl", "dialects", "passes")
)
_EXAMPLES_ROOT = os.path.join(_PACKAGE_ROOT, "examples") + os.sep


@dataclass(frozen=True)
class SourceLocation:
    """A line of the user's Python source."""

    file: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@functools.cache  # per source file: tracing asks for every op, of each frame on the stack
def _is_own_frame(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_EXAMPLES_ROOT):
        return False  # the bundled examples are user code
    # contextlib's frames sit between a `with asyncdsl.when(...)` line and our code.
    return path.startswith(_OWN_ROOTS) or "/xdsl/" in path or path.endswith("contextlib.py")


def _is_library_frame(code) -> bool:
    """Our own code, or a method that a class of ours (a dataclass, an xDSL op) had generated: its
    source is "<string>", which is no line of the user's."""
    generated = (code.co_filename == "<string>" and code.co_name.startswith("__")
                 and code.co_name.endswith("__"))
    return generated or _is_own_frame(code.co_filename)


def user_location(skip: int = 1) -> SourceLocation | None:
    """The innermost frame of the caller's stack that is not asyncdsl's own code."""
    frame = sys._getframe(skip)
    while frame is not None:
        if not _is_library_frame(frame.f_code):
            return SourceLocation(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def raising_location(error: BaseException) -> SourceLocation | None:
    """The innermost frame of user code in the traceback of `error` (where kernel code raised it)."""
    found = None
    for frame, line in traceback.walk_tb(error.__traceback__):
        if not _is_library_frame(frame.f_code):
            found = SourceLocation(frame.f_code.co_filename, line)
    return found


def is_int(value) -> bool:
    """A Python int that is not a bool: what a count, a size, an index or an axis must be
    (bool subclasses int, and True passed as any of them is a mistake the checks refuse)."""
    return isinstance(value, int) and not isinstance(value, bool)


class AsyncDSLError(ValueError):
    """Base class of every error the user's kernel or arguments can cause."""

    def __init__(self, message: str, location: SourceLocation | None = None):
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)

    def at(self, location: SourceLocation | None) -> AsyncDSLError:
        """The same error attached to `location` (if it has none yet)."""
        if self.location is not None or location is None:
            return self
        return type(self)(self.message, location)


class TraceError(AsyncDSLError):
    """The kernel body used the DSL in a way it does not allow."""


class TransformError(AsyncDSLError):
    """A memref transform was built or applied with parameters it cannot take."""


class LayoutError(AsyncDSLError):
    """A register layout was built with parameters it cannot take, or given a tile it cannot hold."""


class MmaError(AsyncDSLError):
    """A wgmma the tensor cores cannot perform: its types, shapes or operand layouts."""


class CopyError(AsyncDSLError):
    """An async copy that the copy engine (TMA, bulk copy, cp.async) cannot perform."""


class ResourceError(AsyncDSLError):
    """The kernel needs more of a hardware resource (shared memory, registers, ...) than exists."""


class ArgumentError(AsyncDSLError):
    """A kernel was called with arguments it cannot take (device, dtype, shape, layout)."""


class UnsupportedTargetError(AsyncDSLError):
    """The feature exists but not on the architecture the kernel is compiled for."""


class DistributedError(AsyncDSLError):
    """Running on several GPUs failed: NVSHMEM missing, not started, or not able to reach a peer."""


class CudaError(AsyncDSLError):
    """A CUDA driver call failed."""

    def __init__(self, message: str, location: SourceLocation | None = None, code: int | None = None):
        super().__init__(message, location)
        self.code = code

    def at(self, location: SourceLocation | None) -> AsyncDSLError:
        if self.location is not None or location is None:
            return self
        return CudaError(self.message, location, self.code)


class PtxAssemblyError(AsyncDSLError):
    """ptxas rejected the PTX asyncdsl printed (a compiler bug, reported with the PTX log)."""


class PerformanceWarning(UserWarning):
    """The kernel runs, correctly, but the compiler said it will be slower than it could be (one
    of ptxas's "Potential Performance Loss" advisories: wgmma serialised, `setmaxnreg` ignored)."""


class AssumptionError(AsyncDSLError):
    """Something the compiler took on trust is false at run time: a hint (`asyncdsl.multiple_of`),
    or what a copy needs of a traced value (its alignment, its range).  Raised by the interpreter,
    and after a GPU launch of a kernel compiled with ASYNCDSL_DEBUG=1."""


class InterpretError(AsyncDSLError):
    """The interpreter found the kernel doing something the hardware would not survive."""


class DeadlockError(InterpretError):
    """Every live warpgroup waits and nothing in flight can wake any of them."""


class RaceError(InterpretError):
    """Shared memory was used while an async copy could still be reading or writing it."""


class BarrierError(InterpretError):
    """An mbarrier was driven past what it allows (more bytes or arrivals than expected)."""


class OutOfBoundsError(InterpretError):
    """A shared- or global-memory access fell outside its buffer."""
