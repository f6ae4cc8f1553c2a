"""asyncdsl on several GPUs: one process per GPU, joined in an NVSHMEM job.

    import asyncdsl.distributed as dist

    dist.init()                                   # under torch.distributed (torchrun), or alone
    shard = dist.symmetric_empty((rows, cols), torch.bfloat16)
    out = dist.symmetric_empty((dist.world_size() * rows, cols), torch.bfloat16)
    all_gather(shard, out, flags)                 # a kernel that writes into out.peer(pe)
    dist.finalize()

or, without a launcher, `dist.spawn(work, world_size)` runs `work()` in `world_size` processes
(process r on GPU r unless `devices` says otherwise), each already in the job.

Kernels launched while a job runs are traced for its `world_size()` devices: `ad.device_id()` is
this process's rank, and `x.peer(pe)` is PE pe's copy of the symmetric array `x`.  Arrays a
kernel addresses on peers must come from `symmetric_empty`/`symmetric_like` (NVSHMEM's symmetric
heap: every PE allocates them in the same order, with the same shapes); the launch refuses
others.  Every PE of the job must reach the others over NVLink (`nvshmem_ptr`).

NVSHMEM comes from the `nvshmem4py-cu13` and `nvidia-nvshmem-cu13` packages (and torch for
the arrays); all are imported on first use.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from asyncdsl.errors import ArgumentError, DistributedError, is_int, user_location
from asyncdsl.runtime import symmetric

_GRACE_S = 10.0  # how long spawn lets the other PEs of a failed one report before stopping them
_STOPPED = "stopped after another PE of the job had failed"


def init(group: Any = None, *, device: int | None = None) -> None:
    """Join (or make) this process's NVSHMEM job.  Under `torch.distributed` (initialized, or
    `group` given) the job is that group: rank 0 makes the job id and the group broadcasts it;
    the device defaults to torch's current one.  Otherwise the job is this process alone."""
    import torch
    import torch.distributed as torch_dist

    if group is not None or (torch_dist.is_available() and torch_dist.is_initialized()):
        rank, size = torch_dist.get_rank(group), torch_dist.get_world_size(group)
        carrier: list[bytes | None] = [symmetric.make_unique_id() if rank == 0 else None]
        torch_dist.broadcast_object_list(carrier, src=torch_dist.get_global_rank(group, 0) if group else 0,
                                         group=group)
        unique_id = carrier[0]
        assert unique_id is not None  # the broadcast gave every rank rank 0's id
    else:
        rank, size, unique_id = 0, 1, symmetric.make_unique_id()
    if device is None:
        device = torch.cuda.current_device()
    torch.cuda.set_device(device)
    symmetric.start(rank, size, device, unique_id)


def finalize() -> None:
    """Leave the job (every PE calls it; after the kernels that use its arrays have finished)."""
    symmetric.stop()


def rank() -> int:
    """This process's PE number (what `ad.device_id()` is in its kernels)."""
    return symmetric.running().rank


def world_size() -> int:
    """How many PEs the job has (what `ad.num_devices()` is in kernels launched here)."""
    return symmetric.running().size


def barrier() -> None:
    """Wait until every PE gets here, with all of its GPU work before finished and visible."""
    symmetric.running()
    import torch

    torch.cuda.synchronize()
    symmetric.nvshmem()[1].barrier_all()


def symmetric_empty(shape: Sequence[int], dtype: Any) -> Any:
    """An uninitialized torch tensor on the symmetric heap (collective: every PE allocates the
    same shapes in the same order).  `dtype` is a torch dtype or an asyncdsl one."""
    import torch

    torch_dtype = dtype if isinstance(dtype, torch.dtype) else getattr(torch, str(dtype), None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ArgumentError(f"symmetric_empty: {dtype!r} is not a torch dtype nor one torch has",
                            user_location())
    return symmetric.allocate(tuple(shape), torch_dtype)


def symmetric_like(tensor: Any) -> Any:
    """A symmetric tensor of `tensor`'s shape and dtype, holding a copy of it."""
    copy = symmetric_empty(tuple(tensor.shape), tensor.dtype)
    copy.copy_(tensor)
    return copy


def free(array: Any) -> None:
    """Give a symmetric array back (collective: every PE frees the same arrays in the same
    order); `finalize` frees those still held."""
    symmetric.free(array)


def gpus_available() -> int:
    """How many GPUs a job started here can span: 0 without a GPU or without nvshmem4py."""
    import importlib.util

    from asyncdsl.runtime import has_gpu
    from asyncdsl.runtime.driver import device_count

    if not has_gpu() or importlib.util.find_spec("nvshmem") is None:
        return 0
    return device_count()


def spawn(work: Callable[..., Any], world_size: int, *args: Any,
          devices: Sequence[int] | None = None) -> list:
    """Run `work(*args)` in `world_size` new processes joined in one job, process r on GPU
    `devices[r]` (default r); return their results in rank order.  A failure in any process is
    raised here with its traceback."""
    if not is_int(world_size) or world_size < 1:
        raise ArgumentError(f"world_size must be a positive int, got {world_size!r}", user_location())
    devices = list(range(world_size)) if devices is None else list(devices)
    if len(devices) != world_size:
        raise ArgumentError(f"{len(devices)} devices for {world_size} processes", user_location())
    context = multiprocessing.get_context("spawn")
    ids, results = context.Queue(), context.Queue()
    processes = [context.Process(target=_member, args=(r, world_size, devices[r], ids, results, work, args))
                 for r in range(world_size)]
    for process in processes:
        process.start()
    outcomes = _outcomes(processes, results)
    for process in processes:
        process.join()
    failed = {r: text for r, (ok, text) in outcomes.items() if not ok}
    if failed:
        first = min(failed, key=lambda r: (failed[r] == _STOPPED, r))  # a cause before its casualties
        raise DistributedError(f"PE {first} of {world_size} failed:\n{failed[first]}", user_location())
    return [outcomes[r][1] for r in range(world_size)]


def _outcomes(processes: list, results: Any) -> dict[int, tuple[bool, Any]]:
    """Each process's (ok, result or traceback), by rank.  A process that ends without one (killed,
    or ended by native code: NVSHMEM aborts on some errors) failed; once one has failed, those
    still running after a grace period are stopped, since they wait in collectives for it, and
    a plain wait for their results would never return."""
    outcomes: dict[int, tuple[bool, Any]] = {}
    stop_at = None
    while len(outcomes) < len(processes):
        try:
            rank, outcome = results.get(timeout=0.2)
            outcomes[rank] = outcome
        except queue.Empty:
            ended = [(rank, process.exitcode) for rank, process in enumerate(processes)
                     if rank not in outcomes and process.exitcode is not None]
            if results.empty():  # what a process put is in the pipe before it ends
                for rank, code in ended:
                    outcomes[rank] = (False, f"the process ended with exit code {code} before reporting "
                                             "a result")
        if stop_at is None and any(not ok for ok, _ in outcomes.values()):
            stop_at = time.monotonic() + _GRACE_S
        if stop_at is not None and time.monotonic() > stop_at:
            for rank, process in enumerate(processes):
                if rank not in outcomes:
                    process.terminate()
                    outcomes[rank] = (False, _STOPPED)
    return outcomes


def _member(rank: int, size: int, device: int, ids: Any, results: Any, work: Callable, args: tuple) -> None:
    """One process of `spawn`: join the job (rank 0 makes its id), run `work`, leave."""
    try:
        import torch

        torch.cuda.set_device(device)
        if rank == 0:
            unique_id = symmetric.make_unique_id()
            for _ in range(size - 1):
                ids.put(unique_id)
        else:
            unique_id = ids.get()
        symmetric.start(rank, size, device, unique_id)
        try:
            outcome = (True, work(*args))
        finally:
            symmetric.stop()
    except BaseException:  # noqa: BLE001  (any failure is reported to the parent, which raises it)
        outcome = (False, traceback.format_exc())
    results.put((rank, outcome))
