"""Kernel parameters: the `void*[]` that `cuLaunchKernelEx` reads, built once per kernel.

Slot i points at the bytes of parameter i.  Pointer and scratch parameters own an 8-byte cell the
launch overwrites, runtime scalars a 4-byte one (int32 or float32, checked to fit on every launch,
warm ones included: a scalar's value is not part of any cache key); a by-value tensor map's slot
is re-pointed at the cached 128-byte image for the argument's address, whose slab it holds.  The driver
copies every
parameter during the launch call, so the cells can be rewritten by the next launch at once.
Nothing here allocates on a warm launch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.kernel_binary import (
    DescriptorScratchParam,
    ErrorBufferParam,
    KernelBinary,
    PeerTableParam,
    PointerParam,
    ProfileBufferParam,
    ScalarParam,
    TensorMapParam,
    scalar_argument,
)
from asyncdsl.runtime import symmetric
from asyncdsl.runtime.arrays import DeviceArray
from asyncdsl.runtime.scratch import DescriptorScratch, ScratchPool
from asyncdsl.runtime.tensormap import TensorMapCache, TensorMapImage, describe


def argument_count(binary: KernelBinary) -> int:
    """How many arrays a launch of `binary` takes."""
    if binary.arg_names:
        return len(binary.arg_names)
    used = [param.arg_index for param in binary.params if isinstance(param, PointerParam)]
    used += [spec.arg_index for spec in binary.descriptors]
    return max(used, default=-1) + 1


class KernelParams:
    """The parameter block of one loaded kernel, refilled from the arrays of each launch."""

    def __init__(
        self,
        binary: KernelBinary,
        device: int,
        tensor_maps: Sequence[TensorMapCache],
        scratch_pool: ScratchPool | None,
        error_buffer: int = 0,
    ):
        self._kernel = binary.name
        self._names = binary.arg_names
        self._device = device
        self.arg_count = argument_count(binary)
        self._slots = (ctypes.c_void_p * max(1, len(binary.params)))()
        self.address = ctypes.addressof(self._slots)  # what cuLaunchKernelEx gets as kernelParams
        self._cells: list[ctypes.c_uint64] = []
        self._pointers: list[tuple[ctypes.c_uint64, int]] = []
        self._maps: list[tuple[int, TensorMapCache, int]] = []
        self._scratch: list[tuple[ctypes.c_uint64, DescriptorScratch]] = []
        self._scalars: list[tuple[ctypes.c_int32 | ctypes.c_float, ScalarParam]] = []
        # A profiled kernel's buffer, sized by the grid: `runtime/profile.py` sets it per launch.
        self.profile_buffer: ctypes.c_uint64 | None = None
        self._peer_table: tuple[ctypes.c_uint64, PeerTableParam] | None = None
        self.scratches: list[DescriptorScratch] = []
        for slot, param in enumerate(binary.params):
            if isinstance(param, PointerParam):
                self._pointers.append((self._cell(slot), param.arg_index))
            elif isinstance(param, TensorMapParam):
                cache = tensor_maps[param.descriptor_index]
                self._maps.append((slot, cache, cache.spec.arg_index))
            elif isinstance(param, DescriptorScratchParam):
                assert scratch_pool is not None, "a scratch parameter needs a pool for its device buffers"
                scratch = DescriptorScratch(param, tensor_maps, scratch_pool)
                self.scratches.append(scratch)
                self._scratch.append((self._cell(slot), scratch))
            elif isinstance(param, ErrorBufferParam):
                self._cell(slot).value = error_buffer  # the same buffer for every launch
            elif isinstance(param, ProfileBufferParam):
                self.profile_buffer = self._cell(slot)
            elif isinstance(param, PeerTableParam):
                self._peer_table = (self._cell(slot), param)
            elif isinstance(param, ScalarParam):
                cell = ctypes.c_int32(0) if param.kind == "int" else ctypes.c_float(0.0)
                self._slots[slot] = ctypes.addressof(cell)
                self._scalars.append((cell, param))
            else:
                raise TypeError(f"unknown kernel parameter {param!r}")
        self._held: list[TensorMapImage | None] = [None] * len(self._maps)
        # Each argument a descriptor reads must be at least as large as the descriptor's reach.
        least_bytes: dict[int, tuple[int, str]] = {}
        for index, cache in enumerate(tensor_maps):
            held = least_bytes.get(cache.spec.arg_index)
            if held is None or held[0] < cache.footprint:
                least_bytes[cache.spec.arg_index] = (cache.footprint, describe(cache.spec, index))
        self._sized = tuple((arg, least, why) for arg, (least, why) in least_bytes.items())
        self.scalar_names = tuple(param.name for _, param in self._scalars)  # in order (check_binary)

    def _cell(self, slot: int) -> ctypes.c_uint64:
        cell = ctypes.c_uint64(0)
        self._cells.append(cell)
        self._slots[slot] = ctypes.addressof(cell)
        return cell

    def pack(self, arrays: Sequence[DeviceArray], stream: int, scalars: Sequence[int | float] = ()) -> int:
        """Fill the parameters from `arrays` and the runtime `scalars` (launching on `stream`);
        returns the `void*[]` address."""
        if len(arrays) != self.arg_count:
            raise self._count_error(len(arrays))
        if len(scalars) != len(self.scalar_names):
            raise ArgumentError(
                f"kernel {self._kernel!r} takes {len(self.scalar_names)} scalar(s) "
                f"({', '.join(self.scalar_names)}), but {len(scalars)} were given",
                user_location(),
            )
        device = self._device
        for array in arrays:
            if array.device != device:
                raise self._device_error(arrays)
        for arg, least, why in self._sized:
            if arrays[arg].nbytes < least:
                raise self._size_error(arrays[arg], arg, least, why)
        return self.pack_addresses([array.address for array in arrays], stream, scalars)

    def pack_addresses(self, addresses: Sequence[int], stream: int,
                       scalars: Sequence[int | float] = ()) -> int:
        """Fill the parameters from argument addresses alone, for arrays whose count, device and
        size were already checked against this kernel, and from as many `scalars` as the kernel
        takes (each checked to fit); returns the `void*[]` address."""
        self.fill_scalars(scalars)
        self.fill_addresses(addresses, stream)
        return self.address

    def fill_scalars(self, scalars: Sequence[int | float]) -> None:
        """Write the runtime scalars' cells (each value checked to fit its parameter)."""
        for cell, param in self._scalars:
            cell.value = scalar_argument(param.kind, scalars[param.scalar_index], param.name)

    def fill_addresses(self, addresses: Sequence[int], stream: int) -> None:
        """Write every parameter that depends on the arrays' addresses (and, for a descriptor
        scratch, on the stream its upload must precede)."""
        if self._peer_table is not None:
            # Checked first: a peer's descriptor or cell is only right for a symmetric array.
            cell, param = self._peer_table
            for arg in param.arg_indices:
                symmetric.check_symmetric(addresses[arg], self._label(arg))
            cell.value = symmetric.peer_table(param.devices, self._device, self._kernel)
        for cell, arg in self._pointers:
            cell.value = addresses[arg]
        slots, held = self._slots, self._held
        for index, (slot, cache, arg) in enumerate(self._maps):
            address = addresses[arg]
            image = cache.images.get(address)
            if image is None:
                image = cache.encode(address)
            slots[slot] = image.address
            held[index] = image  # the slot points into the image's slab: keep it alive
        for cell, scratch in self._scratch:
            cell.value = scratch.device_address(addresses, stream)

    def _label(self, arg: int) -> str:
        return f"argument {self._names[arg]!r}" if arg < len(self._names) else f"argument {arg}"

    def _count_error(self, given: int) -> ArgumentError:
        names = f" ({', '.join(self._names)})" if self._names else ""
        return ArgumentError(
            f"kernel {self._kernel!r} takes {self.arg_count} array(s){names}, but {given} were given",
            user_location(),
        )

    def _device_error(self, arrays: Sequence[DeviceArray]) -> ArgumentError:
        arg = next(index for index, array in enumerate(arrays) if array.device != self._device)
        return ArgumentError(
            f"{self._label(arg)} of kernel {self._kernel!r} is on cuda:{arrays[arg].device}, but the kernel "
            f"was loaded on cuda:{self._device}; move the array (x.to('cuda:{self._device}')) or load the "
            f"kernel on cuda:{arrays[arg].device}",
            user_location(),
        )

    def _size_error(self, array: DeviceArray, arg: int, least: int, why: str) -> ArgumentError:
        return ArgumentError(
            f"{self._label(arg)} of kernel {self._kernel!r} holds {array.nbytes} bytes (shape {array.shape}, "
            f"{array.dtype}), but {why} reaches {least} bytes: the kernel was compiled for a larger array",
            user_location(),
        )
