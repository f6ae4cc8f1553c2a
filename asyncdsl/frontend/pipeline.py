"""A ring of shared-memory slots between a producer and its consumers: `asyncdsl.Pipeline`.

    ring = ad.Pipeline(stages=4, loads=2, consumers=2)     # call at the kernel's top level
    with ad.warpgroup_role(2):                             # the producer
        for step in ad.range(steps):
            slot, landed = ring.produce(step)              # waits until the slot is free again
            ad.async_copy(a.at[...], a_ring.at[slot], barrier=landed)   # `loads` copies a slot
            ad.async_copy(b.at[...], b_ring.at[slot], barrier=landed)
    with ad.warpgroup_role((0, 1)):                        # the consumers
        for step in ad.range(steps):
            slot = ring.consume(step)                      # waits until the slot's copies landed
            ad.wgmma(acc, a_ring.at[slot], b_ring.at[slot], accumulate=step > 0)
            ad.wgmma_wait(1)
            with ad.when(step > 0):
                ring.release(step - 1)                     # the previous slot's wgmma is done
        ad.wgmma_wait(0)
        ring.release(steps - 1)                            # every slot is released once

With `collective="x"` the producers of the CTAs along the cluster's x dim fill each other's
slots (multicast copies), so consumers release a slot in all of those CTAs and each `empty`
barrier waits for every one of their consumers.

Step `i` uses slot `i % stages`.  Two barrier groups make the ring: `full` (one arrival per copy
into a slot, plus the copies' bytes) and `empty` (one arrival per consumer warpgroup).  The
producer fills the first `stages` slots without waiting and afterwards waits on `empty` before
each refill; every consumer releases every step's slot exactly once, in step order (late by a
step is fine: a consumer that keeps one wgmma in flight releases the previous one).  Releases
skip the warpgroup barrier when `after_wgmma` (the default): the consumers read the slots only
through the tensor cores, whose `wgmma_wait` already ended the reads.  Nothing here is more than
the barriers and waits a kernel can write out itself; the ring only keeps them in step.
"""

from __future__ import annotations

from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.control import when
from asyncdsl.frontend.profile import region
from asyncdsl.frontend.scalars import Scalar, is_index
from asyncdsl.frontend.sync import Barrier, barrier


class Pipeline:
    """`stages` slots filled by `loads` copies each and released by `consumers` warpgroups."""

    def __init__(self, stages: int, loads: int = 1, consumers: int = 1, collective: str | None = None):
        for name, value in (("stages", stages), ("loads", loads), ("consumers", consumers)):
            if not is_int(value) or value < 1:
                raise TraceError(f"asyncdsl.Pipeline: {name} must be a Python int >= 1, got {value!r}",
                                 user_location())
        self.stages = stages
        # With `collective` (a cluster dim the producers multicast along), every CTA's producer
        # writes into every CTA's slots: a slot is free when the consumers of all of them released it.
        self.collective = collective
        sharing = 1
        if collective is not None:
            cluster = tracing.current("asyncdsl.Pipeline").launch.cluster
            if collective not in ("x", "y", "z"):
                raise TraceError(f"asyncdsl.Pipeline: collective must be 'x', 'y' or 'z', got {collective!r}",
                                 user_location())
            sharing = cluster["xyz".index(collective)]
            # a cluster of one CTA along it: a plain ring, as a collective copy is a plain copy
            if sharing == 1:
                self.collective = None
        self.full = barrier(arrival_count=loads, num=stages)
        self.empty = barrier(arrival_count=consumers * sharing, num=stages)
        self._slots: dict = {}  # a traced step's value -> the slot computed from it

    def _slot(self, step):
        """`step % stages`, computed once per traced step where it is still in scope."""
        if not is_index(step):
            raise TraceError(f"asyncdsl.Pipeline: a step is a Python int or a traced index, got {step!r}",
                             user_location())
        if not isinstance(step, Scalar):
            return step % self.stages
        known = self._slots.get(step.value)
        if known is not None and (
                not isinstance(known, Scalar)  # folded: one stage
                or tracing.current("asyncdsl.Pipeline").visible(known.value.owner.parent_block())):
            return known
        slot = self._slots[step.value] = step % self.stages
        return slot

    def produce(self, step) -> tuple:
        """For the producer: wait until step's slot is free (from the second round of the ring
        on), then give (slot, the barrier its copies must arrive on)."""
        slot = self._slot(step)
        with region("wait free"), when(step >= self.stages):
            self.empty[slot].wait()
        return slot, self.full[slot]

    def consume(self, step):
        """For a consumer: wait until step's slot has landed, and give the slot."""
        slot = self._slot(step)
        with region("wait loaded"):
            self.full[slot].wait()
        return slot

    def release(self, step, after_wgmma: bool = True) -> None:
        """For a consumer: step's slot may be refilled (see the module docstring on `after_wgmma`)."""
        slot_barrier: Barrier = self.empty[self._slot(step)]
        slot_barrier.arrive(collective=self.collective, sync=not after_wgmma)
