"""PTX instructions that synchronise: named and cluster barriers, fences, mbarrier operations.

A barrier's form is held in its fields (`bar.sync 0;` is the whole CTA, `bar.sync id, 128;` one
warpgroup), from which its text is made: passes merge barriers by these fields. An mbarrier
instruction keeps its text (the PTX ISA spells many variants: scopes, semantics, the remote
`shared::cluster` form); its class says whether it initialises, arrives, completes
transactions or waits.
"""

from __future__ import annotations

from typing import Literal

from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import irdl_op_definition, opt_prop_def, prop_def, traits_def

from asyncdsl.dialects.ptx_effects import AccessesMemory, ActsOn, Fences, Synchronizes
from asyncdsl.dialects.ptx_instr import FieldedInstruction, Instruction


def _barrier_text(mode: str, immediate_id: int | None, threads: int | None) -> str:
    barrier = "#{0}" if immediate_id is None else str(immediate_id)
    return f"bar.{mode} {barrier}" + (f", {threads}" if threads is not None else "") + ";"


@irdl_op_definition
class BarrierOp(FieldedInstruction):
    """`bar.sync` / `bar.arrive` on a named barrier: `threads` of the CTA (all of them where
    absent) meet at barrier `immediate_id`, or at the id in the first register where that is
    absent. `bar.sync` also orders the memory accesses of the threads it synchronises."""

    name = "ptx.bar"
    traits = traits_def(Synchronizes("cta"))

    mode = prop_def(StringAttr)
    immediate_id = opt_prop_def(IntegerAttr)
    threads = opt_prop_def(IntegerAttr)

    def __init__(
        self, mode: Literal["sync", "arrive"], barrier: SSAValue | int, threads: int | None = None,
        guard: SSAValue | None = None,
    ):
        fields: dict[str, Attribute] = {"mode": StringAttr(mode)}
        immediate = barrier if isinstance(barrier, int) else None
        if immediate is not None:
            fields["immediate_id"] = IntegerAttr(immediate, i64)
        if threads is not None:
            fields["threads"] = IntegerAttr(threads, i64)
        operands = () if isinstance(barrier, int) else (barrier,)
        super().__init__(_barrier_text(mode, immediate, threads), operands, (), guard, False, fields)

    @property
    def barrier_id(self) -> SSAValue | int:
        """The barrier's id: an immediate, or the register holding it."""
        if self.immediate_id is not None:
            return self.immediate_id.value.data
        return self.registers[0]

    @property
    def thread_count(self) -> int | None:
        """How many threads meet here; None: every thread of the CTA."""
        return None if self.threads is None else self.threads.value.data

    def spelling(self) -> str:
        immediate = None if self.immediate_id is None else self.immediate_id.value.data
        return _barrier_text(self.mode.data, immediate, self.thread_count)


@irdl_op_definition
class ClusterBarrierOp(FieldedInstruction):
    """Half of the cluster barrier: every thread of the cluster arrives (releasing what it did)
    or waits for all of them to have arrived (acquiring what they did)."""

    name = "ptx.barrier_cluster"
    traits = traits_def(Synchronizes("cluster"))

    phase = prop_def(StringAttr)

    def __init__(self, phase: Literal["arrive", "wait"]):
        super().__init__(_cluster_barrier_text(phase), fields={"phase": StringAttr(phase)})

    def spelling(self) -> str:
        return _cluster_barrier_text(self.phase.data)


def _cluster_barrier_text(phase: str) -> str:
    semantics = "release" if phase == "arrive" else "acquire"
    return f"barrier.cluster.{phase}.{semantics}.aligned;"


@irdl_op_definition
class ProxyFenceOp(FieldedInstruction):
    """`fence.proxy.async.<space>`: orders this thread's generic-proxy accesses of `space`
    ("shared::cta" or "global") against the async proxy's (a TMA store reading what threads
    wrote, threads reading what a copy wrote)."""

    name = "ptx.fence_proxy_async"
    traits = traits_def(Fences("async"))

    space = prop_def(StringAttr)

    def __init__(self, space: Literal["shared::cta", "global"], guard: SSAValue | None = None):
        super().__init__(f"fence.proxy.async.{space};", (), (), guard, False, {"space": StringAttr(space)})

    def spelling(self) -> str:
        return f"fence.proxy.async.{self.space.data};"


@irdl_op_definition
class MbarrierInitFenceOp(FieldedInstruction):
    """`fence.mbarrier_init.release.cluster`: releases this thread's mbarrier initialisations to
    the cluster, before the cluster barrier that lets peers arrive on them."""

    name = "ptx.fence_mbarrier_init"
    traits = traits_def(Fences("generic"))

    def __init__(self, guard: SSAValue | None = None):
        super().__init__(self.spelling(), (), (), guard)

    def spelling(self) -> str:
        return "fence.mbarrier_init.release.cluster;"


@irdl_op_definition
class MbarrierInitOp(Instruction):
    """`mbarrier.init`: sets an mbarrier's expected arrival count (a shared-memory write)."""

    name = "ptx.mbarrier_init"
    traits = traits_def(AccessesMemory("generic"))


@irdl_op_definition
class MbarrierArriveOp(Instruction):
    """An arrival on an mbarrier of this CTA or a peer's (`mbarrier.arrive`, with `expect_tx`
    also adding expected bytes, or `cp.async.mbarrier.arrive` once the thread's copies land),
    or `mbarrier.complete_tx`, completing transaction bytes no copy will deliver."""

    name = "ptx.mbarrier_arrive"
    traits = traits_def(ActsOn("arrive", "mbarrier"))


@irdl_op_definition
class MbarrierTryWaitOp(Instruction):
    """`mbarrier.try_wait.parity`: whether the phase of that parity completed (acquiring what
    the arrivals released), within a time the hardware chooses."""

    name = "ptx.mbarrier_try_wait"
    traits = traits_def(ActsOn("wait", "mbarrier"))
