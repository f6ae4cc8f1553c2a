"""A kernel's compiled specialisations, one per (argument specs, constexpr values, debug mode,
profiling, devices): traced and compiled on a miss, kept for the process, and for GPU launches
also across processes.

`compile` gives the `CompiledKernel` (the IR the interpreter runs, and the binary); `binary` gives
only what the GPU runs: compiled in this process, else taken from the kernels earlier processes
compiled from the same code (`runtime/binary_cache.py`, under `disk_key`: no tracing, no passes),
else compiled now and filed there (one process compiling a key at a time, the others waiting
for it: `_shared_binary`).  A scalar's spec holds its kind and divisibility, never its
value, so no runtime value ever compiles again.

The compiler (xDSL, the dialects, the passes, the frontend's op emitters) loads when a kernel is
first traced: `import asyncdsl` and launches of kernels compiled by earlier processes never need it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from functools import partial
from types import FunctionType
from typing import TYPE_CHECKING, Any

from asyncdsl import runtime
from asyncdsl.config import knobs
from asyncdsl.errors import SourceLocation
from asyncdsl.jit.code_digest import bound_values, code_digest, keyable, value_text
from asyncdsl.jit.options import KernelOptions
from asyncdsl.jit.specs import ArraySpec, ScalarSpec
from asyncdsl.kernel_binary import KernelBinary, constexpr_key

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from asyncdsl.passes.pipeline import CompiledKernel

Specs = tuple[ArraySpec | ScalarSpec, ...]

# Held while a kernel is traced and compiled: the frontend keeps the kernel being traced in one
# stack for the process (`frontend.tracer`), so traces in two threads at once would put each
# other's ops in their kernels.  Compiling is Python, one thread at a time anyway.
_compiling = threading.RLock()


def trace_kernel(*args, **kwargs) -> ModuleOp:
    """`jit.specialize.trace_kernel`, imported on first use."""
    from asyncdsl.jit.specialize import trace_kernel as trace

    return trace(*args, **kwargs)


def compile_module(*args, **kwargs) -> CompiledKernel:
    """`passes.pipeline.compile_module`, imported on first use."""
    from asyncdsl.passes.pipeline import compile_module as run

    return run(*args, **kwargs)


class Specializations:
    """The compiled specialisations of kernel function `fn` (see the module docstring)."""

    def __init__(self, fn: FunctionType, runtime_names: tuple[str, ...], options: KernelOptions,
                 definition: SourceLocation | None):
        self._fn = fn
        self._runtime_names = runtime_names
        self._options = options
        self._definition = definition
        self.compiled: dict[tuple, CompiledKernel] = {}
        self.binaries: dict[tuple, KernelBinary] = {}

    def compile(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool = False,
                devices: int = 1) -> CompiledKernel:
        """The compiled kernel for these argument specs and constexpr values; with `profile`, the
        kernel `Kernel.profile` launches, its regions recording into a profile buffer; traced for
        `devices` devices (`asyncdsl.num_devices()`)."""
        key = _specialization(specs, constexprs, profile, devices)
        compiled = self.compiled.get(key)
        if compiled is None:
            with _compiling:
                compiled = self.compiled.get(key)  # compiled by the thread this one waited for
                if compiled is None:
                    compiled = compile_module(self._tracing(specs, constexprs, profile, devices),
                                              descriptor_mode=self._options.descriptor_mode)
                    self.compiled[key] = compiled
        return compiled

    def binary(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool = False) -> KernelBinary:
        """What the GPU runs for these specs and constexprs (see the module docstring), traced for
        the devices of this process's NVSHMEM job (`asyncdsl.distributed`; one without it)."""
        binary = self.cached_binary(specs, constexprs, profile)
        if binary is not None:
            return binary
        devices = runtime.world_size()
        key = _specialization(specs, constexprs, profile, devices)
        disk_key = self.disk_key(specs, constexprs, profile, devices) if knobs.kernel_cache else None
        if disk_key is None:
            binary = self.compile(specs, constexprs, profile, devices).binary
        else:
            binary = self._shared_binary(disk_key, specs, constexprs, profile, devices)
        self.binaries[key] = binary
        return binary

    def cached_binary(self, specs: Specs, constexprs: Mapping[str, Any],
                      profile: bool = False) -> KernelBinary | None:
        """`binary` from this process's caches or the disk cache; None where it would compile."""
        devices = runtime.world_size()
        key = _specialization(specs, constexprs, profile, devices)
        binary = self.binaries.get(key)
        if binary is None and key in self.compiled:
            binary = self.compiled[key].binary
        if binary is None and knobs.kernel_cache:
            disk_key = self.disk_key(specs, constexprs, profile, devices)
            binary = None if disk_key is None else runtime.BinaryCache().load(disk_key)
        if binary is not None:
            self.binaries[key] = binary
        return binary

    def traced(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool = False) -> bool:
        """Whether this process traced and compiled the specialisation (not read it from disk)."""
        return _specialization(specs, constexprs, profile, runtime.world_size()) in self.compiled

    def has_binary(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool = False) -> bool:
        """Whether this process holds the binary already (compiled here, or read from disk)."""
        key = _specialization(specs, constexprs, profile, runtime.world_size())
        return key in self.binaries or key in self.compiled

    def _shared_binary(self, disk_key: str, specs: Specs, constexprs: Mapping[str, Any], profile: bool,
                       devices: int) -> KernelBinary:
        """The binary filed under `disk_key` (by a process this one waited for), else compiled and
        filed holding the key's lock, so that processes missing it at once (a job's ranks,
        `asyncdsl.warmup`'s workers) compile it once: the others wait and read what it filed."""
        cache = runtime.BinaryCache()
        with cache.locked(disk_key):
            binary = cache.load(disk_key)
            if binary is None:
                binary = self.compile(specs, constexprs, profile, devices).binary
                # A trace that imported a module of the user's (or set a value the key reads) ran
                # code the key did not cover: a process that has not imported it computes the same
                # key, and must not find this kernel under it.
                if self.disk_key(specs, constexprs, profile, devices) == disk_key:
                    cache.store(disk_key, binary)
        return binary

    def stages(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool = False,
               only: Collection[str] | None = None) -> dict[str, str]:
        """The IR after tracing and after every pass, then the PTX; with `only`, just the stages it
        names (of `passes.pipeline.STAGE_NAMES`), the others not printed.  Compiled anew, as a
        compile keeps no text; that compile then serves the specialisation's `compile` calls."""
        trace = self._tracing(specs, constexprs, profile)
        with _compiling:
            compiled = compile_module(trace, descriptor_mode=self._options.descriptor_mode,
                                      keep_stages=True if only is None else only)
        stages = dict(compiled.stages)
        compiled.stages.clear()
        self.compiled.setdefault(_specialization(specs, constexprs, profile, 1), compiled)
        return stages

    def disk_key(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool,
                 devices: int) -> str | None:
        """The key of a specialisation across processes: the code (`code_digest`) and the values
        it names (`bound_values`), this kernel and its options, the specs and the constexprs by
        type and text (`code_digest.value_text`: arrays by their bytes); None when a constexpr's
        or bound value's text would differ in every process (`code_digest.keyable`)."""
        code = self.code_key()
        values = repr(
            sorted((name, type(value).__qualname__, value_text(value)) for name, value in constexprs.items()))
        if code is None or not keyable(values):
            return None
        options = self._options
        digest = hashlib.sha256()
        for part in (runtime.BINARY_FORMAT, code, str(options.profile_events if profile else None),
                     repr(specs), values, str(knobs.debug), str(devices)):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    def code_key(self) -> str | None:
        """What every specialisation's key shares, as text: the code (`code_digest`) and the
        values it names (`bound_values`), the kernel function and its options; None when the
        kernel has no key across processes (see `disk_key`)."""
        fn, options = self._fn, self._options
        code = code_digest(fn.__code__.co_filename)
        if code is None:
            return None
        bound = bound_values(fn)
        if bound is None:
            return None
        # A function exec'd from source without `__name__` in its globals has no module: its file
        # names it (a module name has no space).
        module = fn.__module__ or f"file {fn.__code__.co_filename}"
        return "\0".join((code, module, fn.__qualname__, options.name, repr(options.launch),
                          options.descriptor_mode, bound))

    def _tracing(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool,
                 devices: int = 1) -> Callable[[], ModuleOp]:
        """What traces this specialisation's module, each time it is called (in the debug mode of now)."""
        options = self._options
        return partial(
            trace_kernel, self._fn, options.name, self._runtime_names, specs, constexprs,
            replace(options.launch, devices=devices), self._definition, knobs.debug,
            options.profile_events if profile else None,
        )


def _specialization(specs: Specs, constexprs: Mapping[str, Any], profile: bool, devices: int) -> tuple:
    """The in-process key of a specialisation: the constexprs by `constexpr_key` (1, 1.0 and True,
    0.0 and -0.0 are equal values that trace different kernels; a NaN is equal to no value)."""
    return (specs, constexpr_keys(constexprs), knobs.debug, profile, devices)


def constexpr_keys(constexprs: Mapping[str, Any]) -> tuple:
    """The constexprs of a specialisation, by name, each by its `constexpr_key`."""
    return tuple(sorted((name, constexpr_key(value)) for name, value in constexprs.items()))
