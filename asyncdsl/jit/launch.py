"""A kernel's launches on the GPU.

The first call of an argument layout takes the checked path: bind, check every array, take the
binary (`jit/specializations.py`: compiled on a miss, or from the disk), load it, launch; it then
remembers the launch (`runtime/warm_path.py`), and later calls of that layout are warm: checked
only for what the layout does not fix, and launched at once.  `on_device` is the checked path's
second half, which the profiler and `prepare` share (`jit/profile.py`, `jit/prepared.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from asyncdsl import runtime
from asyncdsl.errors import ArgumentError, SourceLocation, user_location
from asyncdsl.jit.binding import BoundCall, KernelSignature
from asyncdsl.jit.grid import GridRule
from asyncdsl.jit.prepared import PreparedCall
from asyncdsl.jit.specializations import Specializations
from asyncdsl.kernel_binary import KernelBinary
from asyncdsl.runtime.launch import LoadedKernel
from asyncdsl.runtime.streams import current_stream_source, launch_stream
from asyncdsl.runtime.warm_path import WarmLaunches

Launched = TypeVar("Launched")


def on_device(
    call: BoundCall, location: SourceLocation | None, binary: KernelBinary, grid: GridRule, stream,
    launch: Callable[[LoadedKernel, tuple[int, int, int], list], Launched],
) -> tuple[LoadedKernel, tuple[int, int, int], Launched]:
    """`launch(loaded, grid, device arrays)` for `call` of `binary`: its arrays checked as device
    arrays (on `stream`), the kernel loaded, the grid computed (a persistent one from the loaded
    kernel); the loaded kernel, the grid and what `launch` returned.  Errors at `location`."""
    dims = None if grid.persistent else grid.for_call(call, location)
    try:
        arrays = [runtime.device_array(a, n, stream=stream) for n, a in call.arrays()]
        loaded = runtime.load_kernel(binary)
        if dims is None:
            dims = grid.for_call(call, location, loaded)
        return loaded, dims, launch(loaded, dims, arrays)
    except ArgumentError as error:
        raise error.at(location) from None


class GpuLauncher:
    """The GPU launches of one kernel: checked once per argument layout, then warm."""

    def __init__(self, signature: KernelSignature, grid: GridRule, specializations: Specializations):
        self._signature = signature
        self._grid = grid
        self._specializations = specializations
        self._warm = WarmLaunches(signature.parameters, frozenset(signature.constexpr_names),
                                  grid.function, signature.defaults)

    def launch(self, args: tuple, kwargs: dict, stream) -> None:
        """Launch `(*args, **kwargs)` on `stream` (or where the arrays' library says: see `Kernel`)."""
        if not self._warm.launch(args, kwargs, stream):
            self._launch_checked(args, kwargs, stream)

    def prepare(self, args: tuple, kwargs: dict, stream) -> PreparedCall:
        """The checked path of `(*args, **kwargs)` without the launch: a `PreparedCall` of its layout."""
        location = user_location()
        call = self._signature.bind(args, kwargs, location)
        binary = self._specializations.binary(call.specs(location), call.constexprs)
        stream_source = current_stream_source([a for _, a in call.arrays()])
        handle = launch_stream(stream, stream_source)
        scalars = call.scalars()

        def prepared(loaded: LoadedKernel, grid: tuple[int, int, int], arrays: list):
            launch = loaded.prepare(runtime.launch_grid(grid, binary.cluster))
            launch.check(arrays, handle, scalars)
            return launch, arrays

        _, _, (launch, arrays) = on_device(call, location, binary, self._grid, handle, prepared)
        return PreparedCall(self._signature.kernel_name, call, arrays, launch, stream, stream_source,
                            self._grid.function)

    def _launch_checked(self, args: tuple, kwargs: dict, stream) -> None:
        location = user_location()
        call = self._signature.bind(args, kwargs, location)
        binary = self._specializations.binary(call.specs(location), call.constexprs)
        stream_source = current_stream_source([a for _, a in call.arrays()])
        handle = launch_stream(stream, stream_source)
        scalars = call.scalars()
        loaded, grid, _ = on_device(
            call, location, binary, self._grid, handle,
            lambda loaded, grid, arrays: loaded.launch(grid, arrays, stream=handle, scalars=scalars))
        self._warm.remember(args, kwargs, loaded, runtime.launch_grid(grid, binary.cluster), stream_source)
