"""Profiler regions in the interpreter: the same records a GPU profile holds, on a logical clock.

The clock counts the ops the launch has interpreted, in every warpgroup together, so a trace shows
the order the scheduler ran the warpgroups in (a producer's copies between a consumer's waits),
not how long anything takes on a GPU.  Each warpgroup's record has the capacity of the GPU's
(`asyncdsl.hw.profile`): events past it are counted and dropped, exactly as the lowering drops
them, so an overflow is reported the same way.
"""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.ir import Operation

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.hw.profile import RegionEvent, WarpgroupRecord
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.state import Warpgroup


class LogicalClock(Interpreter.Listener):
    """One tick per op any warpgroup of the launch interprets."""

    def __init__(self):
        self.ticks = 0

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        self.ticks += 1


class _OpenRecord:
    def __init__(self, start: int):
        self.start = start
        self.events: list[RegionEvent] = []
        self.recorded = 0


class ProfileRecorder:
    """The region events of one interpreted launch of a profiled kernel."""

    def __init__(self, region_names: tuple[str, ...], events_per_warpgroup: int):
        self.clock = LogicalClock()
        self.capacity = events_per_warpgroup
        self._numbers = {name: number for number, name in enumerate(region_names)}
        self._open: dict[tuple[int, int], _OpenRecord] = {}
        self.records: list[WarpgroupRecord] = []

    def enter_kernel(self, warpgroup: Warpgroup) -> None:
        self._open[_track(warpgroup)] = _OpenRecord(self.clock.ticks)

    def event(self, warpgroup: Warpgroup, region: str, exit: bool) -> None:
        record = self._open[_track(warpgroup)]
        if record.recorded < self.capacity:
            record.events.append(RegionEvent(self._numbers[region], exit, float(self.clock.ticks)))
        record.recorded += 1

    def exit_kernel(self, warpgroup: Warpgroup) -> None:
        cta, index = _track(warpgroup)
        record = self._open.pop((cta, index))
        self.records.append(WarpgroupRecord(
            cta, index, None, float(record.start), float(self.clock.ticks), tuple(record.events),
            record.recorded
        ))


def _track(warpgroup: Warpgroup) -> tuple[int, int]:
    """(linear CTA id, x fastest as on the GPU; warpgroup index)."""
    x, y, z = warpgroup.cta.program_id
    width, height, _ = warpgroup.cta.launch.grid
    return x + width * (y + height * z), warpgroup.index


@register_impls
class ProfileFunctions(WarpgroupFunctions):
    """Region markers, stamped on the launch's logical clock when it is profiled."""

    def _event(self, region: str, exit: bool) -> None:
        recorder = self.warpgroup.cta.launch.profile
        if recorder is not None:  # markers in a kernel not traced for profiling cost nothing
            recorder.event(self.warpgroup, region, exit)

    @impl(ir.RegionBeginOp)
    def run_region_begin(self, interpreter: Interpreter, op: ir.RegionBeginOp, args: PythonValues):
        self._event(op.region.data, exit=False)
        return ()

    @impl(ir.RegionEndOp)
    def run_region_end(self, interpreter: Interpreter, op: ir.RegionEndOp, args: PythonValues):
        self._event(op.region.data, exit=True)
        return ()
