"""xDSL interpreter implementations of the `asyncdsl` ops, for one warpgroup.

Each op does what its PTX lowering (`passes/ptx_lowering`) makes the GPU do, as the warpgroup's
leader thread issues it: one arrival per `arrive` count, expect-tx before a TMA load's arrival,
a wait per `wait` with the phase bit tracked per barrier.  Index values are xDSL's (`IntegerAttr`
of `index_bitwidth` bits; the interpreter runs with 32, the width of the registers the lowering
keeps indices in), so `arith` and `scf` run on xDSL's own implementations (and `index_arith`).

Errors the memory model raises carry no context; `_diagnosed` names the kernel, CTA, warpgroup
and the op's source line on them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from xdsl.dialects.builtin import IndexType
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.interpreters.builtin import scalar_attr

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import OutOfBoundsError
from asyncdsl.interpret import tma
from asyncdsl.interpret.bulk import BulkCopyFunctions
from asyncdsl.interpret.collective import CollectiveFunctions
from asyncdsl.interpret.cp_async import CpAsyncFunctions
from asyncdsl.interpret.diagnosis import diagnosed as _diagnosed
from asyncdsl.interpret.diagnosis import origin
from asyncdsl.interpret.im2col import Im2colFunctions
from asyncdsl.interpret.memory import BarrierGroup, SmemBuffer
from asyncdsl.interpret.operands import barrier_address, operand_values, predicated_off
from asyncdsl.interpret.prefetch import PrefetchFunctions
from asyncdsl.interpret.races import AsyncRead, AsyncWrite
from asyncdsl.interpret.reduction import reduce_gmem_box
from asyncdsl.interpret.row_gather import RowGatherFunctions
from asyncdsl.interpret.state import Warpgroup
from asyncdsl.interpret.waits import PhaseWait, Proceed, RendezvousWait
from asyncdsl.ir_locations import from_ir_location


@functools.lru_cache(maxsize=8192)
def _index_attr(value: int, bitwidth: int):
    # Attributes are immutable, and building one costs more than the rest of a small op.
    return scalar_attr(value, IndexType(), bitwidth)


def _index(interpreter: Interpreter, value: int):
    return _index_attr(value, interpreter.index_bitwidth)


@register_impls
@dataclass
class AsyncDslFunctions(
    Im2colFunctions, RowGatherFunctions, CollectiveFunctions, PrefetchFunctions, BulkCopyFunctions,
    CpAsyncFunctions, InterpreterFunctions
):
    """The `asyncdsl` ops, executed by `warpgroup`."""

    warpgroup: Warpgroup

    # -- where am I ---------------------------------------------------------------------------
    @impl(ir.ProgramIdOp)
    def run_program_id(self, interpreter: Interpreter, op: ir.ProgramIdOp, args: PythonValues):
        return (_index(interpreter, self.warpgroup.cta.program_id[op.axis.value.data]),)

    @impl(ir.NumProgramsOp)
    def run_num_programs(self, interpreter: Interpreter, op: ir.NumProgramsOp, args: PythonValues):
        return (_index(interpreter, self.warpgroup.cta.launch.grid[op.axis.value.data]),)

    @impl(ir.ClusterCtaIdOp)
    def run_cluster_cta_id(self, interpreter: Interpreter, op: ir.ClusterCtaIdOp, args: PythonValues):
        return (_index(interpreter, self.warpgroup.cta.cluster_cta_id[op.axis.value.data]),)

    @impl(ir.ClusterIdOp)
    def run_cluster_id(self, interpreter: Interpreter, op: ir.ClusterIdOp, args: PythonValues):
        return (_index(interpreter, self.warpgroup.cta.cluster_id[op.axis.value.data]),)

    @impl(ir.WarpgroupIdxOp)
    def run_warpgroup_idx(self, interpreter: Interpreter, op: ir.WarpgroupIdxOp, args: PythonValues):
        return (_index(interpreter, self.warpgroup.index),)

    # -- shared memory ------------------------------------------------------------------------
    @impl(ir.AllocSmemOp)
    @_diagnosed
    def run_alloc_smem(self, interpreter: Interpreter, op: ir.AllocSmemOp, args: PythonValues):
        element = dtypes.from_mlir(op.result.type.element_type)
        shape = ir.shape_of(op.result)
        if element.bits < 8:
            # Packed elements share bytes: the buffer is held as the bytes of its rows.
            shape = (*shape[:-1], -(-shape[-1] * element.bits // 8))
        buffer = SmemBuffer(op.offset.value.data, shape, element.itemsize, origin(op))
        self.warpgroup.cta.smem.check(buffer.offset, buffer.nbytes, f"the buffer allocated at {buffer.origin}")
        return (buffer,)

    @impl(ir.AllocBarriersOp)
    def run_alloc_barriers(self, interpreter: Interpreter, op: ir.AllocBarriersOp, args: PythonValues):
        # The barriers themselves were initialised with the CTA (the kernel prologue).
        return (BarrierGroup(op.offset.value.data, op.result.type.count.data, origin(op)),)

    @impl(ir.SmemViewOp)
    @_diagnosed
    def run_smem_view(self, interpreter: Interpreter, op: ir.SmemViewOp, args: PythonValues):
        source, *indices = args
        return (source.view(tuple(i.value.data for i in indices)),)

    # -- mbarriers ----------------------------------------------------------------------------
    def _barrier(self, group: BarrierGroup, index):
        return self.warpgroup.mbarrier(group.address(index.value.data))

    @impl(ir.ArriveOp)
    @_diagnosed
    def run_arrive(self, interpreter: Interpreter, op: ir.ArriveOp, args: PythonValues):
        self._barrier(*args).arrive(op.count.value.data, self.warpgroup.clock)
        return ()

    @impl(ir.ArriveExpectTxOp)
    @_diagnosed
    def run_arrive_expect_tx(self, interpreter: Interpreter, op: ir.ArriveExpectTxOp, args: PythonValues):
        self._barrier(*args).arrive_expect_tx(op.bytes.value.data, self.warpgroup.clock)
        return ()

    @impl(ir.WaitOp)
    @_diagnosed
    def run_wait(self, interpreter: Interpreter, op: ir.WaitOp, args: PythonValues):
        group, index, *parity = args
        address = group.address(index.value.data)
        barrier = self.warpgroup.mbarrier(address)
        # try_wait.parity reads the low bit of its operand.
        phase_parity = parity[0].value.data & 1 if parity else self.warpgroup.next_parity(address)
        self.warpgroup.wait_until(PhaseWait(barrier, phase_parity, from_ir_location(op)))
        self.warpgroup.clock.join(barrier.completed_clock)
        return ()

    # -- copies -------------------------------------------------------------------------------
    def _box_range(self, buffer: SmemBuffer, spec, what: str) -> tuple[int, int]:
        length = tma.smem_footprint(spec)
        if length > buffer.nbytes:
            raise OutOfBoundsError(
                f"{what} spans {length} bytes of shared memory but its buffer (allocated at "
                f"{buffer.origin}) holds {buffer.nbytes}"
            )
        self.warpgroup.cta.smem.check(buffer.offset, length, what)
        return buffer.offset, buffer.offset + length

    @impl(ir.TmaLoadOp)
    @_diagnosed
    def run_tma_load(self, interpreter: Interpreter, op: ir.TmaLoadOp, args: PythonValues):
        values = operand_values(op, args)
        if predicated_off(op, values):
            return ()
        if op.multicast_mask is not None or op.partition is not None:
            return self.run_collective_load(op, values)
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        spec = tma.descriptor_spec(op.descriptor)
        barrier = warpgroup.mbarrier(barrier_address(op, values))
        if op.expect_tx_bytes.value.data:
            barrier.arrive_expect_tx(op.expect_tx_bytes.value.data, warpgroup.clock)
        start, end = self._box_range(values[op.smem], spec, "the TMA load")
        cta.accesses.check_write(start, end, warpgroup.clock, "the TMA load")
        argument = cta.launch.arguments[spec.arg_index]
        coords = [values[c].value.data for c in op.coords]
        box = tma.read_gmem_box(argument.raw, spec, coords, argument.name)
        tma.write_smem_box(cta.smem.bytes, start, spec, box)
        phase = barrier.complete_tx(tma.box_bytes(spec))
        cta.accesses.record_write(AsyncWrite(start, end, barrier.key, phase, barrier.name, origin(op)))
        return ()

    @impl(ir.TmaStoreOp)
    @_diagnosed
    def run_tma_store(self, interpreter: Interpreter, op: ir.TmaStoreOp, args: PythonValues):
        values = operand_values(op, args)
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        if predicated_off(op, values):
            # Skipped, but its commit still closes a (possibly empty) group, as on the GPU.
            if op.commit.value.data:
                warpgroup.committed_groups += 1
            return ()
        spec = tma.descriptor_spec(op.descriptor)
        start, end = self._box_range(values[op.smem], spec, "the TMA store")
        cta.accesses.check_read(start, end, warpgroup.clock, "the TMA store")
        argument = cta.launch.arguments[spec.arg_index]
        coords = [values[c].value.data for c in op.coords]
        box = tma.read_smem_box(cta.smem.bytes, start, spec)
        if op.reduction is not None:
            reduce_gmem_box(argument.raw, spec, coords, box, op.reduction.data, argument.name)
        else:
            tma.write_gmem_box(argument.raw, spec, coords, box, argument.name)
        # The store belongs to the group the next commit closes.
        group = warpgroup.committed_groups + 1
        cta.accesses.record_read(AsyncRead(start, end, warpgroup.bulk_key, group, warpgroup.label, origin(op)))
        if op.commit.value.data:
            warpgroup.committed_groups = group
        return ()

    @impl(ir.AwaitAsyncCopyOp)
    @_diagnosed
    def run_await_async_copy(self, interpreter: Interpreter, op: ir.AwaitAsyncCopyOp, args: PythonValues):
        self.warpgroup.wait_until(Proceed("awaits its bulk copies", from_ir_location(op)))
        # Stores write GMEM when issued, so `read_only` or not, the groups are done.
        self.warpgroup.retire_bulk_groups(op.allow_groups.value.data)
        return ()

    # -- fences and barriers ------------------------------------------------------------------
    @impl(ir.FenceAsyncSmemOp)
    def run_fence_async_smem(self, interpreter: Interpreter, op: ir.FenceAsyncSmemOp, args: PythonValues):
        # Orders generic-proxy SMEM writes (cp.async) before async-proxy use; the warpgroup's
        # own sync is implicit (it runs as one).
        self.warpgroup.fence_proxies()
        return ()

    @impl(ir.WarpgroupBarrierOp)
    def run_warpgroup_barrier(self, interpreter: Interpreter, op: ir.WarpgroupBarrierOp, args: PythonValues):
        # A warpgroup is interpreted as one: its threads are always together.
        return ()

    @impl(ir.CtaBarrierOp)
    @_diagnosed
    def run_cta_barrier(self, interpreter: Interpreter, op: ir.CtaBarrierOp, args: PythonValues):
        rendezvous = self.warpgroup.cta.cta_barrier
        generation = rendezvous.arrive(self.warpgroup)
        self.warpgroup.wait_until(RendezvousWait(rendezvous, generation, "cta_barrier", from_ir_location(op)))
        return ()

    @impl(ir.ClusterBarrierOp)
    @_diagnosed
    def run_cluster_barrier(self, interpreter: Interpreter, op: ir.ClusterBarrierOp, args: PythonValues):
        rendezvous = self.warpgroup.cluster_barrier
        generation = rendezvous.arrive(self.warpgroup)
        self.warpgroup.wait_until(RendezvousWait(rendezvous, generation, "cluster_barrier", from_ir_location(op)))
        return ()
