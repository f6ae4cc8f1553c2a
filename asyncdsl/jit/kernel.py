"""`@asyncdsl.kernel`: a Python function becomes a GPU kernel, specialised per call signature.

`Kernel` is the user's handle on one: calling it launches on the GPU, `interpret` runs it on the
CPU, `profile` times its regions, `prepare` fixes a call's layout for repeated launches,
`specialization` names one for `asyncdsl.warmup`, `compile`/`ptx`/`stages`/`ir` show what it
compiles to.  The work is done by the parts it is made of, each of the host layer
(`asyncdsl/jit`): the parameters and how a call binds to them (`binding`), the compile options
(`options`), the grid (`grid`), the compiled specialisations (`specializations`), and the
launchers (`launch` for the GPU, `prepared`, `interpreter`, `profile`).  Outputs are written in place.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Mapping
from types import FunctionType
from typing import TYPE_CHECKING, Any

from asyncdsl.config import knobs
from asyncdsl.errors import ArgumentError, SourceLocation, user_location
from asyncdsl.hw.profile import DEFAULT_EVENTS_PER_WARPGROUP
from asyncdsl.jit.binding import KernelSignature
from asyncdsl.jit.grid import GridRule
from asyncdsl.jit.interpreter import Interpreter
from asyncdsl.jit.launch import GpuLauncher
from asyncdsl.jit.options import KernelOptions
from asyncdsl.jit.prepared import PreparedCall
from asyncdsl.jit.profile import Profiler
from asyncdsl.jit.profile_report import Profile
from asyncdsl.jit.specializations import Specializations, Specs
from asyncdsl.jit.warmup import Specialization
from asyncdsl.kernel_binary import KernelBinary

if TYPE_CHECKING:
    from asyncdsl.passes.pipeline import CompiledKernel


# Every kernel made, weakly: a kernel defined in a function and dropped goes.  The lock keeps a
# kernel defined by one thread while another prunes the list.
_DEFINED: list[weakref.ref] = []
_DEFINED_LOCK = threading.Lock()


class Kernel:
    """The user's handle on a kernel function: its options, and every way to run or inspect it."""

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
        ctas_per_sm: int = 1,
    ):
        if not inspect.isfunction(fn):
            raise ArgumentError(f"asyncdsl.kernel decorates a Python function (def ...), got "
                                f"{type(fn).__name__} {fn!r}", user_location())
        self.fn: FunctionType = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        code = fn.__code__
        self.definition = SourceLocation(code.co_filename, code.co_firstlineno)
        options = KernelOptions.checked(fn.__name__, name, block, cluster, arch, descriptors, profile_events,
                                        self.definition, ctas_per_sm)
        self.name, self.launch = options.name, options.launch
        self.descriptor_mode, self.profile_events = options.descriptor_mode, options.profile_events
        self.signature = KernelSignature(fn, self.definition)
        self.constexpr_names = self.signature.constexpr_names
        self.runtime_names = self.signature.runtime_names
        self.scalar_kinds = self.signature.scalar_kinds
        self.grid = grid
        self.grid_rule = GridRule(grid, self.signature, self.launch.cluster)
        self.specializations = Specializations(fn, self.runtime_names, options, self.definition)
        self._gpu = GpuLauncher(self.signature, self.grid_rule, self.specializations)
        self._interpreter = Interpreter(self.signature, self.grid_rule, self.specializations,
                                        self.launch.cluster)
        self._profiler = Profiler(self.__name__, self.signature, self.grid_rule, self.specializations,
                                  self.launch, self.definition)
        with _DEFINED_LOCK:
            _DEFINED.append(weakref.ref(self))

    @staticmethod
    def defined() -> list[Kernel]:
        """Every kernel of this process still alive, in the order they were defined (what
        `asyncdsl.seen_specializations` walks)."""
        with _DEFINED_LOCK:
            alive = [kernel for kernel in (ref() for ref in _DEFINED) if kernel is not None]
            if len(alive) < len(_DEFINED):
                _DEFINED[:] = [weakref.ref(kernel) for kernel in alive]
        return alive

    # -- compiling ----------------------------------------------------------------------------
    def specialize(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool = False,
                   devices: int = 1) -> CompiledKernel:
        """The compiled kernel for these argument specs and constexpr values (cached; see
        `jit/specializations.py`), traced for profiling with `profile` and for `devices` devices."""
        return self.specializations.compile(specs, constexprs, profile, devices)

    def binary(self, specs: Specs, constexprs: Mapping[str, Any], profile: bool = False) -> KernelBinary:
        """What the GPU runs for these specs and constexprs: compiled here, or from the disk cache."""
        return self.specializations.binary(specs, constexprs, profile)

    def compile(self, *args, profile: bool = False, **kwargs) -> CompiledKernel:
        """Compile for arguments like these: arrays of any kind or `ArraySpec`s; for runtime
        scalars a number (an int's divisibility by 16 is compiled in) or the type `int`/`float`.
        `profile=True` compiles what `Kernel.profile` runs (as do `ptx`, `stages` and `ir`)."""
        location = user_location()
        call = self.signature.bind(args, kwargs, location)
        return self.specializations.compile(call.specs(location), call.constexprs, profile)

    def specialization(self, *args, **kwargs) -> Specialization:
        """This kernel for arguments like these (as `compile` takes them: arrays or `ArraySpec`s,
        numbers or `int`/`float` for scalars, the constexprs' values), for `asyncdsl.warmup`."""
        location = user_location()
        call = self.signature.bind(args, kwargs, location)
        return Specialization(self, call.specs(location), call.constexprs)

    def ptx(self, *args, profile: bool = False, **kwargs) -> str:
        """The PTX this kernel compiles to for arguments like these."""
        return self.compile(*args, profile=profile, **kwargs).ptx

    def stages(self, *args, profile: bool = False, **kwargs) -> dict[str, str]:
        """The IR after tracing and after every pass, then the PTX, for arguments like these
        (`{"trace": ..., "resolve-transforms": ..., ..., "lower-to-ptx": ..., "ptx": ...}`)."""
        location = user_location()
        call = self.signature.bind(args, kwargs, location)
        return self.specializations.stages(call.specs(location), call.constexprs, profile)

    def ir(self, *args, after: str | None = None, profile: bool = False, **kwargs) -> str:
        """The IR as traced (`after=None`), or after the named pass, for arguments like these; the
        kernel compiles through every pass, but only this stage is printed."""
        location, stage = user_location(), after or "trace"
        call = self.signature.bind(args, kwargs, location)
        stages = self.specializations.stages(call.specs(location), call.constexprs, profile, only=(stage,))
        if stage not in stages:
            from asyncdsl.passes.pipeline import STAGE_NAMES  # loaded with the compiler, just used

            raise ArgumentError(f"unknown pass {stage!r}; passes: {', '.join(STAGE_NAMES)}", location)
        return stages[stage]

    # -- running ------------------------------------------------------------------------------
    def __call__(self, *args, stream=None, **kwargs) -> None:
        """Launch on the GPU.  `stream` (a handle or a stream object of any library) says where;
        without it the kernel runs on the current stream of the library the arrays come from
        (torch's, then CuPy's), else on the legacy default stream.  Under ASYNCDSL_INTERPRET=1
        the interpreter runs it on copies of the arrays, which are written back."""
        if knobs.interpret:
            self._interpreter.run_copies(args, kwargs, user_location())
        else:
            self._gpu.launch(args, kwargs, stream)

    def prepare(self, *args, stream=None, **kwargs) -> PreparedCall:
        """A call of this kernel for arguments of this layout, checked, compiled and loaded but not
        launched; calling it with the runtime arguments alone (arrays and scalars, in signature
        order) launches with no more checking than the layout needs (`asyncdsl.jit.prepared`).
        `stream` fixes where its calls run unless a call names another."""
        if knobs.interpret:
            raise ArgumentError(f"{self.__name__}.prepare makes a GPU launch; under ASYNCDSL_INTERPRET=1 "
                                "call the kernel itself, which the interpreter runs", user_location())
        return self._gpu.prepare(args, kwargs, stream)

    def interpret(self, *args, devices: int | None = None, **kwargs) -> None:
        """Run the kernel on the CPU on numpy arrays (outputs written in place).

        `devices=N` emulates N devices running the kernel at once (`asyncdsl.device_id()` 0 ..
        N - 1, `asyncdsl.num_devices()` N): each array argument is then a sequence of N arrays
        of one shape and dtype, array i living on device i (the symmetric heap `x.peer(pe)`
        addresses); scalars are the same on every device."""
        location = user_location()
        if devices is None:
            self._interpreter.run_numpy(args, kwargs, location)
        else:
            self._interpreter.run_devices(args, kwargs, devices, location)

    def profile(self, *args, stream=None, **kwargs) -> Profile:
        """Run the kernel once with its `asyncdsl.region`s timed, on the GPU (waiting for it), or
        in the interpreter under ASYNCDSL_INTERPRET=1; returns the `Profile`.  Outputs are written
        as by a call."""
        location = user_location()
        if knobs.interpret:
            run = self._interpreter.run_copies(args, kwargs, location, profile=True)
            return self._profiler.interpreted(run)
        return self._profiler.on_gpu(args, kwargs, stream, location)

    def interpret_profile(self, *args, **kwargs) -> Profile:
        """`profile` in the interpreter, on numpy arrays: regions on its logical clock (one tick
        per op interpreted), which shows the order the warpgroups ran in; no GPU needed."""
        run = self._interpreter.run_numpy(args, kwargs, user_location(), profile=True)
        return self._profiler.interpreted(run)

    def __repr__(self) -> str:
        return f"<asyncdsl.kernel {self.__name__} block={self.launch.block} cluster={self.launch.cluster}>"


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
    ctas_per_sm: int = 1,
):
    """Decorate a function as a kernel: `@asyncdsl.kernel(grid=..., block=128, cluster=(1, 1, 1))`.

    `grid` is a tuple, a function of the kernel's arguments (by name) returning one, or
    `asyncdsl.persistent_grid` (as many CTAs as fit on the device at once, in whole clusters:
    `asyncdsl.jit.persistent`). `arch`
    picks the target: "sm_90a" (Hopper, the default) or "sm_100a" (Blackwell-only copy forms;
    compiles and assembles anywhere, runs only on Blackwell). `descriptors` says where TMA
    descriptors travel: "grid_constant" (128-byte kernel parameters, the default: nothing to
    upload per launch) or "scratch" (one GMEM buffer the host fills before launch).
    `profile_events` is how many region entries and exits each warpgroup can record when the
    kernel runs under `Kernel.profile` (more is an error that names the number needed).
    `ctas_per_sm` builds the kernel for that many CTAs a multiprocessor at once: its threads'
    registers are capped at 65536 / (threads × ctas_per_sm) (`warpgroup_role` budgets share
    that), its shared memory at a CTA's share of the multiprocessor's, an error where it needs
    more; for a kernel bound by memory whose one CTA keeps a multiprocessor half idle.
    """
    def wrap(function: Callable) -> Kernel:
        return Kernel(function, grid, block, cluster, name, arch, descriptors, profile_events, ctas_per_sm)

    return wrap(fn) if fn is not None else wrap
