"""What the processes of the NVSHMEM jobs of `test_distributed_gpu.py` run (a module of its own:
`asyncdsl.distributed.spawn` starts fresh interpreters, which import the work by name)."""

from __future__ import annotations

import asyncdsl.kernels as K
from asyncdsl.kernels.collectives import all_gather_kernel


def examples() -> dict[str, bool]:
    """Every multi-device kernel on this PE: whether each was bit-exact."""
    return {"all_gather": all_gather_on_gpus(), "reduce_scatter": reduce_scatter_on_gpus(),
            "all_gather_matmul": all_gather_gemm_on_gpus()}


def all_gather_on_gpus(shape=(1000, 520), seed: int = 0) -> bool:
    """All-gather random bf16 shards across the job's GPUs, twice, into outputs the host function
    makes on the symmetric heap; whether this PE's output is bit for bit the shards stacked."""
    import torch

    import asyncdsl.distributed as dist

    devices, generator, flags = _job(seed)
    ok = True
    for epoch in (1, 2):
        shards = [torch.randn(shape, generator=generator).to(torch.bfloat16) for _ in range(devices)]
        shard = dist.symmetric_like(shards[dist.rank()].cuda())
        out = K.all_gather(shard, flags, epoch)
        torch.cuda.synchronize()
        ok &= torch.equal(out.cpu().view(torch.int16), torch.stack(shards).view(torch.int16))
        dist.barrier()  # nobody frees its shard or its output while a peer still copies
        dist.free(out)
        dist.free(shard)
    ctas = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return ok and bool((flags == 2 * ctas).all())


def reduce_scatter_on_gpus(rows: int = 1000, columns: int = 520, seed: int = 0) -> bool:
    """Reduce-scatter random bf16 arrays across the job's GPUs, twice; whether this PE's output is
    bit for bit the float32 sum over devices in rank order, rounded once."""
    import torch

    import asyncdsl.distributed as dist

    devices, generator, ready = _job(seed)
    rank, ok = dist.rank(), True
    for epoch in (1, 2):
        xs = [torch.randn((devices, rows, columns), generator=generator).to(torch.bfloat16)
              for _ in range(devices)]
        x = dist.symmetric_like(xs[rank].cuda())
        out = K.reduce_scatter(x, ready, epoch)
        torch.cuda.synchronize()
        total = sum(t[rank].float() for t in xs).to(torch.bfloat16)  # in rank order, from 0
        ok &= torch.equal(out.cpu().view(torch.int16), total.view(torch.int16))
        dist.barrier()  # nobody frees its x while a peer may still read it
        dist.free(x)
    return ok


def _job(seed: int) -> tuple:
    """(devices, a seeded generator, zeroed int32 flags one a device on the symmetric heap): the
    flags are down on every PE before any PE raises one."""
    import torch

    import asyncdsl.distributed as dist

    flags = dist.symmetric_empty((dist.world_size(),), torch.int32)
    flags.zero_()
    dist.barrier()
    return dist.world_size(), torch.Generator().manual_seed(seed), flags


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
        all_gather_kernel(shard, plain, flags, 1)
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


def all_gather_gemm_on_gpus(rows: int = 256, k: int = 512, n: int = 512, seed: int = 0) -> bool:
    """The fused all-gather GEMM on small-integer shards and this PE's own weights; whether its
    output is exactly numpy's product of the gathered rows."""
    import numpy as np
    import torch

    import asyncdsl.distributed as dist
    from asyncdsl.kernels.all_gather_gemm import all_gather_gemm

    devices, rank = dist.world_size(), dist.rank()
    rng = np.random.default_rng(seed)
    shards = [rng.integers(-3, 4, (rows, k)).astype(np.float32) for _ in range(devices)]
    weights = rng.integers(-3, 4, (k, n)).astype(np.float32) + rank  # each PE's own b
    a = dist.symmetric_like(torch.from_numpy(shards[rank]).to("cuda", torch.bfloat16))
    b = torch.from_numpy(weights).to("cuda", torch.bfloat16)
    dist.barrier()  # every shard is in place before anyone reads it
    c = all_gather_gemm(a, b)
    torch.cuda.synchronize()
    expected = torch.from_numpy(np.concatenate(shards).astype(np.float64) @ weights).to(torch.bfloat16)
    dist.barrier()  # nobody frees its shard while a peer may still read it
    return bool(torch.equal(c.cpu(), expected))
