"""Running a compiled kernel over its grid: clusters one after another, a cluster all at once.

The module is `CompiledKernel.module`, the IR the GPU's PTX is printed from.  Each CTA starts as
the lowered prologue leaves it: zeroed shared memory of the planned size and every mbarrier
initialised.  Each warpgroup runs the kernel's `func.func` on its own xDSL `Interpreter`; at the
end, a cluster of more than one CTA meets once more before its CTAs exit (the lowered epilogue).
A launch whose CTAs have one warpgroup and whose clusters have one CTA runs every CTA on the
caller's thread, reusing one interpreter.  A launch on several devices (`run_devices`) runs every
CTA of every device at once in one scheduler, so that devices can wait for each other's signals.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence
from typing import Final

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import scalar_attr
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.errors import AsyncDSLError, RaceError
from asyncdsl.hw.profile import WarpgroupRecord
from asyncdsl.interpret.assume import AssumeFunctions
from asyncdsl.interpret.bulk import BulkFunctions
from asyncdsl.interpret.collective import CollectiveFunctions
from asyncdsl.interpret.copy import CopyFunctions
from asyncdsl.interpret.core import CoreFunctions
from asyncdsl.interpret.cp_async import CpAsyncFunctions
from asyncdsl.interpret.diagnosis import origin
from asyncdsl.interpret.distributed import DistributedFunctions
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.im2col import Im2colFunctions
from asyncdsl.interpret.index_loads import IndexLoadFunctions
from asyncdsl.interpret.memory import GlobalArgument
from asyncdsl.interpret.operands import allocated_offset
from asyncdsl.interpret.prefetch import PrefetchFunctions
from asyncdsl.interpret.profile import ProfileFunctions, ProfileRecorder
from asyncdsl.interpret.registers import RegistersFunctions
from asyncdsl.interpret.roles import RolesFunctions
from asyncdsl.interpret.row_gather import RowGatherFunctions
from asyncdsl.interpret.scalars import FloatArithFunctions, IndexArithFunctions
from asyncdsl.interpret.scheduler import ClusterScheduler, SoloScheduler
from asyncdsl.interpret.state import BarrierInit, Cta, Devices, Launch, Warpgroup
from asyncdsl.interpret.sync import SyncFunctions
from asyncdsl.interpret.tile_access import TileAccessFunctions
from asyncdsl.interpret.tile_gmem import TileGmemFunctions
from asyncdsl.interpret.tile_math import TileMathFunctions
from asyncdsl.interpret.tiles import TileFunctions
from asyncdsl.interpret.tma import TmaFunctions
from asyncdsl.interpret.turns import TurnsFunctions
from asyncdsl.interpret.waits import Rendezvous, RendezvousWait
from asyncdsl.interpret.wgmma import WgmmaFunctions
from asyncdsl.ir_locations import from_ir_location

# The lowering keeps index values in 32-bit registers; xDSL wraps them the same way.
INDEX_BITWIDTH: Final = 32
_STATELESS_FUNCTIONS = (ArithFunctions(), FloatArithFunctions(), ScfFunctions(), FuncFunctions())

# The `asyncdsl` ops a warpgroup runs, one set per feature (each module of this package).
FUNCTIONS: tuple[type[WarpgroupFunctions], ...] = (
    CoreFunctions,
    SyncFunctions,
    TurnsFunctions,
    CopyFunctions,
    TmaFunctions,
    BulkFunctions,
    CpAsyncFunctions,
    CollectiveFunctions,
    PrefetchFunctions,
    Im2colFunctions,
    RowGatherFunctions,
    AssumeFunctions,
    TileFunctions,
    TileMathFunctions,
    TileAccessFunctions,
    TileGmemFunctions,
    RegistersFunctions,
    ProfileFunctions,
    WgmmaFunctions,
    RolesFunctions,
    DistributedFunctions,
    IndexLoadFunctions,
)


def _launch(
    kernel: func.FuncOp,
    arguments: Sequence[GlobalArgument],
    grid: tuple[int, int, int],
    scalars: Sequence[int | float],
    recorder: ProfileRecorder | None,
    device: int = 0,
    devices: Devices | None = None,
) -> Launch:
    block = attrs.dims(kernel, attrs.BLOCK)
    scalar_args = kernel.args[len(arguments):]
    values = tuple(scalar_attr(v, arg.type, INDEX_BITWIDTH)
                   for v, arg in zip(scalars, scalar_args, strict=True))
    return Launch(
        kernel=kernel.sym_name.data,
        grid=grid,
        cluster=attrs.dims(kernel, attrs.CLUSTER),
        warpgroups_per_cta=block[0] * block[1] * block[2] // 128,
        smem_bytes=attrs.smem_bytes(kernel),
        arguments=tuple(arguments),
        scalars=values,
        profile=recorder,
        device=device,
        devices=devices,
    )


def _barriers(kernel: func.FuncOp) -> list[BarrierInit]:
    return [
        BarrierInit(allocated_offset(op), op.result.type.count.data, op.arrival_count.value.data, origin(op))
        for op in kernel.walk()
        if isinstance(op, ir.AllocBarriersOp)
    ]


def _reported(error: AsyncDSLError) -> AsyncDSLError:
    """The error without the interpreter's frames: the message and its source line say what the
    user needs (the module dump xDSL notes on the error at every enclosing op would bury them)."""
    if hasattr(error, "__notes__"):
        del error.__notes__
    return error.with_traceback(None)


def run_kernel(
    module: ModuleOp,
    arguments: Sequence[GlobalArgument],
    grid: tuple[int, int, int],
    scalars: Sequence[int | float] = (),
) -> list[WarpgroupRecord] | None:
    """Run the kernel of `module` on `grid` CTAs over `arguments` (written in place) and the
    runtime `scalars`, the kernel's arguments after its arrays.  A kernel traced for profiling
    returns what each warpgroup recorded, ordered by CTA and warpgroup (`interpret/profile.py`)."""
    (kernel,) = attrs.kernels(module)
    if attrs.devices(kernel) > 1:
        raise AsyncDSLError(
            f"kernel {kernel.sym_name.data} was traced for {attrs.devices(kernel)} devices: "
            "run it on that many"
        )
    capacity = attrs.profile_events(kernel)
    recorder = ProfileRecorder(ir.region_names(kernel), capacity) if capacity is not None else None
    launch = _launch(kernel, arguments, grid, scalars, recorder)
    barriers = _barriers(kernel)
    program = _Program(module, kernel, recorder)
    try:
        if launch.warpgroups_per_cta == 1 and launch.cluster_size == 1:
            _run_solo(program, launch, barriers)
        else:
            for cluster_id in _positions(tuple(g // c for g, c in zip(grid, launch.cluster))):
                _run_cluster(program, launch, barriers, cluster_id)
    except AsyncDSLError as error:
        raise _reported(error) from None
    if recorder is None:
        return None
    return sorted(recorder.records, key=lambda record: (record.cta, record.warpgroup))


def run_devices(
    module: ModuleOp,
    arguments: Sequence[Sequence[GlobalArgument]],
    grid: tuple[int, int, int],
    scalars: Sequence[int | float] = (),
) -> None:
    """Run the kernel of `module` on as many devices as `arguments` has entries (device d's
    arrays, written in place), each on `grid` CTAs with the same `scalars`: every CTA of every
    device is live at once in one scheduler (`distributed.py`)."""
    (kernel,) = attrs.kernels(module)
    if attrs.devices(kernel) != len(arguments):
        raise AsyncDSLError(
            f"kernel {kernel.sym_name.data} was traced for {attrs.devices(kernel)} device(s), "
            f"run on {len(arguments)}"
        )
    if attrs.profile_events(kernel) is not None:
        raise AsyncDSLError("profiling a launch on several devices is not supported")
    devices = Devices(tuple(tuple(device) for device in arguments))
    barriers = _barriers(kernel)
    program = _Program(module, kernel, None)
    scheduler = ClusterScheduler(kernel.sym_name.data)
    for device, device_arguments in enumerate(devices.arguments):
        launch = _launch(kernel, device_arguments, grid, scalars, None, device, devices)
        for cluster_id in _positions(tuple(g // c for g, c in zip(grid, launch.cluster))):
            members = _cluster_members(launch, barriers, cluster_id, scheduler)
            devices.warpgroups[device].extend(members)
    try:
        for group in devices.warpgroups:
            for warpgroup in group:
                scheduler.spawn(warpgroup.label, functools.partial(_run_warpgroup, program, warpgroup))
        scheduler.run()
    except AsyncDSLError as error:
        raise _reported(error) from None


def _program_id(
    cluster_id: Sequence[int], cluster: Sequence[int], position: Sequence[int]
) -> tuple[int, int, int]:
    """The program id of the CTA at `position` within the cluster `cluster_id` of shape `cluster`."""
    x, y, z = (c * w + p for c, w, p in zip(cluster_id, cluster, position))
    return x, y, z


def _positions(extent: Sequence[int]) -> Iterator[tuple[int, int, int]]:
    """Every index of a 3-d extent, x fastest (the hardware's linear order)."""
    for z, y, x in itertools.product(range(extent[2]), range(extent[1]), range(extent[0])):
        yield (x, y, z)


class _Program:
    """The kernel of one launch, and interpreters for its warpgroups."""

    def __init__(self, module: ModuleOp, kernel: func.FuncOp, profile: ProfileRecorder | None):
        self.module = module
        self.kernel = kernel
        self.profile = profile
        self._index_arith = IndexArithFunctions()

    def interpreter(self, warpgroup: Warpgroup) -> tuple[Interpreter, list[WarpgroupFunctions]]:
        """An interpreter running as `warpgroup`, and its function sets (whose `warpgroup` a
        caller reusing the interpreter for another warpgroup switches)."""
        profile = self.profile
        listeners = (profile.clock,) if profile is not None else ()
        interpreter = Interpreter(self.module, index_bitwidth=INDEX_BITWIDTH, listeners=listeners)
        for stateless in _STATELESS_FUNCTIONS:
            interpreter.register_implementations(stateless)
        interpreter.register_implementations(self._index_arith, override=True)
        function_sets = [function_set(warpgroup) for function_set in FUNCTIONS]
        for function_set in function_sets:
            # Tile math takes `arith` over from xDSL and `scalars.py`, handing scalar ops back.
            interpreter.register_implementations(function_set,
                                                 override=isinstance(function_set, TileMathFunctions))
        return interpreter, function_sets


def _cluster_barrier(cluster_id: tuple[int, int, int] | str, members: list[Warpgroup]) -> Rendezvous:
    return Rendezvous(f"barrier.cluster of cluster {cluster_id}", members)


def _run_solo(program: _Program, launch: Launch, barriers: list[BarrierInit]) -> None:
    scheduler = SoloScheduler(launch.kernel)
    interpreter: Interpreter | None = None
    function_sets: list[WarpgroupFunctions] = []
    for program_id in _positions(launch.grid):
        (warpgroup,) = Cta(launch, program_id, 0, barriers).warpgroups
        warpgroup.scheduler = scheduler
        warpgroup.cluster_barrier = _cluster_barrier(program_id, [warpgroup])
        if interpreter is None:  # one interpreter for every CTA, switched between them
            interpreter, function_sets = program.interpreter(warpgroup)
        for function_set in function_sets:
            function_set.warpgroup = warpgroup
        if launch.profile is not None:
            launch.profile.enter_kernel(warpgroup)
        interpreter.call_op(program.kernel, launch.call_arguments)
        _check_loads_landed(warpgroup.cta)
        if launch.profile is not None:
            launch.profile.exit_kernel(warpgroup)


def _cluster_members(
    launch: Launch, barriers: list[BarrierInit], cluster_id: tuple[int, int, int], scheduler: ClusterScheduler
) -> list[Warpgroup]:
    """The warpgroups of cluster `cluster_id`, its CTAs made and its barrier set up."""
    ctas = [
        Cta(launch, _program_id(cluster_id, launch.cluster, position), rank, barriers)
        for rank, position in enumerate(_positions(launch.cluster))
    ]
    for cta in ctas:
        cta.cluster_ctas = ctas
    members = [warpgroup for cta in ctas for warpgroup in cta.warpgroups]
    where = cluster_id if launch.devices is None else f"{cluster_id} of device {launch.device}"
    cluster_barrier = _cluster_barrier(where, members)
    for warpgroup in members:
        warpgroup.scheduler = scheduler
        warpgroup.cluster_barrier = cluster_barrier
    return members


def _run_cluster(
    program: _Program,
    launch: Launch,
    barriers: list[BarrierInit],
    cluster_id: tuple[int, int, int],
) -> None:
    scheduler = ClusterScheduler(launch.kernel)
    for warpgroup in _cluster_members(launch, barriers, cluster_id, scheduler):
        scheduler.spawn(warpgroup.label, functools.partial(_run_warpgroup, program, warpgroup))
    scheduler.run()


def _run_warpgroup(program: _Program, warpgroup: Warpgroup) -> None:
    launch = warpgroup.cta.launch
    interpreter, _ = program.interpreter(warpgroup)
    if launch.profile is not None:
        launch.profile.enter_kernel(warpgroup)
    interpreter.call_op(program.kernel, launch.call_arguments)
    cluster_barrier = warpgroup.cluster_barrier
    if launch.cluster_size > 1:
        generation = cluster_barrier.arrive(warpgroup)
        what = "the kernel's exit (a cluster meets before its CTAs exit)"
        warpgroup.wait_until(RendezvousWait(
            cluster_barrier, generation, what, from_ir_location(program.kernel), at_kernel_exit=True
        ))
    if launch.profile is not None:
        launch.profile.exit_kernel(warpgroup)
    warpgroup.exited = True
    if all(w.exited for w in warpgroup.cta.warpgroups):
        _check_loads_landed(warpgroup.cta)
    warpgroup.cta.cta_barrier.release_if_complete()
    cluster_barrier.release_if_complete()


def _check_loads_landed(cta: Cta) -> None:
    """A CTA that exits while an async load may still write its shared memory (one whose
    barrier phase none of its warpgroups waited for: a producer that issued more loads than the
    consumers took, a multicast into a peer that does not wait for it) leaves the copy engine
    writing the shared memory of the next CTA on the SM: refuse it."""
    load = cta.accesses.unlanded_load([w.clock for w in cta.warpgroups])
    if load is not None:
        raise RaceError(
            f"kernel {cta.launch.kernel}, {cta.label}: the CTA exits while the {load.copy} at "
            f"{load.origin} may still be writing its shared memory bytes [{load.start}, {load.end}): "
            f"no warpgroup of the CTA waited for phase {load.phase} of {load.barrier_name} that it "
            "completes on (wait for every load issued, or issue only the loads that are consumed)",
            load.location,
        )
