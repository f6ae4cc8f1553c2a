"""The interpreter's register-tile loads and stores: `asyncdsl.load_smem` and `store_smem`.

A tile moves to or from its shared-memory buffer whole, whatever its register layout (which only
says which thread moves which bytes): row-major, or through the buffer's own layout when it
carries one, each logical element at the physical place its transform chain gives
(`apply_chain_index`), its bytes at their swizzled absolute address (`hw.swizzle`).  These are ordinary
`ld/st.shared`: accesses
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
from asyncdsl.errors import OutOfBoundsError
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import SmemBuffer
from asyncdsl.interpret.races import GenericRead, GenericWrite
from asyncdsl.interpret.state import Cta
from asyncdsl.interpret.tiles import element_dtype


def _byte_addresses(memref, buffer: SmemBuffer) -> np.ndarray | None:
    """Where each byte of each logical element of a laid-out buffer lies in the CTA's shared
    memory (None for a row-major buffer, which holds its tile as it stands)."""
    layout = ir.smem_layout(memref)
    if layout is None:
        return None
    return layout.byte_addresses(buffer.offset, buffer.element_bytes)


@register_impls
class TileAccessFunctions(WarpgroupFunctions):
    """Register tiles to and from shared memory, executed by `self.warpgroup`."""

    def _target(self, op: ir.LoadSmemOp | ir.StoreSmemOp, args: PythonValues) -> Cta:
        """The CTA whose copy of the buffer the access reaches: this one, or the one of cluster
        rank `cta` (at the same offset, as `mapa` maps it)."""
        cta = self.warpgroup.cta
        if op.cta is None:
            return cta
        rank = args[-1].value.data
        if not 0 <= rank < len(cta.cluster_ctas):
            raise OutOfBoundsError(
                f"a peer shared-memory access names CTA rank {rank}, and the cluster holds "
                f"{len(cta.cluster_ctas)} CTAs (ranks 0 to {len(cta.cluster_ctas) - 1})"
            )
        return cta.cluster_ctas[rank]

    def _bytes(self, cta: Cta, buffer: SmemBuffer, what: str) -> tuple[int, int]:
        cta.smem.check(buffer.offset, buffer.nbytes, what)
        return buffer.offset, buffer.offset + buffer.nbytes

    @impl(ir.LoadSmemOp)
    @diagnosed
    def run_load_smem(self, interpreter: Interpreter, op: ir.LoadSmemOp, args: PythonValues):
        warpgroup, cta = self.warpgroup, self._target(op, args)
        dtype = element_dtype(op.result.type, op)
        what = "the register-tile load"
        start, end = self._bytes(cta, args[0], what)
        cta.accesses.check_read(start, end, warpgroup.clock, what, generic=True)
        shape = tuple(op.result.type.get_shape())
        addresses = _byte_addresses(op.smem.type, args[0])
        if addresses is None:
            tile = cta.smem.bytes[start:end].view(dtype).reshape(shape).copy()
        else:
            tile = np.ascontiguousarray(cta.smem.bytes[addresses]).view(dtype).reshape(shape)
        count = warpgroup.access_shared()
        cta.accesses.record_read(
            GenericRead(start, end, warpgroup.shared_key, count, warpgroup.label, origin(op)))
        warpgroup.unsynced_load = origin(op)
        return (tile,)

    @impl(ir.StoreSmemOp)
    @diagnosed
    def run_store_smem(self, interpreter: Interpreter, op: ir.StoreSmemOp, args: PythonValues):
        warpgroup, cta = self.warpgroup, self._target(op, args)
        tile, buffer = args[:2]
        dtype = element_dtype(op.value.type, op)
        what = "the register-tile store"
        start, end = self._bytes(cta, buffer, what)
        cta.accesses.check_write(start, end, warpgroup.clock, what, generic=True)
        addresses = _byte_addresses(op.smem.type, buffer)
        if addresses is None:
            cta.smem.bytes[start:end] = np.ascontiguousarray(tile, dtype).reshape(-1).view(np.uint8)
        else:
            cta.smem.bytes[addresses] = np.ascontiguousarray(tile, dtype).view(np.uint8).reshape(
                addresses.shape)
        count = warpgroup.access_shared()
        how = (f"synchronise with {warpgroup.label} after that store (a CTA barrier, or an "
               "mbarrier it arrives on)")
        write = GenericWrite(start, end, warpgroup.shared_key, count, how, origin(op),
                             writer="register-tile store")
        cta.accesses.record_write(write)
        warpgroup.unsynced_load = None  # the store's trailing warpgroup barrier
        return ()
