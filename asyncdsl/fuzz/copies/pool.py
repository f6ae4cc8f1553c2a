"""Running many cases in worker processes, each case under a hard time limit.

A case runs in a worker (forked, so the imports are paid once); the worker's own SIGALRM ends
a case that overruns its budget, and the parent kills a worker that does not answer even then
(a loop inside numpy or C code ignores the signal) and starts a fresh one.  A worker that dies
(a crash, or memory: workers run under an address-space limit so that a runaway allocation
fails instead of swapping) costs only its case, reported `internal`.

The pool serves any fuzzer: `run_pool` takes its case runner and how it reports a case that
ended without a result of its own (killed, or its worker died), so that every result a fuzzer
sees is of its own kind; `run_cases` is the copy fuzzer's.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import resource
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Protocol, TypeVar

from .cases import Case
from .run import Result, run_case, run_indexed

GRACE_SECONDS = 15  # past the budget before the parent kills a worker
CASES_PER_WORKER = 400  # then a fresh worker: memory stays bounded
MEMORY_LIMIT_BYTES = 6 << 30


class CaseResult(Protocol):
    """What the pool reads of a case's result."""

    @property
    def fatal(self) -> bool:
        """The device may be unusable now: the worker must not run another case."""
        ...


ResultT = TypeVar("ResultT", bound=CaseResult)


class FuzzerError(Exception):
    """The fuzzer itself failed on a case (not asyncdsl): its own bug, reported loudly."""


def _worker(
    connection: Connection, budget: float, run: Callable[[int, int, str, float], CaseResult],
    limit_memory: bool, directory: str,
) -> None:
    if limit_memory:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
    try:
        for _ in range(CASES_PER_WORKER):
            request = connection.recv()
            if request is None:
                break
            seed, index = request
            try:
                result = run(seed, index, directory, budget)
            except Exception:  # noqa: BLE001 - the parent reports the fuzzer's own failures
                connection.send(traceback.format_exc())
                continue
            connection.send(result)
            if result.fatal:
                break
    finally:
        connection.close()


@dataclass
class _Slot:
    process: multiprocessing.process.BaseProcess
    connection: Connection
    directory: str  # the worker's case files: made and removed by the parent, which may kill it
    served: int = 0
    index: int | None = None
    started: float = 0.0


def run_cases(
    seed: int,
    indices: Iterable[int],
    jobs: int = 1,
    budget: float = 20.0,
    run: Callable[[int, int, str, float], Result] = run_indexed,
    on_gpu: bool = False,
) -> Iterator[tuple[int, Result]]:
    """The copy fuzzer's cases, by `run_pool`."""
    return run_pool(seed, indices, jobs, budget, run, Result.lost, on_gpu)


def run_pool(
    seed: int,
    indices: Iterable[int],
    jobs: int,
    budget: float,
    run: Callable[[int, int, str, float], ResultT],
    lost: Callable[[str, str, str], ResultT],
    on_gpu: bool = False,
) -> Iterator[tuple[int, ResultT]]:
    """Yield (index, result) for every case index, in completion order; `run(seed, index,
    directory, budget)` runs one case, `lost(name, outcome, detail)` makes the result of one
    that ended without its own: `hang` (killed past its budget) or `internal` (its worker
    died).  GPU workers are spawned, not forked (CUDA does not survive a fork), so `run` must be
    a module-level function then, and run without the memory limit (CUDA reserves much address
    space)."""
    context = multiprocessing.get_context("spawn") if on_gpu else multiprocessing.get_context("fork")
    pending = list(indices)[::-1]
    slots: list[_Slot] = []

    def start() -> _Slot:
        parent, child = context.Pipe()
        directory = tempfile.mkdtemp(prefix="asyncdsl-fuzz-")
        process = context.Process(target=_worker, args=(child, budget, run, not on_gpu, directory),
                                  daemon=True)
        process.start()
        child.close()
        return _Slot(process, parent, directory)

    def retire(slot: _Slot, kill: bool) -> None:
        if kill:
            slot.process.kill()
        else:
            try:
                slot.connection.send(None)
            except OSError:
                pass
        slot.process.join(5)
        slot.connection.close()
        shutil.rmtree(slot.directory, ignore_errors=True)
        slots.remove(slot)

    def dispatch(slot: _Slot) -> None:
        slot.index = pending.pop()
        slot.started = time.monotonic()
        slot.served += 1
        slot.connection.send((seed, slot.index))

    try:
        while pending or any(s.index is not None for s in slots):
            while pending and len(slots) < jobs:
                slots.append(start())
            for slot in slots:
                if slot.index is None and pending:
                    dispatch(slot)
            ready = wait([s.connection for s in slots if s.index is not None], timeout=1.0)
            for slot in list(slots):
                if slot.connection in ready:
                    index = slot.index
                    assert index is not None, "only a worker running a case answers"
                    try:
                        answer = slot.connection.recv()
                    except (EOFError, OSError):
                        answer = lost(f"{seed}:{index}", "internal", _died(slot.process))
                        retire(slot, kill=True)
                        yield index, answer
                        continue
                    if isinstance(answer, str):
                        raise FuzzerError(f"case {seed}:{index}:\n{answer}")
                    slot.index = None
                    yield index, answer
                    if slot.served >= CASES_PER_WORKER or answer.fatal:
                        retire(slot, kill=answer.fatal)
                elif slot.index is not None and time.monotonic() - slot.started > budget + GRACE_SECONDS:
                    index = slot.index
                    retire(slot, kill=True)
                    killed = f"killed after {budget + GRACE_SECONDS} s"
                    yield index, lost(f"{seed}:{index}", "hang", killed)
    finally:
        for slot in list(slots):
            retire(slot, kill=True)


def run_isolated(case: Case, budget: float = 20.0) -> Result:
    """One given case in a worker of its own: memory-limited and killable like the pool's."""
    for _, result in run_cases(0, [0], 1, budget, functools.partial(_run_given, case)):
        return result
    raise FuzzerError(f"no result for case {case.name}")


def _run_given(case: Case, seed: int, index: int, directory: str, budget: float) -> Result:
    return run_case(case, directory, budget, (seed, index))


def _died(process: multiprocessing.process.BaseProcess) -> str:
    """Why a worker that stopped answering is gone."""
    process.join(5)
    code = process.exitcode
    why = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
    return f"the worker died ({why}) running the case"


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
