"""Running the warpgroups of a cluster as the hardware does: all live at once.

Every warpgroup of every CTA in a cluster is live from the start; one runs at a time and is
switched out at each blocking point (an mbarrier wait, a CTA or cluster barrier, an await of
bulk copies), whether or not it could go on, so that other warpgroups get to run between any
two waits, as on the GPU.  The next to run is the first ready warpgroup after the one that
stopped, in a fixed order (CTA rank, then warpgroup index), so every run of a kernel interleaves
the same way.

xDSL's interpreter runs nested regions by recursion, so a warpgroup stopped inside an `scf.for`
must keep its Python stack: each warpgroup runs on a thread of its own, and a baton (one
semaphore per thread and one for the controller) lets exactly one of them run at a time.  The
common case of one warpgroup per CTA and one CTA per cluster needs none of this: `SoloScheduler`
runs it on the caller's thread, where any wait that is not ready at once can never become ready.

When no live warpgroup is ready, nothing in flight can change that (copies complete when
issued), so that is a deadlock, reported with every blocked warpgroup and what it waits for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from asyncdsl.errors import DeadlockError, SourceLocation


class Blocker(Protocol):
    """What a warpgroup waits for at a blocking point."""

    location: SourceLocation | None
    at_kernel_exit: bool  # the wait of the epilogue, not of a line of the kernel body

    def ready(self) -> bool: ...

    def describe(self) -> str: ...


class _Abort(BaseException):
    """Unwinds a warpgroup's thread when the launch failed elsewhere.

    A BaseException, so that xDSL's per-op `except Exception` handlers let it through untouched.
    """


def deadlock_error(kernel: str, blocked: list[tuple[str, Blocker]]) -> DeadlockError:
    """The error naming every blocked warpgroup (`label`), where it waits and for what."""
    lines = [
        f"deadlock in kernel {kernel}: every live warpgroup waits and nothing can complete"
    ]
    for label, blocker in blocked:
        where = blocker.location or "an unknown line"
        lines.append(f"  {label} at {where}: {blocker.describe()}")
    # Point at a wait in the kernel body: one at the exit only waits for the others.
    inside = [blocker for _, blocker in blocked if not blocker.at_kernel_exit]
    return DeadlockError("\n".join(lines), (inside or [blocked[0][1]])[0].location)


class SoloScheduler:
    """One warpgroup alone in its cluster: it runs on the caller's thread."""

    def __init__(self, kernel: str):
        self.kernel = kernel

    def wait_until(self, label: str, blocker: Blocker) -> None:
        if not blocker.ready():
            raise deadlock_error(self.kernel, [(label, blocker)])


class _Fiber:
    """One warpgroup on its own thread, running only while it holds the baton."""

    def __init__(self, label: str, body: Callable[[], None], scheduler: ClusterScheduler):
        self.label = label
        self.blocker: Blocker | None = None
        self.done = False
        self.error: BaseException | None = None
        self.resume = threading.Semaphore(0)
        self._body = body
        self._scheduler = scheduler
        self.thread = threading.Thread(target=self._main, name=f"asyncdsl {label}", daemon=True)

    def _main(self) -> None:
        self.resume.acquire()
        try:
            if not self._scheduler.aborted:
                self._body()
        except _Abort:
            pass
        except BaseException as error:  # handed to the controller, which re-raises it
            self.error = error
        finally:
            self.done = True
            self._scheduler.baton.release()

    def ready(self) -> bool:
        return not self.done and (self.blocker is None or self.blocker.ready())


class ClusterScheduler:
    """The warpgroups of one cluster, each on a thread, switched at every blocking point."""

    def __init__(self, kernel: str):
        self.kernel = kernel
        self.aborted = False
        self.baton = threading.Semaphore(0)  # released by a fiber when it stops
        self._fibers: list[_Fiber] = []
        self._by_label: dict[str, _Fiber] = {}
        self._current = -1

    def spawn(self, label: str, body: Callable[[], None]) -> None:
        fiber = _Fiber(label, body, self)
        self._fibers.append(fiber)
        self._by_label[label] = fiber

    def wait_until(self, label: str, blocker: Blocker) -> None:
        """Called on a warpgroup's thread: stop here until `blocker` is ready."""
        fiber = self._by_label[label]
        fiber.blocker = blocker
        self.baton.release()
        fiber.resume.acquire()
        if self.aborted:
            raise _Abort()
        fiber.blocker = None

    def run(self) -> None:
        """Run every fiber to completion; re-raise the first error or report a deadlock."""
        for started in self._fibers:
            started.thread.start()
        try:
            while True:
                fiber = self._next_ready()
                if fiber is None:
                    # None is ready: every live fiber waits on its blocker.
                    blocked = [(f.label, f.blocker) for f in self._fibers
                               if not f.done and f.blocker is not None]
                    if not blocked:
                        return
                    raise deadlock_error(self.kernel, blocked)
                fiber.resume.release()
                self.baton.acquire()
                if fiber.error is not None:
                    raise fiber.error
        finally:
            self._abort_all()

    def _next_ready(self) -> _Fiber | None:
        count = len(self._fibers)
        for step in range(1, count + 1):
            position = (self._current + step) % count
            if self._fibers[position].ready():
                self._current = position
                return self._fibers[position]
        return None

    def _abort_all(self) -> None:
        self.aborted = True
        for fiber in self._fibers:
            if not fiber.done:
                fiber.resume.release()
                self.baton.acquire()
        for fiber in self._fibers:
            fiber.thread.join()
