"""What a warpgroup knows has happened: vector clocks over the events the race checks need.

Only asynchronous events need ordering here, because ordinary code of one warpgroup runs in
program order.  Two kinds of event are counted, each under its own key:

- `barrier_key(cta, offset)`: how many phases of that mbarrier have completed.  The bytes a TMA
  load lands in phase `k` are safe to read once the reader knows `k + 1` completed phases.
- `bulk_key(cta, warpgroup)`: how many bulk groups (TMA stores) of that warpgroup have finished
  reading shared memory.  The bytes a store reads may be overwritten once the writer knows it.
- `cp_async_key(cta, warpgroup)`: how many cp.async commit groups of that warpgroup have landed.
- `proxy_fence_key(cta, warpgroup)`: how many proxy fences (`fence_async_smem`) it has made;
  generic-proxy writes reach the async proxy through them.
- `wgmma_key(cta, warpgroup)`: how many wgmma groups of that warpgroup have retired (a
  `wgmma_wait`); the operand bytes a group reads may be overwritten once the writer knows it.
- `shared_access_key(cta, warpgroup)`: how many register-tile loads and stores (`ld/st.shared`)
  it has made.  They are over for the warpgroup itself at once, and for others once they have
  synchronised with it since.

Knowledge travels along the synchronisation edges of the hardware: an mbarrier arrival releases
the arriver's clock into the barrier and a wait that sees the phase complete acquires it, and
CTA and cluster barriers join the clocks of everyone who meets.  So a warpgroup that did not wait
itself but was told by one that did (the consumer that arrives on an "empty" barrier, a CTA
barrier after the wait) knows as much as the hardware guarantees, and no more.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


def barrier_key(cta_rank: int, offset: int) -> Hashable:
    """The key counting completed phases of the mbarrier at `offset` in CTA `cta_rank`."""
    return ("mbarrier", cta_rank, offset)


def bulk_key(cta_rank: int, warpgroup: int) -> Hashable:
    """The key counting retired bulk groups of one warpgroup."""
    return ("bulk", cta_rank, warpgroup)


def cp_async_key(cta_rank: int, warpgroup: int) -> Hashable:
    """The key counting awaited cp.async commit groups of one warpgroup."""
    return ("cp.async", cta_rank, warpgroup)


def proxy_fence_key(cta_rank: int, warpgroup: int) -> Hashable:
    """The key counting the proxy fences one warpgroup has made."""
    return ("proxy fence", cta_rank, warpgroup)


def wgmma_key(cta_rank: int, warpgroup: int) -> Hashable:
    """The key counting retired wgmma groups of one warpgroup."""
    return ("wgmma", cta_rank, warpgroup)


def shared_access_key(cta_rank: int, warpgroup: int) -> Hashable:
    """The key counting the register-tile loads and stores one warpgroup has made."""
    return ("ld/st.shared", cta_rank, warpgroup)


class VectorClock:
    """A map from event keys to counts; a missing key counts 0.  Joins take the maximum."""

    __slots__ = ("_counts",)

    def __init__(self, counts: dict[Hashable, int] | None = None):
        self._counts = dict(counts) if counts else {}

    def knows(self, key: Hashable, count: int) -> bool:
        """Whether at least `count` events of `key` are known to have happened."""
        return self._counts.get(key, 0) >= count

    def advance(self, key: Hashable, count: int) -> None:
        """Learn that `count` events of `key` have happened."""
        if count > self._counts.get(key, 0):
            self._counts[key] = count

    def join(self, other: VectorClock) -> None:
        """Learn everything `other` knows."""
        for key, count in other._counts.items():
            if count > self._counts.get(key, 0):
                self._counts[key] = count

    def copy(self) -> VectorClock:
        return VectorClock(self._counts)


def joined(clocks: Iterable[VectorClock]) -> VectorClock:
    """A clock that knows what any of `clocks` knows."""
    result = VectorClock()
    for clock in clocks:
        result.join(clock)
    return result
