"""The errors a user of asyncdsl can cause, and where in their source they happened.

Every error raised because of the user's kernel or arguments is an `AsyncDSLError`, carries the
user's source location when one is known, and states the rule that was broken with the offending
numbers.  Each subclass says what went wrong, and its docstring when it is raised, so that
`except` can pick what it handles: a kernel that deadlocks is a `DeadlockError` (an
`InterpretError`), a failed driver call a `CudaError`; none of them is a `ValueError`.  Internal
bugs stay ordinary Python exceptions.

    AsyncDSLError
        TraceError, TransformError, LayoutError, MmaError     (building and tracing a kernel)
        CopyError, ResourceError, UnsupportedTargetError      (compiling it; some also at launch)
        ArgumentError                                         (a call, or an option, it cannot take)
        CudaError, PtxAssemblyError, DistributedError         (the GPU, its tools, several GPUs)
        AssumptionError                                       (a hint or a traced value proved false)
        InterpretError                                        (what the interpreter found)
            DeadlockError, RaceError, BarrierError, OutOfBoundsError
    PerformanceWarning (a warning, not an error)
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
import types
from dataclasses import dataclass
from typing import TypeGuard

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
def _is_own_file(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_EXAMPLES_ROOT):
        return False  # the bundled examples are user code
    # contextlib's frames sit between a `with asyncdsl.when(...)` line and our code.
    return path.startswith(_OWN_ROOTS) or "/xdsl/" in path or path.endswith("contextlib.py")


def _is_torch_frame(frame: types.FrameType) -> bool:
    """Torch's frames sit between a call of an `asyncdsl.ops` operator and the library function it
    dispatches to (its dispatcher, custom ops, autograd; the code torch.compile generated), and
    are none of the user's lines wherever torch is installed: a frame belongs to torch when its
    module is `torch` or one of its submodules (inductor's output code included), or when it
    runs a graph torch.fx generated (its source is "<eval_with_key>.N")."""
    module = frame.f_globals.get("__name__")
    return ((isinstance(module, str) and (module == "torch" or module.startswith("torch.")))
            or frame.f_code.co_filename.startswith("<eval_with_key>"))


def _is_library_frame(frame: types.FrameType) -> bool:
    """Our own code, torch's, or a method that a class of ours (a dataclass, an xDSL op) had
    generated: its source is "<string>", which is no line of the user's."""
    code = frame.f_code
    generated = (code.co_filename == "<string>" and code.co_name.startswith("__")
                 and code.co_name.endswith("__"))
    return generated or _is_own_file(code.co_filename) or _is_torch_frame(frame)


def _package(frame: types.FrameType) -> str | None:
    """The top-level package of the module whose code `frame` runs."""
    module = frame.f_globals.get("__name__")
    return module.partition(".")[0] if isinstance(module, str) else None


def user_location(skip: int = 1, packages: tuple[str, ...] = ()) -> SourceLocation | None:
    """The innermost frame of the caller's stack that is not asyncdsl's own code (nor torch's, nor
    that of a module of `packages`, top-level names such as "transformers")."""
    frame: types.FrameType | None = sys._getframe(skip)
    while frame is not None:
        if not _is_library_frame(frame) and not (packages and _package(frame) in packages):
            return SourceLocation(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def raising_location(error: BaseException) -> SourceLocation | None:
    """The innermost frame of user code in the traceback of `error` (where kernel code raised it)."""
    found = None
    for frame, line in traceback.walk_tb(error.__traceback__):
        if not _is_library_frame(frame):
            found = SourceLocation(frame.f_code.co_filename, line)
    return found


def is_int(value: object) -> TypeGuard[int]:
    """A Python int that is not a bool: what a count, a size, an index or an axis must be
    (bool subclasses int, and True passed as any of them is a mistake the checks refuse)."""
    return isinstance(value, int) and not isinstance(value, bool)


class AsyncDSLError(Exception):
    """The base class of every error the user's kernel or arguments can cause; `location` is the
    user's source line when one is known, `message` the rule broken without it."""

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
    """Raised while a kernel is traced, at the kernel line responsible, when its body uses the DSL
    in a way the DSL does not allow: an API call outside a kernel or with values it cannot take, a
    traced value used outside the loop or branch that made it, an op the verifiers refuse, a
    constexpr the kernel's own code refuses.  A Python error of kernel code while tracing (a
    `ZeroDivisionError` on `BK=0`) becomes one too, the original chained as its cause."""


class TransformError(AsyncDSLError):
    """Raised when a memref transform (`asyncdsl.TileTransform`, `TransposeTransform`, ...) or a
    buffer's layout is built with parameters it cannot take, or applied to a shape, index or
    strides it cannot transform: at the constructor, or where a copy or buffer uses it."""


class LayoutError(AsyncDSLError):
    """Raised when a register layout (`asyncdsl.WGMMA`, `asyncdsl.strided(...)`, ...) is built with
    parameters it cannot take, or given a tile shape it cannot hold; and by the `infer-layouts`
    pass and the tile lowerings when no layout serves a tile the way the kernel uses it."""


class MmaError(AsyncDSLError):
    """Raised while `asyncdsl.wgmma` is traced when the tensor cores cannot perform it: operand
    types, the instruction shape, or operand layouts a wgmma cannot read."""


class CopyError(AsyncDSLError):
    """Raised when an async copy is compiled (or planned, or its tensor map encoded) and the copy
    engine it needs (TMA, bulk copy, cp.async, multicast) cannot perform it: a box, stride,
    alignment, swizzle or element type outside the engine's rules."""


class ResourceError(AsyncDSLError):
    """Raised when the kernel needs more of a hardware resource than there is: shared memory
    (when compiled), registers (a register tile too large while tracing, or a block too large for
    the registers the kernel uses, at load), threads or CTAs in a block or cluster, room in a
    profile buffer (after a profiled run)."""


class ArgumentError(AsyncDSLError):
    """Raised when a kernel is called with arguments it cannot take (device, dtype, shape, layout,
    alignment, a scalar out of range, a call that does not fit the kernel's parameters), or an
    asyncdsl function or option is given a value it does not accept."""


class UnsupportedTargetError(AsyncDSLError):
    """Raised when the feature exists but not on the architecture the kernel is compiled for or
    runs on (a Blackwell-only copy form on sm_90a; an sm_100a kernel launched on Hopper)."""


class DistributedError(AsyncDSLError):
    """Raised when running on several GPUs fails: NVSHMEM missing, not started (or started twice),
    a PE of the job that failed, or a peer that loads and stores cannot reach."""


class CudaError(AsyncDSLError):
    """Raised when a CUDA driver call fails (loading a module, encoding a tensor map, launching,
    synchronising); `code` is the driver's `CUresult`."""

    def __init__(self, message: str, location: SourceLocation | None = None, code: int | None = None):
        super().__init__(message, location)
        self.code = code

    def at(self, location: SourceLocation | None) -> AsyncDSLError:
        if self.location is not None or location is None:
            return self
        return CudaError(self.message, location, self.code)


class PtxAssemblyError(AsyncDSLError):
    """Raised when ptxas or the driver's JIT rejects the PTX asyncdsl printed: a compiler bug,
    reported with the assembler's log."""


class PerformanceWarning(UserWarning):
    """Warned when the kernel runs, correctly, but the compiler said it will be slower than it
    could be (one of ptxas's "Potential Performance Loss" advisories: wgmma serialised,
    `setmaxnreg` ignored)."""


class AssumptionError(AsyncDSLError):
    """Raised when something the compiler took on trust is false at run time: a hint
    (`asyncdsl.multiple_of`), or what a copy needs of a traced value (its alignment, its range).
    The interpreter raises it at the op; a GPU launch of a kernel compiled with ASYNCDSL_DEBUG=1
    raises it after the kernel ran."""


class InterpretError(AsyncDSLError):
    """Raised by the interpreter when the kernel does something the hardware would not survive or
    leaves undefined (an address off its buffer, registers read before written, a division by
    zero, two scatter elements writing one array element); its subclasses name the common kinds."""


class DeadlockError(InterpretError):
    """Raised by the interpreter when every live warpgroup waits and nothing in flight can wake
    any of them (where the GPU would hang), at the line of a wait, naming what each waits for."""


class RaceError(InterpretError):
    """Raised by the interpreter when shared memory is used while an async copy could still be
    reading or writing it: an access the kernel did not order after the copy."""


class BarrierError(InterpretError):
    """Raised by the interpreter when an mbarrier is driven past what it allows: more bytes or
    arrivals than its phase expects."""


class OutOfBoundsError(InterpretError):
    """Raised by the interpreter when a shared- or global-memory access falls outside its buffer."""
