"""What the processes of the NVSHMEM jobs of `test_distributed_gpu.py` run (a module of its own:
`asyncdsl.distributed.spawn` starts fresh interpreters, which import the work by name)."""

from __future__ import annotations

from asyncdsl.examples import all_gather, all_gather_matmul, reduce_scatter


def examples() -> dict[str, bool]:
    """Every multi-device example on this PE: whether each was bit-exact."""
    return {module.__name__.rsplit(".", 1)[-1]: module.on_gpus()
            for module in (all_gather, reduce_scatter, all_gather_matmul)}


def off_heap_refusal() -> str:
    """The error of a launch whose peer-addressed array is not on the symmetric heap."""
    import torch

    import asyncdsl as ad
    import asyncdsl.distributed as dist

    devices = dist.world_size()
    shard = dist.symmetric_empty((64, 64), torch.float32)
    flags = dist.symmetric_empty((devices,), torch.int32)
    plain = torch.zeros((devices, 64, 64), device="cuda")  # torch's allocator, not the heap
    try:
        all_gather.all_gather(shard, plain, flags, 1)
    except ad.ArgumentError as error:
        return str(error)
    return "launched"
