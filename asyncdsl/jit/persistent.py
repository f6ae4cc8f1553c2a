"""`grid=asyncdsl.persistent_grid`: launch as many CTAs as fit on the device at once.

A persistent kernel strides over its work by `asyncdsl.num_programs(0)` (e.g. tile `cluster +
i * clusters` for i = 0, 1, ...), so the grid only says how many CTAs run, and the right number
is what the device holds at once, in whole clusters.  On the GPU the runtime asks the driver's
occupancy calculator once per loaded kernel (`asyncdsl.runtime.persistent`); clusters are laid
along x, so the grid is (clusters × cluster x, cluster y, cluster z).

The interpreter has no device to ask, and interpreting 132 SMs' worth of CTAs would be slow for
no gain: it launches `interpret_clusters` clusters (2 by default, so that striding over work
between CTAs is exercised).  `asyncdsl.PersistentGrid(interpret_clusters=n)` changes that.
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncdsl.errors import ArgumentError, is_int

INTERPRETED_CLUSTERS = 2


@dataclass(frozen=True)
class PersistentGrid:
    """The grid of a persistent kernel; see the module docstring."""

    interpret_clusters: int = INTERPRETED_CLUSTERS

    def __post_init__(self):
        clusters = self.interpret_clusters
        if not is_int(clusters) or clusters < 1:
            raise ArgumentError(f"interpret_clusters must be a positive int, got {clusters!r}")

    def interpreted(self, cluster: tuple[int, int, int]) -> tuple[int, int, int]:
        """The grid the interpreter launches for a kernel of `cluster`."""
        return (self.interpret_clusters * cluster[0], cluster[1], cluster[2])

    def __repr__(self) -> str:
        if self.interpret_clusters == INTERPRETED_CLUSTERS:
            return "asyncdsl.persistent_grid"
        return f"asyncdsl.PersistentGrid(interpret_clusters={self.interpret_clusters})"


persistent_grid = PersistentGrid()
