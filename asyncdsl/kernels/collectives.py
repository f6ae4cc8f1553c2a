"""All-gather and reduce-scatter across devices, tile by tile with TMA straight to and from the
peers' memory:

    out = asyncdsl.kernels.all_gather(shard, flags, epoch)      # out[r] is device r's shard
    out = asyncdsl.kernels.reduce_scatter(x, flags, epoch)      # sum over devices of their x[rank]

On GPUs they run in an NVSHMEM job (`asyncdsl.distributed`), one process a GPU: the arrays a peer
reads or writes (the shard's gathered `out`, reduce-scatter's `x`, the flags) lie on the
symmetric heap.  In the interpreter every array argument is a list of numpy arrays, one an
emulated device.  `flags` are int32, one a device, zero before a job's first call and left to
the calls after: call k of a job passes `epoch=k`.  CTAS persistent CTAs walk the tiles with a
stride (`asyncdsl.blocks.strided_tiles`): one a streaming multiprocessor by default.

All-gather: a tile of the shard is loaded once and stored into every device's `out` (its own
included), starting with the next device so that the devices do not all write to the same one
at once; a slot of the ring is refilled once the stores of the tile before it have read it.  A
CTA done with its stores adds one to its slot of every device's flags, then waits until each
device's slot here reaches `epoch * CTAS`: every CTA of every device has delivered.

Reduce-scatter: each device *pulls* its chunk's tiles from every device's `x` into one ring slot,
sums the copies in float32 registers in rank order, rounds once and stores the tile: the same
bits on every run, numpy's float32 sum over devices rounded once.  A device announces that its
`x` is ready by setting its slot of every device's flags to `epoch` (its first CTA does, at the
start), and every CTA waits for all of them before reading a peer.  A device must not rewrite
`x` until its peers' calls have read it (the next call's flags, or a barrier, order that).
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.strided_tiles import strided_tiles
from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import ArgumentError, is_int, user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.outputs import empty
from asyncdsl.runtime import symmetric

INTERPRETED_CTAS = 2  # CTAs of a collective in the interpreter


@on_stream
def all_gather(shard, flags, epoch: int, *, out=None, ctas: int | None = None, stream=None):
    """Every device's (rows, columns) shard, stacked in rank order: (devices, rows, columns), in a
    new array (on the symmetric heap in a job) or in `out`."""
    if isinstance(shard, np.ndarray):  # one device, in the interpreter
        return all_gather([shard], [flags], epoch, out=None if out is None else [out], ctas=ctas)[0]
    devices = len(shard) if isinstance(shard, list) else symmetric.world_size()
    if out is None and isinstance(shard, list):
        out = [np.empty((devices, *s.shape), s.dtype) for s in shard]
    elif out is None:
        shape = (devices, *shard.shape)
        in_job = symmetric.world() is not None
        out = symmetric.allocate(shape, shard.dtype) if in_job else empty(shard, shape, shard.dtype)
    config = _config(shard, ctas, 128, 4)
    if not isinstance(shard, list) and not on_host(shard) and config["CTAS"] > multiprocessors(shard):
        # Each CTA waits for every CTA of every device to signal: all must run at once, and one
        # fills a multiprocessor's shared memory (a ring of 4 tiles of 32 KB).
        raise ad.ArgumentError(f"all_gather runs at most one CTA a multiprocessor ({multiprocessors(shard)} "
                               f"here), got ctas={config['CTAS']}", user_location())
    _check_epoch("all_gather", flags, epoch, config["CTAS"])  # each CTA adds one a call
    _launch(all_gather_kernel, shard, out, flags, epoch, stream, config)
    return out


@on_stream
def reduce_scatter(x, flags, epoch: int, *, out=None, ctas: int | None = None, stream=None):
    """This device's chunk of the sum over devices: the float32 sum of every device's x[rank]
    (x is floating-point, (devices, rows, columns) on every device), rounded once, in a new array
    or in `out`."""
    if isinstance(x, np.ndarray):  # one device, in the interpreter
        return reduce_scatter([x], [flags], epoch, out=None if out is None else [out], ctas=ctas)[0]
    if out is None:
        out = ([np.empty(a.shape[1:], a.dtype) for a in x] if isinstance(x, list)
               else empty(x, x.shape[1:], x.dtype))
    _check_epoch("reduce_scatter", flags, epoch, 1)  # each call sets the flags to its epoch
    _launch(reduce_scatter_kernel, x, out, flags, epoch, stream, _config(x, ctas, 32, 2))
    return out


def _launch(kernel, source, out, flags, epoch: int, stream, config: dict) -> None:
    devices = len(source) if isinstance(source, list) else None
    launch(kernel, source, out, flags, epoch, stream=stream, devices=devices, **config)


def _check_epoch(what: str, flags, epoch, per_call: int) -> None:
    """Refuse an epoch other than a positive int, and, in the interpreter, flags that call `epoch`
    of a job does not find: call k - 1's `(k - 1) * per_call` everywhere.  With a stale epoch (or
    another `ctas` than the calls before) the waits pass before the peers have delivered: wrong
    data on the GPU, which the interpreter's schedule hides."""
    if not is_int(epoch) or epoch < 1:
        raise ArgumentError(f"{what}: epoch must be a positive int (call k of a job passes k), got {epoch!r}",
                            user_location())
    before = (epoch - 1) * per_call
    for device, cells in enumerate(flags if on_host(flags) and isinstance(flags, list) else ()):
        if (cells != before).any():
            left = "zero before a job's first call" if epoch == 1 else f"as call {epoch - 1} leaves them"
            raise ArgumentError(
                f"{what}, epoch {epoch}: device {device}'s flags hold {cells.tolist()}, not {before} "
                f"({left}): call k of a job passes epoch k, with the same ctas every call", user_location())


def _config(array, ctas: int | None, rows: int, stages: int) -> dict:
    """Tiles of `rows` rows of 256 bytes (the configurations measured on the H200 for bf16),
    `stages` in flight, and `ctas` CTAs (default: one a streaming multiprocessor)."""
    first = array[0] if isinstance(array, list) else array
    if ctas is None:
        ctas = INTERPRETED_CTAS if on_host(array) else multiprocessors(array)
    if not is_int(ctas) or ctas < 1:
        raise ad.ArgumentError(f"ctas must be a positive int, got {ctas!r}", user_location())
    return {"CTAS": ctas, "BM": rows, "BN": 256 // as_dtype(first.dtype).itemsize, "STAGES": stages}


def _devices(what: str, stacked: tuple, flags, shape: tuple) -> tuple:
    """The devices and this one's rank, refusing a stacked array (name, array) other than one
    `shape` chunk a device, or flags other than one a device."""
    devices, rank = ad.num_devices(), ad.device_id()
    name, array = stacked
    if array.shape != (devices, *shape) or flags.shape != (devices,):
        raise ad.TraceError(f"{what} on {devices} devices takes {name} of shape {(devices, *shape)} and "
                            f"flags of shape {(devices,)}", user_location())
    return devices, rank


@kernel(grid=lambda shard, out, flags, epoch, CTAS, **_: (CTAS,), block=128, name="all_gather")
def all_gather_kernel(shard, out, flags, epoch: int, CTAS: constexpr = 1, BM: constexpr = 64,
                      BN: constexpr = 64, STAGES: constexpr = 4):
    rows, columns = shard.shape
    devices, rank = _devices(f"all_gather of {rows}x{columns} shards", ("out", out), flags, shard.shape)
    mine, window = strided_tiles(ad.program_id(0), rows, columns, BM, BN, CTAS)
    ring = ad.smem((STAGES, BM, BN), shard.dtype)
    landed = ad.barrier(num=STAGES)

    for t in range(STAGES):  # fill the ring
        with ad.when(mine > t):
            ad.async_copy(shard.at[window(t)], ring.at[t], barrier=landed[t])
    for t in ad.range(mine):
        slot = t % STAGES
        landed[slot].wait()
        for step in range(devices):
            ad.async_copy(ring.at[slot], out.peer((rank + 1 + step) % devices).at[(rank, *window(t))])
        refill = t + STAGES - 1  # the next tile of the slot the previous tile's stores read
        with ad.when((t >= 1) & (refill < mine)):
            ad.await_async_copy(devices, read_only=True)
            ad.async_copy(shard.at[window(refill)], ring.at[refill % STAGES], barrier=landed[refill % STAGES])
    ad.await_async_copy()  # every write landed before a flag says so
    for pe in range(devices):
        ad.signal(flags.peer(pe).at[rank], 1, op="add")
    for source in range(devices):
        ad.wait_signal(flags.at[source], "ge", epoch * CTAS)


@kernel(grid=lambda x, out, ready, epoch, CTAS, **_: (CTAS,), block=128, name="reduce_scatter")
def reduce_scatter_kernel(x, out, ready, epoch: int, CTAS: constexpr = 1, BM: constexpr = 32,
                          BN: constexpr = 64, STAGES: constexpr = 2):
    rows, columns = out.shape
    devices, rank = _devices(f"reduce_scatter into {rows}x{columns}", ("x", x), ready, out.shape)
    for name, array in (("x", x), ("out", out)):
        if not array.dtype.is_float:  # the float32 sum would round integers past 2**24 silently
            raise ad.TraceError(f"reduce_scatter sums floating-point arrays in float32; {name} holds "
                                f"{array.dtype}", user_location())
    cta = ad.program_id(0)
    with ad.when(cta == 0):
        for pe in range(devices):
            ad.signal(ready.peer(pe).at[rank], epoch)
    for pe in range(devices):
        ad.wait_signal(ready.at[pe], "ge", epoch)

    mine, window = strided_tiles(cta, rows, columns, BM, BN, CTAS)
    ring = ad.smem((STAGES, devices, BM, BN), x.dtype)
    result = ad.smem((BM, BN), out.dtype)
    landed = ad.barrier(num=STAGES)

    def load(t):
        slot = t % STAGES
        for step in range(devices):
            pe = (rank + 1 + step) % devices  # the devices read different peers at a time
            ad.async_copy(x.peer(pe).at[(rank, *window(t))], ring.at[slot, pe],
                          barrier=landed[slot], arrive=False)
        landed[slot].arrive_expect_tx(devices * BM * BN * x.dtype.itemsize)

    for t in range(STAGES):  # fill the ring
        with ad.when(mine > t):
            load(t)
    for t in ad.range(mine):
        slot = t % STAGES
        landed[slot].wait()
        total = ring.at[slot, 0][...].astype(ad.float32)
        for pe in range(1, devices):
            total = total + ring.at[slot, pe][...].astype(ad.float32)
        ad.await_async_copy(0, read_only=True)  # the previous tile's store has read `result`
        result[...] = total.astype(out.dtype)
        ad.fence_async_smem()
        ad.async_copy(result, out.at[window(t)])
        with ad.when(t + STAGES < mine):
            load(t + STAGES)  # every thread has read the slot: its sum is in registers
    ad.await_async_copy(0)
