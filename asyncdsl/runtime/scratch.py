"""The GMEM descriptor scratch: every TMA descriptor of a kernel, encoded on the host into one image
(each in its 128-byte slot) and uploaded to a device buffer whose address is a `.u64` parameter.

A scratch buffer is never rewritten once uploaded: a launch still queued may be reading it.  Each
distinct set of argument addresses gets its own buffer instead, uploaded once and kept, so a
repeated launch with the same arrays uploads nothing.  The upload is stream-ordered on the stream
of the launch that needed it; a launch on another stream first waits for it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Protocol, SupportsInt

from asyncdsl.hw.limits import DESCRIPTOR_BYTES
from asyncdsl.kernel_binary import DescriptorScratchParam
from asyncdsl.runtime import driver
from asyncdsl.runtime.tensormap import TensorMapCache


class UploadedScratch(Protocol):
    address: int  # device address of the uploaded image
    streams: set[int]  # streams already ordered after the upload

    def order_before(self, stream: int) -> None:
        """Make later work on `stream` wait for the upload."""


class ScratchPool(Protocol):
    def upload(self, image: bytes, stream: int) -> UploadedScratch: ...

    def release_all(self) -> None:
        """Free every buffer uploaded so far, once no launch can still be using one."""


class DescriptorScratch:
    """The scratch images of one kernel, by the tuple of the base addresses its descriptors use."""

    capacity = 1024  # distinct address sets kept before every buffer is released and the cache starts over

    def __init__(self, param: DescriptorScratchParam, tensor_maps: Sequence[TensorMapCache],
                 pool: ScratchPool):
        self.size_bytes = param.size_bytes
        self.upload_count = 0
        self._slots = tuple(zip(param.slot_offsets, tensor_maps))
        self._arg_indices = tuple(cache.spec.arg_index for cache in tensor_maps)
        self._pool = pool
        self._uploaded: dict[tuple[int, ...], UploadedScratch] = {}

    def host_image(self, addresses: Sequence[int]) -> bytes:
        """Every descriptor, encoded for the arguments at `addresses`, in its slot; the bytes
        between slots are zero."""
        image = bytearray(self.size_bytes)
        for offset, cache in self._slots:
            image[offset:offset + DESCRIPTOR_BYTES] = cache.image(addresses[cache.spec.arg_index]).data()
        return bytes(image)

    def device_address(self, addresses: Sequence[int], stream: int) -> int:
        """The device address of the scratch for the arguments at `addresses`, uploading it on
        `stream` if it is new."""
        key = tuple([addresses[index] for index in self._arg_indices])
        uploaded = self._uploaded.get(key)
        if uploaded is None:
            if len(self._uploaded) >= self.capacity:
                self._pool.release_all()
                self._uploaded.clear()
            uploaded = self._pool.upload(self.host_image(addresses), stream)
            self.upload_count += 1
            self._uploaded[key] = uploaded
        elif stream not in uploaded.streams:
            uploaded.order_before(stream)
        return uploaded.address


class DeviceScratch:
    """A scratch image in device memory, with the event that marks the end of its upload."""

    __slots__ = ("address", "streams", "_pointer", "_event", "_host_image")

    def __init__(self, pointer: SupportsInt, event: object, stream: int, host_image: object):
        self._pointer = pointer
        self._event = event
        # The driver stages pageable memory before cuMemcpyHtoDAsync returns; keeping the source
        # anyway costs a few hundred bytes and makes the copy safe whatever the driver does.
        self._host_image = host_image
        self.address = int(pointer)
        self.streams = {stream}

    def order_before(self, stream: int) -> None:
        cu = driver.api()
        driver.check(cu.cuStreamWaitEvent(cu.CUstream(stream), self._event, 0), "cuStreamWaitEvent")
        self.streams.add(stream)

    def free(self) -> None:
        cu = driver.api()
        driver.check(cu.cuEventDestroy(self._event), "cuEventDestroy")
        driver.check(cu.cuMemFree(self._pointer), "cuMemFree")


class DeviceScratchPool:
    """Device buffers for the scratch images of one parameter block, on one device."""

    def __init__(self, device: int):
        self._device = device
        self._buffers: list[DeviceScratch] = []

    def upload(self, image: bytes, stream: int) -> DeviceScratch:
        cu = driver.api()
        driver.activate(self._device)
        # cuMemAlloc memory is at least 256-byte aligned: every 64-byte aligned slot stays aligned.
        pointer = driver.check(cu.cuMemAlloc(len(image)), "cuMemAlloc")
        source = ctypes.create_string_buffer(image, len(image))
        driver.check(cu.cuMemcpyHtoDAsync(pointer, ctypes.addressof(source), len(image), cu.CUstream(stream)),
                     "cuMemcpyHtoDAsync")
        event = driver.check(cu.cuEventCreate(int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
        driver.check(cu.cuEventRecord(event, cu.CUstream(stream)), "cuEventRecord")
        scratch = DeviceScratch(pointer, event, stream, source)
        self._buffers.append(scratch)
        return scratch

    def release_all(self) -> None:
        # Any queued launch may still read any of these buffers; only a full synchronisation
        # of the context proves none does.
        driver.activate(self._device)
        driver.check(driver.api().cuCtxSynchronize(), "cuCtxSynchronize")
        for scratch in self._buffers:
            scratch.free()
        self._buffers.clear()
