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


def peer_reduce_add() -> bool:
    """Each PE adds its int32 tile into every PE's `total` with a TMA reduce-add across devices,
    then counts itself in on every PE's flag; whether `total` is the sum of all the tiles."""
    import numpy as np
    import torch

    import asyncdsl as ad
    import asyncdsl.distributed as dist

    @ad.kernel(grid=(1,), block=128)
    def add_everywhere(tile, total, arrived):
        devices = ad.num_devices()
        buf = ad.smem(tile.shape, tile.dtype)
        landed = ad.barrier()
        ad.async_copy(tile, buf, barrier=landed)
        landed.wait()
        for pe in range(devices):
            ad.async_copy(buf, total.peer(pe), reduction="add")
        ad.await_async_copy()
        for pe in range(devices):
            ad.signal(arrived.peer(pe).at[0], 1, op="add")
        ad.wait_signal(arrived.at[0], "ge", devices)

    devices, rank = dist.world_size(), dist.rank()
    tiles = [np.random.default_rng(pe).integers(-1000, 1000, (64, 64), dtype=np.int32)
             for pe in range(devices)]
    tile = dist.symmetric_like(torch.from_numpy(tiles[rank]).cuda())
    total, arrived = dist.symmetric_empty((64, 64), torch.int32), dist.symmetric_empty((1,), torch.int32)
    total.zero_()
    arrived.zero_()
    dist.barrier()  # every total is zero before anyone adds into it
    add_everywhere(tile, total, arrived)
    torch.cuda.synchronize()
    ok = np.array_equal(total.cpu().numpy(), np.sum(tiles, axis=0))
    dist.barrier()
    return ok
