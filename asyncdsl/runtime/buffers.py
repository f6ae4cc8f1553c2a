"""Device memory of asyncdsl's own, for users without torch, CuPy or JAX.

`to_device(numpy_array)` copies an array to the GPU and returns a `DeviceArray` kernels accept;
`to_host(device_array)` copies it back. The memory is freed when the last reference goes.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import ArgumentError
from asyncdsl.hw import packed
from asyncdsl.hw.gmem_runs import contiguous_strides
from asyncdsl.runtime import driver
from asyncdsl.runtime.arrays import DeviceArray


class _Allocation:
    """One `cuMemAlloc` block, freed with its owner."""

    def __init__(self, nbytes: int, device: int):
        driver.activate(device)
        self.address = int(driver.check(driver.api().cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))

    def __del__(self) -> None:
        try:
            driver.api().cuMemFree(self.address)
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn the driver down
            pass


def empty(shape, dtype, device: int = 0) -> DeviceArray:
    """An uninitialised device array."""
    element = as_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    count = int(np.prod(shape, dtype=np.int64))
    allocation = _Allocation((count * element.bits + 7) // 8, device)
    return DeviceArray(allocation.address, shape, contiguous_strides(shape), element, device, allocation)


def to_device(array: np.ndarray, device: int = 0) -> DeviceArray:
    """A device copy of a host array (made contiguous first; 4-bit elements packed two per byte,
    see `asyncdsl.hw.packed`)."""
    host = np.ascontiguousarray(array)
    result = empty(host.shape, host.dtype, device)
    copy_to_device(host, result)
    return result


def copy_to_device(host: np.ndarray, array: DeviceArray) -> None:
    """Overwrite `array` with the contents of `host`, an array of its shape and element type."""
    host = np.ascontiguousarray(host)
    if packed.is_packed(array.dtype):
        host = packed.pack(host)
    driver.activate(array.device)
    driver.check(driver.api().cuMemcpyHtoD(array.address, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")


def to_host(array: DeviceArray) -> np.ndarray:
    """A host copy of a device array (waits for the device to finish its work; 4-bit elements
    come back unpacked, one per byte, as ml_dtypes holds them)."""
    is_packed = packed.is_packed(array.dtype)
    host = np.empty(array.nbytes, np.uint8) if is_packed else np.empty(array.shape, array.dtype.numpy)
    driver.activate(array.device)
    driver.check(driver.api().cuCtxSynchronize(), "cuCtxSynchronize")
    driver.check(driver.api().cuMemcpyDtoH(host.ctypes.data, array.address, host.nbytes), "cuMemcpyDtoH")
    return packed.unpack(host, array.dtype, array.shape) if is_packed else host


def copy_on_stream(source: DeviceArray, target: DeviceArray, stream: int) -> None:
    """Overwrite `target` with `source`'s bytes, ordered on `stream` (an integer handle): two
    row-major arrays of one size on one device."""
    for array in (source, target):
        if array.strides != contiguous_strides(array.shape):
            raise ArgumentError(f"copy_on_stream takes row-major arrays, got strides {array.strides} "
                                f"for shape {array.shape}")
    if source.nbytes != target.nbytes or source.device != target.device:
        raise ArgumentError(f"copy_on_stream: {source} and {target} differ in size or device")
    driver.activate(target.device)
    cu = driver.api()
    driver.check(cu.cuMemcpyDtoDAsync(target.address, source.address, source.nbytes, cu.CUstream(stream)),
                 "cuMemcpyDtoDAsync")
