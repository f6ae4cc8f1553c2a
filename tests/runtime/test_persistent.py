"""Persistent grids on the GPU path, without a GPU: the runtime asks the driver's occupancy
calculator once per loaded kernel with the kernel's own launch configuration (clusters through
`cuOccupancyMaxActiveClusters`, single CTAs through blocks per SM × SMs), lays the clusters along
x (`tests/jit/test_launch.py` checks that a kernel call launches on that grid)."""

from __future__ import annotations

import pytest

pytest.importorskip("cuda.bindings")

from fake_driver import RecordingDriver, pointer_binary

from asyncdsl.errors import ResourceError
from asyncdsl.runtime import driver, launch, persistent


class _OccupancyDriver(RecordingDriver):
    """Also answers the occupancy queries (the H200's 132 SMs; one 384-thread CTA per SM)."""

    def __init__(self, clusters=66, blocks_per_sm=1, **options):
        super().__init__(**options)
        self.clusters, self.blocks_per_sm = clusters, blocks_per_sm

    def cuOccupancyMaxActiveClusters(self, function, config):
        grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
        cluster = [(a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z)
                   for a in config.attrs[:config.numAttrs]]
        self._record("cuOccupancyMaxActiveClusters", int(function), grid, config.blockDimX,
                     config.sharedMemBytes, cluster)
        return (self.success, self.clusters)

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, function, threads, dynamic_smem):
        self._record("cuOccupancyMaxActiveBlocksPerMultiprocessor", int(function), threads, dynamic_smem)
        return (self.success, self.blocks_per_sm)


@pytest.fixture
def occupancy(fake_driver, monkeypatch):
    def install(**options):
        fake_driver()  # the loader's calls answered and recorded ...
        replacement = _OccupancyDriver(**options)  # ... and the occupancy queries too
        monkeypatch.setattr(driver, "_driver_module", replacement)
        return replacement

    return install


def test_clusters_come_from_max_active_clusters_with_the_kernels_configuration(occupancy):
    fake = occupancy(clusters=66)
    kernel = launch.load_kernel(
        pointer_binary(block=(384, 1, 1), dynamic_smem_bytes=205824, cluster=(2, 1, 1)))
    assert persistent.persistent_grid(kernel) == (132, 1, 1)
    assert persistent.persistent_grid(kernel) == (132, 1, 1)  # cached: asked once
    queries = [args for name, args in fake.calls if name.startswith("cuOccupancy")]
    assert queries == [(0x200, (2, 1, 1), 384, 205824, [(2, 1, 1)])]


def test_clusters_lie_along_x_and_a_2d_cluster_keeps_its_y_extent(occupancy):
    occupancy(clusters=30)
    kernel = launch.load_kernel(pointer_binary(cluster=(2, 2, 1)))
    assert persistent.persistent_grid(kernel) == (60, 2, 1)


def test_single_ctas_are_blocks_per_sm_times_sms(occupancy):
    fake = occupancy(blocks_per_sm=2)
    kernel = launch.load_kernel(pointer_binary(block=(256, 1, 1), dynamic_smem_bytes=9216))
    assert persistent.persistent_grid(kernel) == (264, 1, 1)  # 2 x 132 SMs
    queries = [args for name, args in fake.calls if name.startswith("cuOccupancy")]
    assert queries == [(0x200, 256, 9216)]


def test_a_kernel_that_does_not_fit_has_no_persistent_grid(occupancy):
    occupancy(clusters=0)
    kernel = launch.load_kernel(pointer_binary(cluster=(2, 1, 1)))
    with pytest.raises(ResourceError, match="not even one cluster"):
        persistent.persistent_grid(kernel)
