"""Several devices in one interpreted launch: device ids, signals and their waits.

`grid.run_devices` runs the grid once per device, every CTA of every device live in one
scheduler, so a warpgroup spinning on a flag lets the others (of any device) run until a signal
sets it.  Each device's `Launch` holds its own arguments and every device's (`Launch.devices`,
the symmetric heap), so an op with a `peer` operand reads or writes device `peer`'s array.

A signal writes its cell at once (copies complete when issued, so everything the warpgroup did
before is there to see); it refuses to run while the warpgroup has TMA stores it has not awaited
(`await_async_copy()` without `read_only`), since on the GPU the release would not cover them.
A wait that no signal can satisfy any more is a deadlock naming the waiting device's warpgroup
and the cell's device, with the devices whose warpgroups have all exited.
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError, OutOfBoundsError
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions, index_value
from asyncdsl.interpret.memory import GlobalArgument
from asyncdsl.interpret.operands import argument_index, operand_values
from asyncdsl.interpret.state import Launch
from asyncdsl.ir_locations import from_ir_location

_MASK = 0xFFFFFFFF


def peer_of(op, values: dict) -> int | None:
    """The device an op's `peer` operand names (None: this device)."""
    return values[op.peer].value.data if op.peer is not None else None


def _cell(argument: GlobalArgument, indices: list[int], device: int) -> tuple[int, str]:
    """The flat element index of `argument[indices]` (bounds checked) and its description."""
    shape = argument.array.shape
    flat = 0
    for dim, (index, size) in enumerate(zip(indices, shape)):
        if not 0 <= index < size:
            raise OutOfBoundsError(
                f"flag index {tuple(indices)} of {argument.name!r} (shape {shape}) on device {device} is out "
                f"of bounds along dim {dim}"
            )
        flat = flat * size + index
    return flat, f"{argument.name}[{', '.join(map(str, indices))}] on device {device}"


def _flags(argument: GlobalArgument) -> np.ndarray:
    """The argument's 32-bit cells as unsigned ints (a view: signals write through)."""
    return argument.array.reshape(-1).view(np.uint32)


class SignalWait:
    """A warpgroup spinning until a 32-bit cell compares `cmp` with `value`."""

    at_kernel_exit = False

    def __init__(self, launch: Launch, argument: GlobalArgument, flat: int, name: str, cmp: str,
                 value: int, location):
        self.launch = launch
        self.cells = _flags(argument)
        self.flat = flat
        self.name = name
        self.cmp = cmp
        self.value = value
        self.location = location

    def ready(self) -> bool:
        held = int(self.cells[self.flat])
        return held == self.value if self.cmp == "eq" else held >= self.value

    def describe(self) -> str:
        relation = "to be" if self.cmp == "eq" else "to be at least"
        held = int(self.cells[self.flat])
        text = (f"waits for the flag {self.name} {relation} {self.value} (it holds {held}), which only a "
                "signal can change")
        exited = [str(device) for device, done in enumerate(self.launch.exited_devices()) if done]
        if exited:
            text += f"; device(s) {', '.join(exited)} have exited and signal no more"
        return text


@register_impls
class DistributedFunctions(WarpgroupFunctions):
    """The device id, signals (to this or a peer device) and waits on this device's flags."""

    @impl(ir.DeviceIdOp)
    def run_device_id(self, interpreter: Interpreter, op: ir.DeviceIdOp, args: PythonValues):
        return (index_value(interpreter, self.warpgroup.cta.launch.device),)

    @impl(ir.SignalOp)
    @diagnosed
    def run_signal(self, interpreter: Interpreter, op: ir.SignalOp, args: PythonValues):
        values = operand_values(op, args)
        warpgroup = self.warpgroup
        if warpgroup.committed_groups > warpgroup.writes_awaited_groups:
            raise InterpretError(
                "signals while TMA stores of this warpgroup may still be writing: call "
                "asyncdsl.await_async_copy() (without read_only) before the signal that announces them"
            )
        launch = warpgroup.cta.launch
        peer = peer_of(op, values)
        device = launch.device if peer is None else peer
        argument = launch.argument(argument_index(op.flags), peer)
        flat, _ = _cell(argument, [values[i].value.data for i in op.indices], device)
        argument.writable("a signal")
        cells = _flags(argument)
        value = values[op.value].value.data & _MASK
        cells[flat] = value if op.op.data == "set" else (int(cells[flat]) + value) & _MASK
        return ()

    @impl(ir.WaitSignalOp)
    @diagnosed
    def run_wait_signal(self, interpreter: Interpreter, op: ir.WaitSignalOp, args: PythonValues):
        values = operand_values(op, args)
        launch = self.warpgroup.cta.launch
        argument = launch.argument(argument_index(op.flags), None)
        flat, name = _cell(argument, [values[i].value.data for i in op.indices], launch.device)
        wait = SignalWait(
            launch, argument, flat, name, op.cmp.data, values[op.value].value.data & _MASK,
            from_ir_location(op)
        )
        self.warpgroup.wait_until(wait)
        return ()
