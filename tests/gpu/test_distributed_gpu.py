"""Multi-device kernels on the GPU: a one-device kernel without NVSHMEM (its only peer is itself),
and the distributed kernels in NVSHMEM jobs of one PE, of two PEs sharing one GPU (each maps
the other's heap as it would a peer GPU's: the peer addresses, descriptors and signals cross
processes), and of two GPUs where there are two."""

from __future__ import annotations

import importlib.util

import distributed_work
import numpy as np
import pytest
from gpu_support import hopper_or_skip

import asyncdsl as ad
import asyncdsl.distributed as dist
from asyncdsl.kernels.collectives import all_gather_kernel
from asyncdsl.runtime import to_device, to_host
from asyncdsl.runtime.driver import device_count

hopper_or_skip()
pytestmark = pytest.mark.gpu
needs_nvshmem = pytest.mark.skipif(importlib.util.find_spec("nvshmem") is None,
                                   reason="needs nvshmem4py (pip install 'asyncdsl[distributed]')")


def test_a_one_device_kernel_is_its_own_peer_without_nvshmem():
    rng = np.random.default_rng(1)
    shard = rng.standard_normal((200, 136)).astype(np.float32)
    out, flags = to_device(np.full((1, 200, 136), np.nan, np.float32)), to_device(np.zeros(1, np.int32))
    for epoch in (1, 2):
        all_gather_kernel(to_device(shard), out, flags, epoch, CTAS=4)
    assert to_host(out)[0].tobytes() == shard.tobytes()
    assert to_host(flags).tolist() == [8]


def test_device_id_is_zero_without_nvshmem():
    @ad.kernel(grid=(1,))
    def rank(out):
        buf = ad.smem((16,), ad.int32)
        buf[...] = ad.full((16,), ad.device_id(), ad.int32)
        ad.fence_async_smem()
        ad.async_copy(buf, out)
        ad.await_async_copy()

    out = to_device(np.full(16, -1, np.int32))
    rank(out)
    assert to_host(out).tolist() == [0] * 16


JOBS = {"one PE": [0], "two PEs on one GPU": [0, 0], "two GPUs": [0, 1]}


def _in_job(job: str, work) -> list:
    """`work`'s results from every process of an NVSHMEM job laid out as `JOBS[job]` says (the
    test skips where this machine has too few GPUs)."""
    devices = JOBS[job]
    if max(devices) >= device_count():
        pytest.skip(f"needs {max(devices) + 1} GPUs")
    return dist.spawn(work, len(devices), devices=devices)


@needs_nvshmem
@pytest.mark.parametrize("job", JOBS)
def test_the_distributed_examples_are_exact_in_an_nvshmem_job(job):
    results = _in_job(job, distributed_work.examples)
    assert all(all(result.values()) for result in results), results


@needs_nvshmem
@pytest.mark.parametrize("job", JOBS)
def test_tma_reduce_adds_into_every_peer(job):
    assert all(_in_job(job, distributed_work.peer_reduce_add))


@needs_nvshmem
def test_an_array_off_the_symmetric_heap_is_refused():
    (message,) = dist.spawn(distributed_work.off_heap_refusal, 1)
    assert "argument 'out'" in message and "not on the NVSHMEM symmetric heap" in message
