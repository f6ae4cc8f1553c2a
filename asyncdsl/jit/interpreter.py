"""A kernel's runs in the CPU interpreter (`asyncdsl/interpret`).

Three entries: `run_numpy` (`kernel.interpret`, `kernel.interpret_profile`: numpy arrays, written
in place), `run_copies` (any call under ASYNCDSL_INTERPRET=1: arrays of any supported library are
copied to numpy, interpreted and copied back in place) and `run_devices` (`kernel.interpret(...,
devices=N)`: N emulated devices at once).  Each compiles exactly as for a GPU launch (the same
specialisations, the same passes) and runs the IR the PTX is printed from.  The interpreter's
engine loads only for interpreted calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from asyncdsl import runtime
from asyncdsl.errors import ArgumentError, SourceLocation, is_int
from asyncdsl.hw.profile import WarpgroupRecord
from asyncdsl.jit.binding import BoundCall, KernelSignature
from asyncdsl.jit.grid import GridRule
from asyncdsl.jit.specializations import Specializations
from asyncdsl.runtime.host_copy import host_copy, numpy_argument

if TYPE_CHECKING:
    from asyncdsl.passes.pipeline import CompiledKernel


class Interpreted(NamedTuple):
    """What an interpreted run ran (`compiled`) and, when traced for profiling, its warpgroups'
    records on the interpreter's logical clock (`records`)."""

    compiled: CompiledKernel
    records: list[WarpgroupRecord] | None


class Interpreter:
    """The interpreted runs of one kernel (see the module docstring)."""

    def __init__(self, signature: KernelSignature, grid: GridRule, specializations: Specializations,
                 cluster: tuple[int, int, int]):
        self._signature = signature
        self._grid = grid
        self._specializations = specializations
        self._cluster = cluster

    def run_numpy(self, args: tuple, kwargs: dict, location: SourceLocation | None,
                  profile: bool = False) -> Interpreted:
        """Interpret a call on numpy arrays (refusing any other kind of array)."""
        call = self._signature.bind(args, kwargs, location)
        arrays = {name: numpy_argument(name, array, location) for name, array in call.arrays()}
        return self._run(call.with_arrays(arrays), location, profile)

    def run_copies(self, args: tuple, kwargs: dict, location: SourceLocation | None,
                   profile: bool = False) -> Interpreted:
        """Interpret a call on host copies of its arrays, then write them back in place."""
        call = self._signature.bind(args, kwargs, location)
        copies = {name: host_copy(name, value, location) for name, value in call.arrays()}
        arrays = {name: copy.array for name, copy in copies.items()}
        run = self._run(call.with_arrays(arrays), location, profile)
        for copy in copies.values():
            copy.write_back()
        return run

    def run_devices(self, args: tuple, kwargs: dict, devices: int, location: SourceLocation | None) -> None:
        """Interpret a call on `devices` emulated devices: each array argument a sequence of one
        numpy array per device, all of one shape and dtype (symmetric); scalars shared."""
        call = self._signature.bind(args, kwargs, location)
        per_device = _symmetric_arrays(call.arrays(), devices, location)
        first = call.with_arrays({name: arrays[0] for name, arrays in per_device.items()})
        specs = first.specs(location)
        for device in range(1, devices):
            other = call.with_arrays({name: arrays[device] for name, arrays in per_device.items()})
            if other.specs(location) != specs:
                raise ArgumentError(
                    f"the arrays of device {device} differ in shape or dtype from device 0's: symmetric "
                    "arguments have one shape and dtype on every device", location,
                )
        compiled = self._specializations.compile(specs, call.constexprs, devices=devices)
        grid = runtime.launch_grid(self._grid.for_call(first, location), self._cluster)
        from asyncdsl import interpret  # the interpreter's engine loads only for interpreted calls

        interpret.launch_devices(
            compiled.module, list(per_device), [list(arrays) for arrays in zip(*per_device.values())], grid,
            call.scalars(),
        )

    def _run(self, call: BoundCall, location: SourceLocation | None, profile: bool) -> Interpreted:
        """Interpret `call`, whose arrays are C-contiguous numpy arrays; with `profile`, traced for
        profiling."""
        compiled = self._specializations.compile(call.specs(location), call.constexprs, profile)
        grid = runtime.launch_grid(self._grid.for_call(call, location), self._cluster)
        from asyncdsl import interpret  # the interpreter's engine loads only for interpreted calls

        arrays = call.arrays()
        records = interpret.launch(
            compiled.module, [n for n, _ in arrays], [a for _, a in arrays], grid, call.scalars()
        )
        return Interpreted(compiled, records)


def _symmetric_arrays(
    arrays: Sequence[tuple[str, Any]], devices: int, location: SourceLocation | None
) -> dict[str, list]:
    """Each array argument of a call on `devices` devices as its list of per-device numpy arrays."""
    if not is_int(devices) or devices < 1:
        raise ArgumentError(f"devices must be a positive int, got {devices!r}", location)
    result = {}
    for name, value in arrays:
        if not isinstance(value, (list, tuple)) or len(value) != devices:
            raise ArgumentError(
                f"argument {name!r}: with devices={devices}, each array argument is a list of {devices} "
                f"arrays (one per device), got {type(value).__name__}", location,
            )
        result[name] = [numpy_argument(f"{name}[{device}]", a, location) for device, a in enumerate(value)]
    return result
