"""The interpreter's register-tile loads and stores: `asyncdsl.load_smem` and `store_smem`.

A tile moves to or from its shared-memory buffer whole, row-major, whatever its layout (the
layout only says which thread moves which bytes).  These are ordinary `ld/st.shared`: accesses
through the generic proxy, which the race log (`races`) checks and records as the GPU needs:

- a load must not read bytes a TMA load (or other async write) is still landing, nor bytes
  another warpgroup's store wrote before synchronising with it; no proxy fence is needed after
  generic writes (cp.async, stores);
- a store must not overwrite bytes a TMA store may still be reading, an async write is still
  landing, or another warpgroup may still be reading or writing;
- a store's bytes reach the async proxy (a TMA store of the buffer) only after a
  `fence_async_smem` that knows the store (docs/hardware.md §12); a later TMA load into bytes
  a warpgroup loaded must know that load is over (the consumer's release of a pipeline stage).
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import SmemBuffer
from asyncdsl.interpret.races import GenericRead, GenericWrite
from asyncdsl.interpret.tiles import element_dtype


@register_impls
class TileAccessFunctions(WarpgroupFunctions):
    """Register tiles to and from shared memory, executed by `self.warpgroup`."""

    def _bytes(self, buffer: SmemBuffer, what: str) -> tuple[int, int]:
        self.warpgroup.cta.smem.check(buffer.offset, buffer.nbytes, what)
        return buffer.offset, buffer.offset + buffer.nbytes

    @impl(ir.LoadSmemOp)
    @diagnosed
    def run_load_smem(self, interpreter: Interpreter, op: ir.LoadSmemOp, args: PythonValues):
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        dtype = element_dtype(op.result.type, op)
        what = "the register-tile load"
        start, end = self._bytes(args[0], what)
        cta.accesses.check_read(start, end, warpgroup.clock, what, generic=True)
        tile = cta.smem.bytes[start:end].view(dtype).reshape(tuple(op.result.type.get_shape())).copy()
        count = warpgroup.access_shared()
        cta.accesses.record_read(GenericRead(start, end, warpgroup.shared_key, count, warpgroup.label, origin(op)))
        return (tile,)

    @impl(ir.StoreSmemOp)
    @diagnosed
    def run_store_smem(self, interpreter: Interpreter, op: ir.StoreSmemOp, args: PythonValues):
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        tile, buffer = args
        dtype = element_dtype(op.value.type, op)
        what = "the register-tile store"
        start, end = self._bytes(buffer, what)
        cta.accesses.check_write(start, end, warpgroup.clock, what, generic=True)
        cta.smem.bytes[start:end] = np.ascontiguousarray(tile, dtype).reshape(-1).view(np.uint8)
        count = warpgroup.access_shared()
        how = f"synchronise with {warpgroup.label} after that store (a CTA barrier, or an mbarrier it arrives on)"
        write = GenericWrite(start, end, warpgroup.shared_key, count, how, origin(op), writer="register-tile store")
        cta.accesses.record_write(write)
        return ()
