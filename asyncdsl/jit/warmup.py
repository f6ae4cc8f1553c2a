"""Compiling a workload's kernels before its first call: `asyncdsl.warmup`.

    asyncdsl.warmup(
        matmul.specialization(a, b, c, CTAS=132),          # arrays or ArraySpecs, constexprs
        *(softmax_rows.specialization(ad.ArraySpec((m, 4096), ad.bfloat16), ..., ROWS=2, CHUNK=1024)
          for m in (1, 16, 4096)),
    )

Each `Specialization` (`Kernel.specialization`: a kernel, its argument specs and constexprs) is
taken from this process's caches, else from the disk cache (`runtime/binary_cache.py`), else
compiled.  Where several miss, worker processes forked from this one compile them side by side
(tracing and the passes are Python: one process runs them one at a time) and file them in the
disk cache, from which this process then reads them; the disk cache's per-key locks make a
kernel that two processes warm up at once (the ranks of one job) compile once.  On a GPU each
kernel is then loaded (the driver's JIT compile on first load, cached by the driver on disk);
`assemble=True` runs ptxas over each kernel's PTX instead of loading it, a check that needs no
GPU.  Workers are forked, so they see the kernels as this process defined them; they run no
CUDA call.  Ranks of one job that all warm the same workload up already compile side by side
(each starts at another kernel of the list): give each `processes=1`, or its share of the CPUs.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asyncdsl import runtime
from asyncdsl.config import knobs
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.jit.specializations import Specs, constexpr_keys
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernel_binary import KernelBinary

if TYPE_CHECKING:
    from asyncdsl.jit.kernel import Kernel


@dataclass(frozen=True, eq=False)
class Specialization:
    """One kernel for one argument layout: what `asyncdsl.warmup` compiles (`Kernel.specialization`
    makes them).  Two are equal when they name the same kernel binary: the constexprs compare by
    `constexpr_key`, so a NaN equals a NaN of the same bits."""

    kernel: Kernel
    specs: Specs
    constexprs: Mapping[str, Any]

    def _identity(self) -> tuple:
        return self.kernel, self.specs, constexpr_keys(self.constexprs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Specialization) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    @property
    def name(self) -> str:
        settings = ", ".join(f"{name}={value!r}" for name, value in self.constexprs.items())
        shapes = ", ".join(f"{'x'.join(map(str, spec.shape))} {spec.dtype}" if isinstance(spec, ArraySpec)
                           else spec.kind for spec in self.specs)
        return f"{self.kernel.__name__}({shapes}{', ' if settings else ''}{settings})"

    def binary(self) -> KernelBinary:
        return self.kernel.binary(self.specs, self.constexprs)

    def traced(self) -> bool:
        """Whether this process traced it (rather than reading it from the disk)."""
        return self.kernel.specializations.traced(self.specs, self.constexprs)

    def cached(self) -> KernelBinary | None:
        """The binary from this process's caches or the disk cache, None on a miss (no compile)."""
        return self.kernel.specializations.cached_binary(self.specs, self.constexprs)


@dataclass(frozen=True)
class Warmed:
    """What warming one specialisation did: where its binary came from ("memory"; "disk", filed
    by an earlier process or by one this process waited for; or "compiled", here or by a worker)
    and the seconds compiling, assembling and loading it took."""

    name: str
    source: str
    compile_seconds: float
    assemble_seconds: float = 0.0
    load_seconds: float = 0.0


@dataclass(frozen=True)
class WarmupReport:
    """Every specialisation's `Warmed`, in the order given, the processes that compiled and the
    wall-clock seconds of the whole warm-up."""

    kernels: tuple[Warmed, ...]
    processes: int
    seconds: float

    def count(self, source: str) -> int:
        return sum(warmed.source == source for warmed in self.kernels)

    def __str__(self) -> str:
        plural = "es" if self.processes > 1 else ""
        lines = [f"asyncdsl.warmup: {len(self.kernels)} kernels in {self.seconds:.3f} s "
                 f"({self.count('compiled')} compiled by {self.processes} process{plural}, "
                 f"{self.count('disk')} from disk, {self.count('memory')} in memory)"]
        lines += [f"  {w.source:8} {w.compile_seconds:7.3f} s  {w.name}" for w in self.kernels]
        return "\n".join(lines)


def warmup(*specializations: Specialization | Iterable[Specialization], processes: int | None = None,
           assemble: bool = False, load: bool | None = None, device: int = 0) -> WarmupReport:
    """Compile every kernel of `specializations` (each a `Specialization`, or an iterable of them)
    into this process and the disk cache, in up to `processes` processes (default: one per CPU;
    1 compiles here); with `assemble`, run ptxas over each; with `load` (default: when there is a
    GPU and `assemble` is not asked for), load each onto `device`.  See the module docstring."""
    start = time.perf_counter()
    wanted = _flattened(specializations)
    if processes is None:
        processes = os.cpu_count() or 1
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise ArgumentError(f"asyncdsl.warmup: processes must be an int >= 1, got {processes!r}",
                            user_location())
    sources = ["memory" if _in_memory(s) else "disk" for s in wanted]
    seconds = [0.0] * len(wanted)
    binaries: list[KernelBinary | None] = [s.cached() for s in wanted]
    missing = [i for i, binary in enumerate(binaries) if binary is None]
    workers = min(processes, len(missing)) if knobs.kernel_cache else 1
    traced_by_worker = [False] * len(wanted)
    if workers > 1:
        for i, done in _compile_in_workers([wanted[i] for i in missing], workers).items():
            if done is not None:
                seconds[missing[i]], traced_by_worker[missing[i]] = done
    # Each process starts at another kernel of the list (by its process id): processes warming one
    # workload up at once then compile different kernels side by side, not one behind another's lock.
    start_at = os.getpid() % len(missing) if missing else 0
    for i in missing[start_at:] + missing[:start_at]:
        began = time.perf_counter()
        cached = wanted[i].cached() if workers > 1 else None
        if cached is None:  # compiled here: one workers could not file (no disk key), or no workers
            binaries[i] = wanted[i].binary()
            seconds[i] = time.perf_counter() - began
            sources[i] = "compiled" if wanted[i].traced() else "disk"  # else another process filed it
        else:
            binaries[i] = cached
            sources[i] = "compiled" if traced_by_worker[i] else "disk"
    kernels = []
    if load is None:
        load = not assemble and runtime.has_gpu()
    for spec, binary, source, took in zip(wanted, binaries, sources, seconds):
        assert binary is not None, f"{spec.name}: every kernel missing from the caches is compiled above"
        assembled = loaded = 0.0
        if assemble:
            from asyncdsl.runtime.ptxas import assemble as run_ptxas  # subprocess: only when asked for

            began = time.perf_counter()
            run_ptxas(binary.ptx, binary.arch)
            assembled = time.perf_counter() - began
        if load:
            began = time.perf_counter()
            runtime.load_kernel(binary, device)
            loaded = time.perf_counter() - began
        kernels.append(Warmed(spec.name, source, took, assembled, loaded))
    return WarmupReport(tuple(kernels), workers if missing else 0, time.perf_counter() - start)


def _flattened(given: tuple) -> list[Specialization]:
    flat = []
    for item in given:
        many = isinstance(item, Iterable) and not isinstance(item, Specialization)
        items = list(item) if many else [item]
        for specialization in items:
            if not isinstance(specialization, Specialization):
                raise ArgumentError("asyncdsl.warmup takes kernel.specialization(...)s (or lists of "
                                    f"them), got {type(specialization).__name__} {specialization!r}",
                                    user_location())
            flat.append(specialization)
    return flat


def _in_memory(specialization: Specialization) -> bool:
    return specialization.kernel.specializations.has_binary(specialization.specs, specialization.constexprs)


# The specialisations the forked workers compile: set before the pool forks, read by index there.
_jobs: list[Specialization] = []


def _compile_in_workers(jobs: list[Specialization], workers: int) -> dict[int, tuple[float, bool] | None]:
    """Compile `jobs` into the disk cache in `workers` forked processes: per job, its seconds and
    whether its worker traced it (see `_compile_job`).  Where processes cannot be forked, or a
    worker died, what no worker filed is left to the caller, which compiles it itself."""
    global _jobs
    import multiprocessing  # with the pool, only where a warm-up compiles (a launch never does)
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    if "fork" not in multiprocessing.get_all_start_methods():
        return {}
    _import_the_compiler()
    _jobs = jobs
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return dict(zip(range(len(jobs)), pool.map(_compile_job, range(len(jobs)))))
    except BrokenProcessPool:
        return {}
    finally:
        _jobs = []


# The packages of the compiler's modules: the passes, and what a compile loads as its kernel
# needs it (the op modules, the lowering and resolution rules, the kernel language's calls).
_COMPILER_PACKAGES = ("asyncdsl.passes", "asyncdsl.passes.resolve", "asyncdsl.passes.to_ptx",
                      "asyncdsl.dialects", "asyncdsl.frontend")


def _import_the_compiler() -> None:
    """Every module of the compiler, imported before the pool forks, so that the workers inherit
    them instead of each importing those its kernels need."""
    importlib.import_module("asyncdsl.jit.specialize")
    for name in _COMPILER_PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{name}.{info.name}")


def _compile_job(index: int) -> tuple[float, bool] | None:
    """Compile job `index` into the disk cache: its seconds and whether this worker traced it
    (False: another process filed it first), or None when it failed (the caller then compiles it
    again, and raises the error at the user's line)."""
    began = time.perf_counter()
    try:
        _jobs[index].binary()
    except Exception:  # noqa: BLE001 - reported by the compile in the parent, which raises it again
        return None
    return time.perf_counter() - began, _jobs[index].traced()
