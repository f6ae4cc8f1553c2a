"""The interpreter's mutable register tiles (`asyncdsl.registers`): a cell per allocation.

Each warpgroup's interpreter makes its own cell when it runs `alloc_registers` (registers are
per thread); a write replaces the cell's tile (tiles are never changed in place) and a read gives
the last one written, as the GPU's registers do across loop iterations.  Reading a cell never
written is an InterpretError: on the GPU it would read whatever the registers held.  So is
reading or writing a cell a wgmma (`interpret/wgmma.py`) still writes: until a `wgmma_wait`
retires its group, the registers hold no defined value.
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions


class RegisterCell:
    """A mutable register tile: the tile it holds now (None before the first write)."""

    def __init__(self, origin: str):
        self.origin = origin
        self.tile: np.ndarray | None = None
        # The wgmma that wrote the tile last: (its group number in the warpgroup, its line).
        self.writer: tuple[int, str] | None = None

    def check_settled(self, warpgroup, what: str) -> None:
        if self.writer is not None and self.writer[0] > warpgroup.wgmma_retired:
            raise InterpretError(
                f"{what} the registers allocated at {self.origin} while the wgmma at {self.writer[1]} may "
                "still be writing them: asyncdsl.wgmma_wait first"
            )


@register_impls
class RegistersFunctions(WarpgroupFunctions):
    """Allocating, reading and writing mutable register tiles."""

    @impl(ir.AllocRegistersOp)
    def run_alloc_registers(self, interpreter: Interpreter, op: ir.AllocRegistersOp, args: PythonValues):
        return (RegisterCell(origin(op)),)

    @impl(ir.ReadRegistersOp)
    @diagnosed
    def run_read_registers(self, interpreter: Interpreter, op: ir.ReadRegistersOp, args: PythonValues):
        (cell,) = args
        cell.check_settled(self.warpgroup, "reads")
        if cell.tile is None:
            raise InterpretError(
                f"reads the registers allocated at {cell.origin} before anything was written to them "
                "(on the GPU: whatever they held); write them first"
            )
        offsets = op.window_offsets
        if offsets is None:
            return (cell.tile,)
        shape = op.result.type.get_shape()
        return (cell.tile[tuple(slice(o, o + s) for o, s in zip(offsets, shape))],)

    @impl(ir.WriteRegistersOp)
    @diagnosed
    def run_write_registers(self, interpreter: Interpreter, op: ir.WriteRegistersOp, args: PythonValues):
        tile, cell = args
        cell.check_settled(self.warpgroup, "writes")
        cell.tile = tile
        return ()
