"""Synchronisation in kernel code: mbarrier groups from `asyncdsl.barrier(...)`, fences, and
warpgroup-, CTA- and cluster-wide barriers.

A group of one barrier can be used directly (`bar.wait()`); a larger group is indexed with a
Python int or a traced index (`bars[slot].wait()`). `wait()` tracks the phase for the user; an
explicit `parity=` overrides it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.core import allocation_tracer
from asyncdsl.frontend.options import cluster_dims
from asyncdsl.frontend.scalars import IndexLike, Scalar, index_value, is_index
from asyncdsl.hw.collective import CLUSTER_DIMS


class Barrier:
    """One mbarrier: barrier group `group`, position `index`."""

    def __init__(self, group: Barriers, index: IndexLike):
        self.group = group
        self.index = index

    @property
    def arrival_count(self) -> int:
        return self.group.arrival_count

    def operands(self) -> tuple[SSAValue, SSAValue]:
        return self.group.value, index_value(self.index)

    def wait(self, parity: IndexLike | None = None) -> None:
        """Every thread of the warpgroup waits until the barrier's phase completes."""
        tracer = tracing.current("Barrier.wait")
        barriers, index = self.operands()
        if parity is not None and not is_index(parity):
            raise TraceError(f"parity must be 0, 1 or a traced index, got {parity!r}", user_location())
        if isinstance(parity, int) and parity not in (0, 1):
            raise TraceError(f"parity must be 0 or 1, got {parity}", user_location())
        tracer.emit(ir.WaitOp(barriers, index, index_value(parity) if parity is not None else None))

    def arrive(self, count: int = 1, collective: str | Sequence[str] | None = None,
               sync: bool = True) -> None:
        """The warpgroup arrives `count` times (one thread does it, after the warpgroup's threads
        meet, so that what each of them read of shared memory is over before the arrival frees it).

        `sync=False` skips the meeting: for a release of buffers only the tensor cores read,
        whose `asyncdsl.wgmma_wait` already ended those reads (the consumer of a wgmma pipeline);
        the interpreter refuses it after the warpgroup's own register-tile loads.

        With `collective` ("x", "y", "z" or a tuple of them), it arrives `count` times on this
        barrier in every CTA of the collective: the CTAs a `collective=` copy over those cluster
        dims multicasts to, this one included.  That is how consumers tell the producers of
        every CTA that multicasts into their buffers that a slot is free.  Each dim must be one
        along which the kernel's cluster has more than one CTA.
        """
        tracer = tracing.current("Barrier.arrive")
        if not is_int(count):
            raise TraceError(f"arrive count must be a Python int, got {count!r}", user_location())
        dims = cluster_dims(collective)
        cluster = tracer.launch.cluster
        for dim in dims:
            if dim in CLUSTER_DIMS and cluster[CLUSTER_DIMS.index(dim)] == 1:
                raise TraceError(
                    f"arrive(collective={collective!r}): the kernel's cluster {cluster} has one CTA "
                    f"along {dim}, so there is no other CTA to arrive in (declare cluster= on the "
                    "kernel, or arrive without collective)",
                    user_location(),
                )
        if not isinstance(sync, bool):
            raise TraceError(f"arrive sync must be a Python bool, got {sync!r}", user_location())
        tracer.emit(ir.ArriveOp(*self.operands(), count, dims, sync=sync))

    def arrive_expect_tx(self, num_bytes: int) -> None:
        """One arrival that also announces `num_bytes` of async-copy traffic to come."""
        if not is_int(num_bytes) or num_bytes < 0:
            raise TraceError(f"expect-tx bytes must be a Python int >= 0, got {num_bytes!r}", user_location())
        tracing.current("Barrier.arrive_expect_tx").emit(ir.ArriveExpectTxOp(*self.operands(), num_bytes))


class Barriers(Barrier):
    """A group of `num` mbarriers sharing one arrival count."""

    def __init__(self, value: SSAValue, num: int, arrival_count: int):
        self.value = value
        self.num = num
        self._arrival_count = arrival_count
        super().__init__(self, 0)

    @property
    def arrival_count(self) -> int:
        return self._arrival_count

    def __len__(self) -> int:
        return self.num

    def __getitem__(self, index: IndexLike) -> Barrier:
        if is_int(index):
            if not -self.num <= index < self.num:
                raise TraceError(f"barrier index {index} out of range for a group of {self.num}",
                                 user_location())
            return Barrier(self, index % self.num)
        if isinstance(index, Scalar):
            return Barrier(self, index)
        raise TraceError(f"barriers are indexed by an int or a traced index, got {index!r}", user_location())

    def operands(self) -> tuple[SSAValue, SSAValue]:
        if self.num != 1:
            raise TraceError(
                f"this barrier group holds {self.num} barriers; pick one with bars[i]", user_location()
            )
        return super().operands()


def barrier(arrival_count: int = 1, num: int = 1) -> Barriers:
    """`num` mbarriers, each completing a phase after exactly `arrival_count` arrivals (plus any
    expected async-copy bytes). Index the group for one barrier: `bars[i]`.

    Each GMEM -> SMEM copy onto a barrier is one arrival (none with `arrive=False`), `arrive(n)`
    is n and `arrive_expect_tx` one, made once by each warpgroup that runs them: two copies that
    one wait covers need `arrival_count=2`.  Where the arrivals before a wait can be counted
    while tracing (straight-line code, `asyncdsl.range` loops of literal bounds), another count
    is a TraceError at the wait; elsewhere a wrong count hangs (the interpreter's DeadlockError
    lists the arrivals each phase got)."""
    tracer = allocation_tracer("asyncdsl.barrier")
    for name, value in (("arrival_count", arrival_count), ("num", num)):
        if not is_int(value):
            raise TraceError(f"asyncdsl.barrier: {name} must be a Python int, got {value!r}", user_location())
    op = tracer.emit(ir.AllocBarriersOp(num, arrival_count))
    return Barriers(op.results[0], num, arrival_count)


def fence_async_smem() -> None:
    """Make SMEM written by ordinary stores visible to TMA and tensor cores, then sync the
    warpgroup. Call it between writing a buffer and an async copy that reads it."""
    tracing.current("asyncdsl.fence_async_smem").emit(ir.FenceAsyncSmemOp())


def warpgroup_barrier() -> None:
    """All threads of the warpgroup meet."""
    tracing.current("asyncdsl.warpgroup_barrier").emit(ir.WarpgroupBarrierOp())


def cta_barrier() -> None:
    """All threads of the CTA meet."""
    tracing.current("asyncdsl.cta_barrier").emit(ir.CtaBarrierOp())


def cluster_barrier() -> None:
    """All threads of every CTA in the cluster meet."""
    tracing.current("asyncdsl.cluster_barrier").emit(ir.ClusterBarrierOp())
