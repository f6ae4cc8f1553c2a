"""`@asyncdsl.kernel`: a Python function becomes a GPU kernel, specialised per call signature.

A call binds the arguments (by position or name), looks up the specialisation for (shapes,
dtypes, scalar kinds, constexpr values), compiles it on a miss, computes the grid, and launches.
Outputs are written in place.  A parameter annotated `constexpr` is compiled in; one annotated
`int` or `float`, or given a Python or numpy number, is a runtime scalar: a kernel parameter
whose value never recompiles (only whether an int is a multiple of 16 does); any other is an array.
"""

from __future__ import annotations

import hashlib
import inspect
import numbers
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from asyncdsl import runtime
from asyncdsl.config import knobs
from asyncdsl.errors import ArgumentError, AsyncDSLError, SourceLocation, TraceError, is_int, user_location
from asyncdsl.frontend.code_digest import bound_values, code_digest, keyable, value_text
from asyncdsl.frontend.options import option
from asyncdsl.frontend.persistent import PersistentGrid
from asyncdsl.frontend.profile_report import Profile, check_capacity
from asyncdsl.frontend.specs import ArraySpec, LaunchShape, ScalarSpec, scalar_kind
from asyncdsl.hw.options import DESCRIPTOR_MODES, Arch
from asyncdsl.hw.profile import (
    DEFAULT_EVENTS_PER_WARPGROUP,
    MAX_EVENTS_PER_WARPGROUP,
    decode_records,
    recorded_counts,
)
from asyncdsl.kernel_binary import KernelBinary, ProfileBufferParam, scalar_argument
from asyncdsl.runtime.host_copy import host_copy, numpy_argument
from asyncdsl.runtime.streams import current_stream_source, launch_stream
from asyncdsl.runtime.warm_path import WarmLaunches

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from asyncdsl.passes.pipeline import CompiledKernel


# The compiler (xDSL, the dialects, the passes) loads when a kernel is first traced: `import
# asyncdsl` and launches of kernels compiled by earlier processes never need it.
def trace_kernel(*args, **kwargs):
    """`frontend.specialize.trace_kernel`, imported on first use."""
    from asyncdsl.frontend.specialize import trace_kernel as trace

    return trace(*args, **kwargs)


def compile_module(*args, **kwargs) -> CompiledKernel:
    """`passes.pipeline.compile_module`, imported on first use."""
    from asyncdsl.passes.pipeline import compile_module as run

    return run(*args, **kwargs)


class constexpr:  # noqa: N801 - spelled like Triton's `tl.constexpr`, which users know
    """Annotation for kernel parameters whose values are known while tracing
    (`BLOCK: asyncdsl.constexpr`). Each distinct value compiles its own specialisation."""


def _declared(annotation: Any) -> str | None:
    """What a parameter's annotation fixes: "constexpr", a runtime "int" or "float", or None (the
    value decides).  Annotations may be strings (`from __future__ import annotations`)."""
    if annotation is constexpr:
        return "constexpr"
    if annotation is int or annotation is float:
        return annotation.__name__
    if isinstance(annotation, str) and annotation.split(".")[-1] in ("constexpr", "int", "float"):
        return annotation.split(".")[-1]
    return None


def _dims3(value: Any, what: str, location: SourceLocation | None) -> tuple[int, int, int]:
    """1 to 3 positive integers (numpy integers too) as (x, y, z)."""
    try:
        dims = ((operator.index(value),) if not isinstance(value, (tuple, list))
                else tuple(map(operator.index, value)))
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or d < 1 for d in dims):
        raise ArgumentError(f"{what} must be 1 to 3 positive ints, got {value!r}", location)
    return (*dims, *(1,) * (3 - len(dims)))


@dataclass(frozen=True)
class BoundCall:
    """One call's arguments: the runtime ones (arrays and scalars, in signature order) with the
    kind of each ("int", "float", or None for an array), and the constexpr values."""

    runtime: tuple[tuple[str, Any], ...]
    kinds: tuple[str | None, ...]
    constexprs: Mapping[str, Any]

    def by_name(self) -> dict[str, Any]:
        return {**dict(self.runtime), **self.constexprs}

    def arrays(self) -> list[tuple[str, Any]]:
        return [argument for argument, kind in zip(self.runtime, self.kinds) if kind is None]

    def scalars(self) -> list[int | float]:
        """The scalar arguments as the kernel receives them (ints checked, floats in float32)."""
        return [
            scalar_argument(kind, value, name)
            for (name, value), kind in zip(self.runtime, self.kinds) if kind
        ]

    def with_arrays(self, arrays: Mapping[str, Any]) -> BoundCall:
        """This call with the arrays named in `arrays` replaced."""
        runtime = tuple((name, arrays.get(name, value)) for name, value in self.runtime)
        return BoundCall(runtime, self.kinds, self.constexprs)


class Kernel:
    """A kernel function and the cache of its compiled specialisations."""

    def __init__(
        self,
        fn: Callable,
        grid,
        block,
        cluster,
        name: str | None,
        arch: str = "sm_90a",
        descriptors: str = "grid_constant",
        profile_events: int = DEFAULT_EVENTS_PER_WARPGROUP,
    ):
        if not inspect.isfunction(fn):
            raise ArgumentError(f"asyncdsl.kernel decorates a Python function (def ...), got "
                                f"{type(fn).__name__} {fn!r}", user_location())
        if name is not None and not isinstance(name, str):
            raise ArgumentError(
                f"kernel {fn.__name__}: name must be a str (the PTX entry's name), got {name!r}",
                user_location())
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.name = _ptx_identifier(name or fn.__name__)
        code = fn.__code__
        self.definition = SourceLocation(code.co_filename, code.co_firstlineno)
        self._signature = inspect.signature(fn)
        for param in self._signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TraceError(f"kernel {fn.__name__} cannot take *args or **kwargs", self.definition)
        declared = {p.name: _declared(p.annotation) for p in self._signature.parameters.values()}
        self.constexpr_names = tuple(n for n, kind in declared.items() if kind == "constexpr")
        self.runtime_names = tuple(n for n, kind in declared.items() if kind != "constexpr")
        self.scalar_kinds = {n: kind for n, kind in declared.items() if kind in ("int", "float")}
        self.grid = grid
        block = _dims3(block, "block", self.definition)
        threads = block[0] * block[1] * block[2]
        if block[1:] != (1, 1) or threads % 128 or not 128 <= threads <= 512:
            raise ArgumentError(
                f"block must be 128, 256, 384 or 512 threads along x (whole warpgroups), got {block}",
                self.definition,
            )
        target = option(Arch, arch, "arch", ArgumentError, self.definition)
        self.launch = LaunchShape(block, _dims3(cluster, "cluster", self.definition), target)
        if descriptors not in DESCRIPTOR_MODES:
            raise ArgumentError(f"descriptors must be one of {DESCRIPTOR_MODES}, got {descriptors!r}",
                                self.definition)
        self.descriptor_mode = descriptors
        if not is_int(profile_events) or not 1 <= profile_events <= MAX_EVENTS_PER_WARPGROUP:
            raise ArgumentError(
                f"profile_events (region events each warpgroup can record when profiled) must be an int in "
                f"1 .. {MAX_EVENTS_PER_WARPGROUP}, got {profile_events!r}",
                self.definition,
            )
        self.profile_events = profile_events
        cluster_size = self.launch.cluster[0] * self.launch.cluster[1] * self.launch.cluster[2]
        if cluster_size > 16:
            raise ArgumentError(f"a cluster holds at most 16 CTAs, got {self.launch.cluster}",
                                self.definition)
        self._compiled: dict[tuple, CompiledKernel] = {}
        self._binaries: dict[tuple, KernelBinary] = {}
        self._warm = WarmLaunches(
            tuple(self._signature.parameters), frozenset(self.constexpr_names),
            grid if callable(grid) else None,
            {name: p.default for name, p in self._signature.parameters.items() if p.default is not p.empty},
        )

    # -- binding ------------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict, location: SourceLocation | None) -> BoundCall:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise ArgumentError(
                f"{self.__name__}({', '.join(self._signature.parameters)}): {error}", location
            ) from None
        bound.apply_defaults()
        values = bound.arguments
        runtime_values = tuple((n, values[n]) for n in self.runtime_names)
        try:
            kinds = tuple(self.scalar_kinds.get(n) or scalar_kind(values[n], n) for n in self.runtime_names)
        except ArgumentError as error:
            raise error.at(location) from None
        # numpy scalars mean their Python values (shapes, sizes and cache keys want those).
        constexprs = {n: _python_scalar(values[n]) for n in self.constexpr_names}
        for n, v in constexprs.items():
            try:
                hash(v)
            except TypeError:
                raise ArgumentError(f"constexpr {n} must be hashable, got {type(v).__name__}",
                                    location) from None
        return BoundCall(runtime_values, kinds, constexprs)

    def specs(self, call: BoundCall, location: SourceLocation | None) -> tuple[ArraySpec | ScalarSpec, ...]:
        try:
            return tuple(
                ArraySpec.of(v, n) if kind is None else ScalarSpec.of(kind, v, n)
                for (n, v), kind in zip(call.runtime, call.kinds)
            )
        except TraceError as error:
            raise ArgumentError(error.message, location) from None
        except ArgumentError as error:
            raise error.at(location) from None

    # -- compiling ----------------------------------------------------------------------------
    def specialize(
        self, specs: tuple[ArraySpec | ScalarSpec, ...], constexprs: Mapping[str, Any], profile: bool = False,
        devices: int = 1,
    ) -> CompiledKernel:
        """The compiled kernel for these argument specs and constexpr values (cached: a scalar's
        spec holds its kind and divisibility, never its value); with `profile`, the kernel
        `Kernel.profile` launches, its regions recording into a profile buffer; traced for
        `devices` devices (`asyncdsl.num_devices()`)."""
        key = _specialization(specs, constexprs, profile, devices)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = compile_module(self._tracing(specs, constexprs, profile, devices),
                                      descriptor_mode=self.descriptor_mode)
            self._compiled[key] = compiled
        return compiled

    def binary(
        self, specs: tuple[ArraySpec | ScalarSpec, ...], constexprs: Mapping[str, Any], profile: bool = False
    ) -> KernelBinary:
        """What the GPU runs for these specs and constexprs: compiled in this process, else taken
        from the kernels earlier processes compiled from the same code (`runtime/binary_cache.py`:
        no tracing, no passes), else compiled now and filed there.  Traced for the devices of
        this process's NVSHMEM job (`asyncdsl.distributed`; one without it)."""
        devices = runtime.world_size()
        key = _specialization(specs, constexprs, profile, devices)
        binary = self._binaries.get(key)
        if binary is not None:
            return binary
        compiled = self._compiled.get(key)
        disk_key = None
        if compiled is None and knobs.kernel_cache:
            disk_key = self._disk_key(specs, constexprs, profile, devices)
        if disk_key is not None:
            binary = runtime.BinaryCache().load(disk_key)
        if binary is None:
            binary = self.specialize(specs, constexprs, profile, devices).binary
            if disk_key is not None:
                runtime.BinaryCache().store(disk_key, binary)
        self._binaries[key] = binary
        return binary

    def _disk_key(self, specs: tuple, constexprs: Mapping[str, Any], profile: bool,
                  devices: int) -> str | None:
        """The key of a specialisation across processes: the code (`code_digest`) and the values
        it names (`bound_values`), this kernel and its options, the specs and the constexprs by
        type and text (`code_digest.value_text`: arrays by their bytes); None when a constexpr's
        or bound value's text would differ in every process (`code_digest.keyable`)."""
        code = code_digest(self.fn.__code__.co_filename)
        values = repr(
            sorted((name, type(value).__qualname__, value_text(value)) for name, value in constexprs.items()))
        bound = bound_values(self.fn) if code is not None else None
        if bound is None or not keyable(values):
            return None
        # A function exec'd from source without `__name__` in its globals has no module: its file
        # names it (a module name has no space).
        module = self.fn.__module__ or f"file {self.fn.__code__.co_filename}"
        digest = hashlib.sha256()
        for part in (runtime.BINARY_FORMAT, code, module, self.fn.__qualname__, self.name,
                     repr(self.launch), self.descriptor_mode, str(self.profile_events if profile else None),
                     repr(specs), values, bound, str(knobs.debug), str(devices)):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    def _tracing(
        self, specs: tuple[ArraySpec | ScalarSpec, ...], constexprs: Mapping[str, Any], profile: bool,
        devices: int = 1
    ) -> Callable[[], ModuleOp]:
        """What traces this specialisation's module, each time it is called (in the debug mode of now)."""
        return partial(
            trace_kernel, self.fn, self.name, self.runtime_names, specs, constexprs,
            replace(self.launch, devices=devices), self.definition, knobs.debug,
            self.profile_events if profile else None,
        )

    def compile(self, *args, profile: bool = False, **kwargs) -> CompiledKernel:
        """Compile for arguments like these: arrays of any kind or `ArraySpec`s; for runtime
        scalars a number (an int's divisibility by 16 is compiled in) or the type `int`/`float`.
        `profile=True` compiles what `Kernel.profile` runs (as do `ptx`, `stages` and `ir`)."""
        location = user_location()
        call = self.bind(args, kwargs, location)
        return self.specialize(self.specs(call, location), call.constexprs, profile)

    def ptx(self, *args, profile: bool = False, **kwargs) -> str:
        """The PTX this kernel compiles to for arguments like these."""
        return self.compile(*args, profile=profile, **kwargs).ptx

    def stages(self, *args, profile: bool = False, **kwargs) -> dict[str, str]:
        """The IR after tracing and after every pass, then the PTX, for arguments like these
        (`{"trace": ..., "resolve-transforms": ..., ..., "lower-to-ptx": ..., "ptx": ...}`)."""
        location = user_location()
        call = self.bind(args, kwargs, location)
        trace = self._tracing(self.specs(call, location), call.constexprs, profile)
        return dict(compile_module(trace, descriptor_mode=self.descriptor_mode, keep_stages=True).stages)

    def ir(self, *args, after: str | None = None, profile: bool = False, **kwargs) -> str:
        """The IR as traced (`after=None`), or after the named pass, for arguments like these."""
        stages = self.stages(*args, profile=profile, **kwargs)
        stage = after or "trace"
        if stage not in stages:
            raise ArgumentError(f"unknown pass {stage!r}; passes: {', '.join(stages)}", user_location())
        return stages[stage]

    # -- launching ----------------------------------------------------------------------------
    def grid_for(self, call: BoundCall, location: SourceLocation | None, loaded=None) -> tuple[int, int, int]:
        """The grid of a launch of `call`; a persistent one is the interpreter's unless `loaded`
        (the loaded kernel) says what the device holds."""
        if isinstance(self.grid, PersistentGrid):
            if loaded is None:
                return self.grid.interpreted(self.launch.cluster)
            return runtime.persistent_grid(loaded)
        if not callable(self.grid):
            return _dims3(self.grid, "grid", location)
        try:
            grid = self.grid(**call.by_name())
        except AsyncDSLError as error:
            raise error.at(location) from None
        except Exception as error:  # noqa: BLE001 - the user's function failed: say so at the call
            if isinstance(error, TypeError):
                wanted = ", ".join(self._signature.parameters)
                try:
                    inspect.signature(self.grid).bind(**call.by_name())
                except TypeError:
                    raise ArgumentError(
                        f"the grid function of kernel {self.__name__} is called with the kernel's arguments "
                        f"by name ({wanted}) and cannot take them: {error}; give it those "
                        "parameters (or **kwargs)",
                        location,
                    ) from None
            raise ArgumentError(f"the grid function of kernel {self.__name__} raised {type(error).__name__}: "
                                f"{error}", location) from error
        return _dims3(grid, "grid", location)

    def __call__(self, *args, stream=None, **kwargs) -> None:
        """Launch on the GPU.  `stream` (a handle or a stream object of any library) says where;
        without it the kernel runs on the current stream of the library the arrays come from
        (torch's, then CuPy's), else on the legacy default stream."""
        if knobs.interpret:
            self._interpret_copies(args, kwargs, user_location())
        elif not self._warm.launch(args, kwargs, stream):
            self._launch_checked(args, kwargs, stream)

    def _launch_checked(self, args: tuple, kwargs: dict, stream) -> None:
        """The full path: bind, check every array, compile on a miss, launch; then remember the
        launch for arguments of the same layout."""
        location = user_location()
        call = self.bind(args, kwargs, location)
        specs = self.specs(call, location)
        binary = self.binary(specs, call.constexprs)
        persistent = isinstance(self.grid, PersistentGrid)
        grid = None if persistent else self.grid_for(call, location)
        stream_source = current_stream_source([a for _, a in call.arrays()])
        try:
            handle = launch_stream(stream, stream_source)
            arrays = [runtime.device_array(a, n, stream=handle) for n, a in call.arrays()]
            loaded = runtime.load_kernel(binary)
            if persistent:
                grid = self.grid_for(call, location, loaded)
            loaded.launch(grid, arrays, stream=handle, scalars=call.scalars())
        except ArgumentError as error:
            raise error.at(location) from None
        grid = runtime.launch_grid(grid, binary.cluster)
        self._warm.remember(args, kwargs, loaded, grid, stream_source)

    def interpret(self, *args, devices: int | None = None, **kwargs) -> None:
        """Run the kernel on the CPU on numpy arrays (outputs written in place).

        `devices=N` emulates N devices running the kernel at once (`asyncdsl.device_id()` 0 ..
        N - 1, `asyncdsl.num_devices()` N): each array argument is then a sequence of N arrays
        of one shape and dtype, array i living on device i (the symmetric heap `x.peer(pe)`
        addresses); scalars are the same on every device."""
        location = user_location()
        call = self.bind(args, kwargs, location)
        if devices is None:
            self._interpret(
                call.with_arrays({n: numpy_argument(n, a, location) for n, a in call.arrays()}), location)
            return
        from asyncdsl.frontend.distributed import symmetric_arrays

        per_device = symmetric_arrays(call.arrays(), devices, location)
        first = call.with_arrays({name: arrays[0] for name, arrays in per_device.items()})
        for device in range(1, devices):
            other = call.with_arrays({name: arrays[device] for name, arrays in per_device.items()})
            if self.specs(other, location) != self.specs(first, location):
                raise ArgumentError(
                    f"the arrays of device {device} differ in shape or dtype from device 0's: symmetric "
                    "arguments have one shape and dtype on every device", location,
                )
        compiled = self.specialize(self.specs(first, location), call.constexprs, devices=devices)
        grid = runtime.launch_grid(self.grid_for(first, location), self.launch.cluster)
        from asyncdsl import interpret  # the interpreter's engine loads only for interpreted calls

        interpret.launch_devices(
            compiled.module, list(per_device), [list(arrays) for arrays in zip(*per_device.values())], grid,
            call.scalars(),
        )

    def _interpret_copies(self, args: tuple, kwargs: dict, location: SourceLocation | None,
                          profile: bool = False):
        """An ordinary call under ASYNCDSL_INTERPRET=1: arrays of any supported framework are
        copied to numpy, interpreted, and copied back in place."""
        call = self.bind(args, kwargs, location)
        copies = {name: host_copy(name, value, location) for name, value in call.arrays()}
        result = self._interpret(call.with_arrays({name: copy.array for name, copy in copies.items()}),
                                 location, profile)
        for copy in copies.values():
            copy.write_back()
        return result

    def _interpret(self, call: BoundCall, location: SourceLocation | None, profile: bool = False):
        """Interpret `call`, whose arrays are C-contiguous numpy arrays; with `profile`, traced
        for profiling, and the `Profile` on the interpreter's logical clock is returned."""
        compiled = self.specialize(self.specs(call, location), call.constexprs, profile)
        grid = runtime.launch_grid(self.grid_for(call, location), self.launch.cluster)
        from asyncdsl import interpret  # the interpreter's engine loads only for interpreted calls

        arrays = call.arrays()
        records = interpret.launch(
            compiled.module, [n for n, _ in arrays], [a for _, a in arrays], grid, call.scalars()
        )
        if not profile:
            return None
        param = _profile_param(compiled.binary)
        check_capacity(self.__name__, [record.recorded for record in records], self.launch.num_warpgroups,
                       param.events_per_warpgroup, self.definition)
        return Profile(self.__name__, param.region_names, records, "ticks", self.launch.num_warpgroups)

    # -- profiling ----------------------------------------------------------------------------
    def profile(self, *args, stream=None, **kwargs) -> Profile:
        """Run the kernel once with its `asyncdsl.region`s timed, on the GPU (waiting for it), or
        in the interpreter under ASYNCDSL_INTERPRET=1; returns the `Profile`.  Outputs are written
        as by a call."""
        location = user_location()
        if knobs.interpret:
            return self._interpret_copies(args, kwargs, location, profile=True)
        call = self.bind(args, kwargs, location)
        binary = self.binary(self.specs(call, location), call.constexprs, profile=True)
        persistent = isinstance(self.grid, PersistentGrid)
        grid = None if persistent else self.grid_for(call, location)
        try:
            arrays = [runtime.device_array(a, n, stream=stream) for n, a in call.arrays()]
            loaded = runtime.load_kernel(binary)
            if persistent:
                grid = self.grid_for(call, location, loaded)
            launched = loaded.launch_profiled(grid, arrays, stream, call.scalars())
        except ArgumentError as error:
            raise error.at(location) from None
        param = _profile_param(binary)
        shape = (param.events_per_warpgroup, launched.grid[0] * launched.grid[1] * launched.grid[2],
                 self.launch.num_warpgroups)
        check_capacity(self.__name__, recorded_counts(launched.words, *shape).tolist(),
                       self.launch.num_warpgroups, param.events_per_warpgroup, self.definition)
        return Profile(self.__name__, param.region_names, lambda: decode_records(launched.words, *shape),
                       "ns", self.launch.num_warpgroups, launched.event_ns)

    def interpret_profile(self, *args, **kwargs) -> Profile:
        """`profile` in the interpreter, on numpy arrays: regions on its logical clock (one tick
        per op interpreted), which shows the order the warpgroups ran in; no GPU needed."""
        location = user_location()
        call = self.bind(args, kwargs, location)
        arrays = {n: numpy_argument(n, a, location) for n, a in call.arrays()}
        return self._interpret(call.with_arrays(arrays), location, profile=True)

    def __repr__(self) -> str:
        return f"<asyncdsl.kernel {self.__name__} block={self.launch.block} cluster={self.launch.cluster}>"


def _profile_param(binary: KernelBinary) -> ProfileBufferParam:
    return next(param for param in binary.params if isinstance(param, ProfileBufferParam))


def _specialization(specs: tuple, constexprs: Mapping[str, Any], profile: bool, devices: int) -> tuple:
    """The in-process key of a specialisation.  Constexprs go with their types: 1, 1.0 and True
    are equal keys but may trace different kernels."""
    constexpr_key = tuple(sorted((name, type(value), value) for name, value in constexprs.items()))
    return (specs, constexpr_key, knobs.debug, profile, devices)


def _python_scalar(value: Any) -> Any:
    """A constexpr as the Python value it stands for: numpy integers as ints, numpy floats as
    floats; bools (Python's, and numpy's, which is no `numbers` type) stay bools."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, float):
        return float(value)
    return value


def _ptx_identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def kernel(
    fn: Callable | None = None,
    *,
    grid=(1, 1, 1),
    block=128,
    cluster=(1, 1, 1),
    name: str | None = None,
    arch: str = "sm_90a",
    descriptors: str = "grid_constant",
    profile_events: int = DEFAULT_EVENTS_PER_WARPGROUP,
):
    """Decorate a function as a kernel: `@asyncdsl.kernel(grid=..., block=128, cluster=(1, 1, 1))`.

    `grid` is a tuple, a function of the kernel's arguments (by name) returning one, or
    `asyncdsl.persistent_grid` (as many CTAs as fit on the device at once, in whole clusters:
    `asyncdsl.frontend.persistent`). `arch`
    picks the target: "sm_90a" (Hopper, the default) or "sm_100a" (Blackwell-only copy forms;
    compiles and assembles anywhere, runs only on Blackwell). `descriptors` says where TMA
    descriptors travel: "grid_constant" (128-byte kernel parameters, the default: nothing to
    upload per launch) or "scratch" (one GMEM buffer the host fills before launch).
    `profile_events` is how many region entries and exits each warpgroup can record when the
    kernel runs under `Kernel.profile` (more is an error that names the number needed).
    """
    def wrap(function: Callable) -> Kernel:
        return Kernel(function, grid, block, cluster, name, arch, descriptors, profile_events)

    return wrap(fn) if fn is not None else wrap
