"""The state of an interpreted launch: the launch itself, each CTA, each warpgroup.

A warpgroup is the unit that runs (kernel code describes what one warpgroup does); it keeps
what the hardware keeps per thread and is uniform across its threads: the tracked phase bit of
each mbarrier, its bulk-group and cp.async-group counters, its proxy fences, its count of
register-tile loads and stores, and what it knows has happened (`clocks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from asyncdsl.errors import AsyncDSLError, InterpretError, OutOfBoundsError, SourceLocation
from asyncdsl.hw.limits import BARRIER_BYTES
from asyncdsl.interpret.clocks import (
    VectorClock,
    barrier_key,
    bulk_key,
    cp_async_key,
    proxy_fence_key,
    shared_access_key,
    wgmma_key,
)
from asyncdsl.interpret.mbarrier import MBarrier
from asyncdsl.interpret.memory import GlobalArgument, SharedMemory
from asyncdsl.interpret.races import AsyncAccessLog
from asyncdsl.interpret.waits import Rendezvous

if TYPE_CHECKING:
    from asyncdsl.interpret.profile import ProfileRecorder
    from asyncdsl.interpret.scheduler import ClusterScheduler, SoloScheduler
    from asyncdsl.interpret.turns import TurnToken


@dataclass
class Devices:
    """The devices of a launch on several (`interpret/distributed.py`): each one's arguments (the
    symmetric heap, by device) and its warpgroups (filled as CTAs are made)."""

    arguments: tuple[tuple[GlobalArgument, ...], ...]
    warpgroups: list[list[Warpgroup]] = field(default_factory=list)

    def __post_init__(self):
        self.warpgroups = [[] for _ in self.arguments]


@dataclass(frozen=True)
class Launch:
    """What every CTA of one launch shares."""

    kernel: str
    grid: tuple[int, int, int]
    cluster: tuple[int, int, int]
    warpgroups_per_cta: int
    smem_bytes: int
    arguments: tuple[GlobalArgument, ...]
    scalars: tuple = ()  # the runtime scalar arguments, as xDSL's interpreter values
    profile: ProfileRecorder | None = None  # a profiled kernel: where its regions are recorded
    device: int = 0  # this launch's device, among `devices`
    devices: Devices | None = None  # a launch on several devices: all of them

    def argument(self, index: int, peer: int | None) -> GlobalArgument:
        """Array argument `index` of this device (`peer` None) or of device `peer`."""
        if peer is None:
            return self.arguments[index]
        count = 1 if self.devices is None else len(self.devices.arguments)
        if not 0 <= peer < count:
            raise OutOfBoundsError(
                f"peer {peer} is not a device of the launch, which runs on {count} (0 .. {count - 1})"
            )
        return (self.arguments if self.devices is None else self.devices.arguments[peer])[index]

    def exited_devices(self) -> list[bool]:
        """For each device of a multi-device launch, whether all its warpgroups have exited."""
        if self.devices is None:
            return []
        return [all(w.exited for w in group) for group in self.devices.warpgroups]

    @property
    def call_arguments(self) -> tuple:
        """What the kernel function is called with: its arrays, then its scalars."""
        return (*self.arguments, *self.scalars)

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]


@dataclass(frozen=True)
class BarrierInit:
    """One `alloc_barriers` of the kernel, initialised in every CTA before the body runs."""

    offset: int
    count: int
    arrival_count: int
    origin: str


class Cta:
    """One CTA: its ids, shared memory, mbarriers and warpgroups."""

    def __init__(
        self, launch: Launch, program_id: tuple[int, int, int], rank: int, barriers: list[BarrierInit]
    ):
        self.launch = launch
        self.program_id = program_id
        self.rank = rank  # position in its cluster (%cluster_ctarank)
        self.cluster_ctas: list[Cta] = [self]  # its cluster's CTAs by rank (set by `grid`)
        self.cluster_cta_id = tuple(p % c for p, c in zip(program_id, launch.cluster))
        self.cluster_id = tuple(p // c for p, c in zip(program_id, launch.cluster))
        self.label = (f"CTA {program_id}" if launch.devices is None
                      else f"device {launch.device} CTA {program_id}")
        self.smem = SharedMemory(launch.smem_bytes)
        self.accesses = AsyncAccessLog()
        self.mbarriers: dict[int, MBarrier] = {}
        for group in barriers:
            self._init_barriers(group)
        self.warpgroups = [Warpgroup(self, index) for index in range(launch.warpgroups_per_cta)]
        self.cta_barrier = Rendezvous(f"bar.sync 0 of {self.label}", self.warpgroups)
        self.turns: dict[int, TurnToken] = {}  # by first named barrier (`interpret/turns.py`)

    def _init_barriers(self, group: BarrierInit) -> None:
        where = f"the barriers allocated at {group.origin}"
        self.smem.check(group.offset, BARRIER_BYTES * group.count, where)
        for index in range(group.count):
            offset = group.offset + BARRIER_BYTES * index
            name = (
                f"the mbarrier allocated at {group.origin}"
                if group.count == 1
                else f"mbarrier {index} of the group allocated at {group.origin}"
            )
            self.mbarriers[offset] = MBarrier(barrier_key(self.rank, offset), name, group.arrival_count)


class Warpgroup:
    """128 threads of a CTA that kernel code describes as one."""

    def __init__(self, cta: Cta, index: int):
        self.cta = cta
        self.index = index
        self.label = f"{cta.label} warpgroup {index}"
        self.clock = VectorClock()
        self.bulk_key = bulk_key(cta.rank, index)
        self.committed_groups = 0
        self.retired_groups = 0
        self.writes_awaited_groups = 0  # committed bulk groups whose GMEM writes are awaited
        self.cp_async_key = cp_async_key(cta.rank, index)
        self.committed_cp_async_groups = 0
        self.proxy_fences = 0
        self.shared_key = shared_access_key(cta.rank, index)
        self.shared_accesses = 0
        # The line of a register-tile load whose reads no warpgroup barrier has ended since:
        # an arrival without one (`arrive(sync=False)`) must not free what it read.
        self.unsynced_load: str | None = None
        self.wgmma_key = wgmma_key(cta.rank, index)
        self.wgmma_issued = 0
        self.wgmma_retired = 0
        self.exited = False
        self._parity_bits: dict[int, int] = {}
        # Set when the cluster is assembled (`grid.py`), before the warpgroup runs: who runs it,
        # and the cluster barrier.
        self.scheduler: SoloScheduler | ClusterScheduler
        self.cluster_barrier: Rendezvous

    def next_parity(self, barrier_offset: int) -> int:
        """The tracked parity of a wait without one: 0 first, flipped after every wait."""
        parity = self._parity_bits.get(barrier_offset, 0)
        self._parity_bits[barrier_offset] = parity ^ 1
        return parity

    def mbarrier(self, offset: int) -> MBarrier:
        return self.cta.mbarriers[offset]

    def wait_until(self, blocker) -> None:
        """Stop here until `blocker` is ready (the scheduler runs others meanwhile)."""
        self.scheduler.wait_until(self.label, blocker)

    def retire_bulk_groups(self, allow_pending: int) -> None:
        """All but the newest `allow_pending` committed bulk groups have finished."""
        self.retired_groups = max(self.retired_groups, self.committed_groups - allow_pending)
        self.clock.advance(self.bulk_key, self.retired_groups)

    def retire_cp_async_groups(self, allow_pending: int) -> None:
        """All but the newest `allow_pending` committed cp.async groups have landed."""
        self.clock.advance(self.cp_async_key, self.committed_cp_async_groups - allow_pending)

    def check_unsynced_arrive(self) -> None:
        """An arrival without the warpgroup's threads meeting first: refused while one of them
        may still be reading shared memory for a register-tile load."""
        if self.unsynced_load is not None:
            raise InterpretError(
                f"arrives with sync=False after the register-tile load at {self.unsynced_load}, whose reads "
                "no warpgroup barrier has ended: some thread may still be reading what the arrival frees "
                "(arrive with sync=True)"
            )

    def retire_wgmma_groups(self, allow_pending: int) -> None:
        """All but the newest `allow_pending` wgmma groups have finished."""
        self.wgmma_retired = max(self.wgmma_retired, self.wgmma_issued - allow_pending)
        self.clock.advance(self.wgmma_key, self.wgmma_retired)

    def fence_proxies(self) -> None:
        """`fence.proxy.async`: generic-proxy SMEM writes this warpgroup knows are over reach
        the async proxy, for whoever learns of this fence."""
        self.proxy_fences += 1
        fence = (proxy_fence_key(self.cta.rank, self.index), self.proxy_fences)
        self.clock.advance(*fence)
        self.cta.accesses.fence_generic_writes(self.clock, fence)

    def access_shared(self) -> int:
        """One more register-tile load or store: its number under `shared_key`, which this
        warpgroup knows at once (it is interpreted as one)."""
        self.shared_accesses += 1
        self.clock.advance(self.shared_key, self.shared_accesses)
        return self.shared_accesses

    def error(self, error: AsyncDSLError, location: SourceLocation | None) -> AsyncDSLError:
        """`error` (raised without context by the memory model) naming this warpgroup and line."""
        message = f"kernel {self.cta.launch.kernel}, {self.label}: {error.message}"
        return type(error)(message, location or error.location)
