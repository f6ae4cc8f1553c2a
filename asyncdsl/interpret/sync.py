"""The interpreter's synchronisation ops: mbarriers, the proxy fence, and barriers.

Each `arrive` counts its arrivals, an expect-tx announces bytes, and a wait blocks the warpgroup
(`waits.PhaseWait`) until the phase it tracks (or names with `parity`) completes.  A warpgroup is
interpreted as one: its own barrier is implicit; CTA and cluster barriers are rendezvous of
every live warpgroup.
"""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import BarrierGroup
from asyncdsl.interpret.operands import allocated_offset
from asyncdsl.interpret.waits import PhaseWait, RendezvousWait
from asyncdsl.ir_locations import from_ir_location


def synced(warpgroup, op) -> None:
    """The warpgroup's threads meet before an arrival unless it is `unsynced` (then, checked)."""
    if op.unsynced is None:
        warpgroup.unsynced_load = None
    else:
        warpgroup.check_unsynced_arrive()


@register_impls
class SyncFunctions(WarpgroupFunctions):
    """mbarriers, fences, and warpgroup, CTA and cluster barriers."""

    @impl(ir.AllocBarriersOp)
    def run_alloc_barriers(self, interpreter: Interpreter, op: ir.AllocBarriersOp, args: PythonValues):
        # The barriers themselves were initialised with the CTA (the kernel prologue).
        return (BarrierGroup(allocated_offset(op), op.result.type.count.data, origin(op)),)

    def _barrier(self, group: BarrierGroup, index):
        return self.warpgroup.mbarrier(group.address(index.value.data))

    def _by(self, op, what: str) -> str:
        return f"{what} at {origin(op)} in {self.warpgroup.label}"

    @impl(ir.ArriveOp)
    @diagnosed
    def run_arrive(self, interpreter: Interpreter, op: ir.ArriveOp, args: PythonValues):
        synced(self.warpgroup, op)
        self._barrier(*args).arrive(op.count.value.data, self.warpgroup.clock, self._by(op, "arrive"))
        return ()

    @impl(ir.ArriveExpectTxOp)
    @diagnosed
    def run_arrive_expect_tx(self, interpreter: Interpreter, op: ir.ArriveExpectTxOp, args: PythonValues):
        self._barrier(*args).arrive_expect_tx(op.bytes.value.data, self.warpgroup.clock,
                                                self._by(op, "arrive_expect_tx"))
        return ()

    @impl(ir.WaitOp)
    @diagnosed
    def run_wait(self, interpreter: Interpreter, op: ir.WaitOp, args: PythonValues):
        group, index, *parity = args
        address = group.address(index.value.data)
        barrier = self.warpgroup.mbarrier(address)
        # try_wait.parity reads the low bit of its operand.
        phase_parity = parity[0].value.data & 1 if parity else self.warpgroup.next_parity(address)
        self.warpgroup.wait_until(PhaseWait(barrier, phase_parity, from_ir_location(op)))
        self.warpgroup.clock.join(barrier.completed_clock)
        return ()

    @impl(ir.FenceAsyncSmemOp)
    def run_fence_async_smem(self, interpreter: Interpreter, op: ir.FenceAsyncSmemOp, args: PythonValues):
        # Orders generic-proxy SMEM writes (cp.async) before async-proxy use; the warpgroup's
        # own sync is implicit (it runs as one).
        self.warpgroup.fence_proxies()
        self.warpgroup.unsynced_load = None
        return ()

    @impl(ir.WarpgroupBarrierOp)
    def run_warpgroup_barrier(self, interpreter: Interpreter, op: ir.WarpgroupBarrierOp, args: PythonValues):
        # A warpgroup is interpreted as one: its threads are always together.
        self.warpgroup.unsynced_load = None
        return ()

    @impl(ir.CtaBarrierOp)
    @diagnosed
    def run_cta_barrier(self, interpreter: Interpreter, op: ir.CtaBarrierOp, args: PythonValues):
        self.warpgroup.unsynced_load = None
        rendezvous = self.warpgroup.cta.cta_barrier
        generation = rendezvous.arrive(self.warpgroup)
        self.warpgroup.wait_until(RendezvousWait(rendezvous, generation, "cta_barrier", from_ir_location(op)))
        return ()

    @impl(ir.ClusterBarrierOp)
    @diagnosed
    def run_cluster_barrier(self, interpreter: Interpreter, op: ir.ClusterBarrierOp, args: PythonValues):
        self.warpgroup.unsynced_load = None
        rendezvous = self.warpgroup.cluster_barrier
        generation = rendezvous.arrive(self.warpgroup)
        self.warpgroup.wait_until(
            RendezvousWait(rendezvous, generation, "cluster_barrier", from_ir_location(op)))
        return ()
