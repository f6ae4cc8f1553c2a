"""The multi-device runtime without NVSHMEM running: what a one-device run gets, and the errors
of everything that needs a job (no GPU needed)."""

from __future__ import annotations

import os

import pytest

import asyncdsl as ad
import asyncdsl.distributed as dist
from asyncdsl.runtime import symmetric


def test_without_a_job_a_kernel_runs_on_one_device_that_is_its_own_peer():
    assert symmetric.world() is None and symmetric.world_size() == 1
    assert symmetric.peer_address(0x7000_0000, 0, "argument 'x'") == 0x7000_0000
    symmetric.check_symmetric(0x7000_0000, "argument 'x'")  # nothing to check against


def test_a_peer_other_than_the_only_device_is_refused_without_a_job():
    with pytest.raises(ad.ArgumentError, match="read on device 1, but no NVSHMEM job runs here"):
        symmetric.peer_address(0x7000_0000, 1, "argument 'x'")


def test_a_kernel_traced_for_several_devices_needs_a_job_that_size():
    with pytest.raises(ad.ArgumentError, match=r"traced for 2 device\(s\).*no NVSHMEM job runs here"):
        symmetric.peer_table(2, 0, "all_gather")


@pytest.mark.parametrize("call", [dist.rank, dist.world_size, dist.barrier,
                                  lambda: dist.symmetric_empty((4,), "float32")], ids=["rank", "world_size",
                                                                                       "barrier",
                                                                                       "symmetric_empty"])
def test_what_needs_a_job_says_to_start_one(call):
    if call is not dist.rank and call is not dist.world_size and call is not dist.barrier:
        pytest.importorskip("torch")
    with pytest.raises(ad.DistributedError, match="call asyncdsl.distributed.init"):
        call()


def test_spawn_checks_its_arguments_before_starting_anything():
    with pytest.raises(ad.ArgumentError, match="world_size must be a positive int"):
        dist.spawn(print, 0)
    with pytest.raises(ad.ArgumentError, match="2 devices for 3 processes"):
        dist.spawn(print, 3, devices=[0, 1])


class _EndsTheProcessWhenUnpickled:
    """A spawn argument whose unpickling ends the process at once, as a native abort does."""

    def __reduce__(self):
        return os._exit, (3,)


def test_spawn_reports_a_process_that_ends_without_a_result():
    # It waited for every process's result, for ever when one never came.
    with pytest.raises(ad.DistributedError, match="PE 0 of 2 failed:\nthe process ended with exit code 3"):
        dist.spawn(print, 2, _EndsTheProcessWhenUnpickled())


def test_freeing_an_array_the_job_did_not_allocate_is_refused():
    with pytest.raises(ad.ArgumentError, match="not allocated by this NVSHMEM job"):
        dist.free(object())
