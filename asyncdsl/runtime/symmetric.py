"""The NVSHMEM world of this process, as kernels see it: its rank, and where every peer's copy of
a symmetric array is mapped.

NVSHMEM (through nvshmem4py) runs one process per GPU (a PE); each allocates its arrays on a
symmetric heap, at the same offset in every PE's heap, and maps the heaps of the PEs it reaches
over NVLink into its own address space, each at a base of its own (`nvshmem_ptr`).  So the
address of PE pe's copy of a symmetric array is the local address plus one offset per PE,
the same for every array: the world measures the offsets once, on a probe it allocates, and
keeps them in a *peer table* in device memory, 64-bit words `[rank, offset_0, ..., offset_{n-1}]`,
whose address a multi-device kernel takes as a parameter (`PeerTableParam`).  TMA descriptors of
peer copies are encoded on the peer's address instead (`peer_address`).

Without a world (NVSHMEM never started) a kernel traced for one device still runs: its only
device is itself, rank 0, offset 0.  nvshmem4py is imported only when a world starts.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any

from asyncdsl.errors import ArgumentError, DistributedError, user_location
from asyncdsl.runtime import driver


@dataclass
class World:
    """This process's PE: its rank among `size`, its device, and the peer offsets."""

    rank: int
    size: int
    device: int
    offsets: tuple[int, ...]
    table: int  # device address of the peer table
    _probe: int = 0  # the symmetric allocation the offsets were measured on
    _symmetric: set[int] = field(default_factory=set)  # addresses found on the heap
    # The arrays `allocate` made and nobody `free`d yet, in allocation order (the same on every
    # PE): `stop` frees them in that order, as a collective free must be made.
    allocations: list[Any] = field(default_factory=list)


_world: World | None = None
_solo_tables: dict[int, int] = {}  # device -> the table of a one-device run without NVSHMEM


def nvshmem() -> tuple[Any, Any]:
    """nvshmem4py's `core` and `bindings` modules (imported on first use; `core` loads the
    library the bindings call)."""
    try:
        from nvshmem import bindings, core
    except ImportError as error:
        raise DistributedError(
            "running on several GPUs needs NVSHMEM: pip install nvshmem4py-cu13 "
            f"nvidia-nvshmem-cu13 ({error})",
            user_location(),
        ) from None
    return core, bindings


def start(rank: int, size: int, device: int, unique_id: bytes) -> World:
    """Join the NVSHMEM job of `size` PEs as PE `rank` on `device` (every PE calls this with the
    same `unique_id`, made by `make_unique_id` on one of them), and measure the peer offsets."""
    global _world
    if _world is not None:
        raise DistributedError(f"NVSHMEM is already running here (PE {_world.rank} of {_world.size})",
                               user_location())
    core, bindings = nvshmem()
    from cuda.core import Device

    driver.activate(device)
    gpu = Device(device)
    gpu.set_current()
    uid = core.get_unique_id(empty=True)
    if len(unique_id) != uid._data.itemsize:
        raise DistributedError(f"an NVSHMEM job id is {uid._data.itemsize} bytes, got {len(unique_id)}",
                               user_location())
    ctypes.memmove(uid.ptr, unique_id, len(unique_id))
    try:
        core.init(device=gpu, uid=uid, rank=rank, nranks=size, initializer_method="uid")
    except Exception as error:  # nvshmem4py's own error types, reported as ours
        raise DistributedError(f"NVSHMEM did not start PE {rank} of {size} on cuda:{device}: {error}",
                               user_location()) from error
    probe = bindings.malloc(8)  # collective: every PE allocates it at the same heap offset
    offsets = []
    for pe in range(size):
        mapped = bindings.ptr(probe, pe)
        if not mapped:
            core.finalize()
            raise DistributedError(
                f"PE {pe} is not reachable by loads and stores from PE {rank} (nvshmem_ptr is null): "
                "asyncdsl kernels address peers directly, so every GPU of the job must share "
                "one NVLink domain",
                user_location(),
            )
        offsets.append(mapped - probe)
    _world = World(rank, size, device, tuple(offsets), _upload_table(device, rank, offsets), probe)
    return _world


def make_unique_id() -> bytes:
    """A new NVSHMEM job id, to hand to every PE's `start` (its maker must stay alive until they do)."""
    core, _ = nvshmem()
    uid = core.get_unique_id()
    return ctypes.string_at(uid.ptr, uid._data.itemsize)


def stop() -> None:
    """Leave the NVSHMEM job (collective).  Kernels launched in it keep descriptors and tables
    of its heap: load them again in the next one."""
    global _world
    world = _world
    if world is None:
        return
    core, bindings = nvshmem()
    driver.activate(world.device)
    driver.check(driver.api().cuCtxSynchronize(), "cuCtxSynchronize")
    for array in world.allocations:
        core.free_tensor(array)
    bindings.free(world._probe)
    driver.check(driver.api().cuMemFree(world.table), "cuMemFree")
    _world = None
    core.finalize()


def running() -> World:
    """This process's job; a DistributedError saying how to start one if there is none."""
    if _world is None:
        raise DistributedError("no NVSHMEM job runs in this process: call asyncdsl.distributed.init() first",
                               user_location())
    return _world


def allocate(shape: tuple[int, ...], torch_dtype: Any) -> Any:
    """A torch tensor on the symmetric heap (collective)."""
    world = running()
    core, _ = nvshmem()
    array = core.tensor(shape, dtype=torch_dtype)
    world.allocations.append(array)
    return array


def free(array: Any) -> None:
    """Give `array` back to the symmetric heap (collective: every PE frees the same ones, in the
    same order)."""
    world = _world
    found = None if world is None else next((i for i, a in enumerate(world.allocations) if a is array), None)
    if world is None or found is None:
        raise ArgumentError("free: the array was not allocated by this NVSHMEM job (or was freed already)",
                            user_location())
    core, _ = nvshmem()
    del world.allocations[found]
    world._symmetric.discard(array.data_ptr())
    core.free_tensor(array)


def world() -> World | None:
    return _world


def world_size() -> int:
    """How many devices kernels launched here run on: the NVSHMEM job's PEs, else 1."""
    return 1 if _world is None else _world.size


def peer_table(devices: int, device: int, kernel: str) -> int:
    """The peer table a kernel traced for `devices` devices reads on `device`."""
    world = _world
    if world is not None and world.size == devices and world.device == device:
        return world.table
    if world is None and devices == 1:
        table = _solo_tables.get(device)
        if table is None:
            table = _solo_tables[device] = _upload_table(device, 0, [0])
        return table
    running = "no NVSHMEM job runs here" if world is None else \
        f"this process is PE {world.rank} of {world.size} on cuda:{world.device}"
    raise ArgumentError(
        f"kernel {kernel!r} was traced for {devices} device(s) and launched on cuda:{device}, but {running}: "
        "launch it on the device its PE owns, with asyncdsl.distributed started on as many devices",
        user_location(),
    )


def peer_address(address: int, pe: int, label: str) -> int:
    """Where device `pe`'s copy of the symmetric array at `address` is mapped here."""
    world = _world
    if world is None:
        if pe == 0:
            return address  # a one-device run: the only peer is this device
        raise ArgumentError(f"{label} is read on device {pe}, but no NVSHMEM job runs here", user_location())
    check_symmetric(address, label)
    return address + world.offsets[pe]


def check_symmetric(address: int, label: str) -> None:
    """`address` must lie on this world's symmetric heap (peers address it by offset)."""
    world = _world
    if world is None or address in world._symmetric:
        return
    if nvshmem()[1].ptr(address, world.rank) != address:
        raise ArgumentError(
            f"{label} is addressed on peer devices, but it is not on the NVSHMEM symmetric heap: allocate it "
            "with asyncdsl.distributed.symmetric_empty (or symmetric_like)",
            user_location(),
        )
    world._symmetric.add(address)


def _upload_table(device: int, rank: int, offsets: list[int]) -> int:
    cu = driver.api()
    driver.activate(device)
    image = struct.pack(f"<Q{len(offsets)}q", rank, *offsets)
    table = driver.check(cu.cuMemAlloc(len(image)), "cuMemAlloc")
    source = ctypes.create_string_buffer(image, len(image))
    driver.check(cu.cuMemcpyHtoD(table, ctypes.addressof(source), len(image)), "cuMemcpyHtoD")
    return int(table)
