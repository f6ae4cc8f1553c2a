"""Persistent grids: as many CTAs as the device can hold at once, in whole clusters.

A persistent kernel (`grid=asyncdsl.persistent_grid`) loops over its work itself, striding by
`asyncdsl.num_programs(0)`, so its grid is what fits on the device at once, not the size of the
problem.  That count depends on the compiled kernel (threads, registers, dynamic shared memory)
and its cluster shape, so the driver's occupancy calculator is asked once per loaded kernel:

- clusters of more than one CTA: `cuOccupancyMaxActiveClusters` with the kernel's own launch
  configuration (block, dynamic shared memory, cluster dimension attribute);
- no clusters: `cuOccupancyMaxActiveBlocksPerMultiprocessor` × the number of SMs.

The clusters are laid along x: the grid is (clusters × cluster x, cluster y, cluster z).
"""

from __future__ import annotations

import math
import weakref

from asyncdsl.errors import ResourceError, user_location
from asyncdsl.runtime import driver
from asyncdsl.runtime.launch import LoadedKernel

_grids: weakref.WeakKeyDictionary[LoadedKernel, tuple[int, int, int]] = weakref.WeakKeyDictionary()


def persistent_grid(loaded: LoadedKernel) -> tuple[int, int, int]:
    """The grid of a persistent launch of `loaded` (computed on first use, then cached)."""
    grid = _grids.get(loaded)
    if grid is None:
        clusters = co_resident_clusters(loaded)
        if clusters < 1:
            raise ResourceError(
                f"kernel {loaded.name!r}: not even one cluster {loaded.binary.cluster} of blocks "
                f"{loaded.binary.block} with {loaded.binary.dynamic_smem_bytes} bytes of dynamic "
                "shared memory fits on the device at once, so it has no persistent grid",
                user_location(),
            )
        cx, cy, cz = loaded.binary.cluster
        grid = (clusters * cx, cy, cz)
        _grids[loaded] = grid
    return grid


def co_resident_clusters(loaded: LoadedKernel) -> int:
    """How many clusters of `loaded` (single CTAs without clusters) the device holds at once."""
    cu = driver.api()
    binary = loaded.binary
    driver.activate(loaded.device)
    function = loaded._function
    if math.prod(binary.cluster) == 1:
        threads = math.prod(binary.block)
        per_sm = driver.check(
            cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, binary.dynamic_smem_bytes),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )
        return per_sm * driver.device_facts(loaded.device).multiprocessor_count
    config = loaded.new_launch_config()  # block, dynamic shared memory, cluster dimension
    # One cluster's worth of grid: a valid launch of the configuration being asked about.
    config.gridDimX, config.gridDimY, config.gridDimZ = binary.cluster
    return driver.check(cu.cuOccupancyMaxActiveClusters(function, config), "cuOccupancyMaxActiveClusters")
