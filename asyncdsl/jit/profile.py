"""The profiling entry: a kernel run once with its `asyncdsl.region`s timed, as a `Profile`.

On the GPU (`Kernel.profile`) the kernel traced for profiling is launched with a profile buffer
of its own and waited for; its records are in nanoseconds.  In the interpreter
(`Kernel.interpret_profile`, or `Kernel.profile` under ASYNCDSL_INTERPRET=1) they are on the
interpreter's logical clock (`jit/interpreter.py` runs it).  Either way a warpgroup that recorded
more region events than the kernel's `profile_events` is an error that names the number needed.
"""

from __future__ import annotations

from asyncdsl.errors import SourceLocation
from asyncdsl.frontend.launch_shape import LaunchShape
from asyncdsl.hw.profile import decode_records, recorded_counts
from asyncdsl.jit.binding import KernelSignature
from asyncdsl.jit.grid import GridRule
from asyncdsl.jit.interpreter import Interpreted
from asyncdsl.jit.launch import on_device
from asyncdsl.jit.profile_report import Profile, check_capacity
from asyncdsl.jit.specializations import Specializations
from asyncdsl.kernel_binary import KernelBinary, ProfileBufferParam


class Profiler:
    """The profiled runs of kernel `kernel_name`, declared at `definition`."""

    def __init__(self, kernel_name: str, signature: KernelSignature, grid: GridRule,
                 specializations: Specializations, launch: LaunchShape, definition: SourceLocation | None):
        self._name = kernel_name
        self._signature = signature
        self._grid = grid
        self._specializations = specializations
        self._warpgroups = launch.num_warpgroups
        self._definition = definition

    def on_gpu(self, args: tuple, kwargs: dict, stream, location: SourceLocation | None) -> Profile:
        """Launch `(*args, **kwargs)` profiled on the GPU, wait for it, and read its profile."""
        call = self._signature.bind(args, kwargs, location)
        binary = self._specializations.binary(call.specs(location), call.constexprs, profile=True)
        scalars = call.scalars()
        _, _, launched = on_device(
            call, location, binary, self._grid, stream,
            lambda loaded, grid, arrays: loaded.launch_profiled(grid, arrays, stream, scalars))
        param = _profile_param(binary)
        shape = (param.events_per_warpgroup, launched.grid[0] * launched.grid[1] * launched.grid[2],
                 self._warpgroups)
        check_capacity(self._name, recorded_counts(launched.words, *shape).tolist(), self._warpgroups,
                       param.events_per_warpgroup, self._definition)
        return Profile(self._name, param.region_names, lambda: decode_records(launched.words, *shape),
                       "ns", self._warpgroups, launched.event_ns)

    def interpreted(self, run: Interpreted) -> Profile:
        """The profile of an interpreted run of the kernel traced for profiling."""
        assert run.records is not None, "the interpreter ran a kernel not traced for profiling"
        param = _profile_param(run.compiled.binary)
        check_capacity(self._name, [record.recorded for record in run.records], self._warpgroups,
                       param.events_per_warpgroup, self._definition)
        return Profile(self._name, param.region_names, run.records, "ticks", self._warpgroups)


def _profile_param(binary: KernelBinary) -> ProfileBufferParam:
    return next(param for param in binary.params if isinstance(param, ProfileBufferParam))
