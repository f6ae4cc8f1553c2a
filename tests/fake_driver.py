"""A stand-in for `cuda.bindings.driver` that answers the calls loading and launching make and
records them, so `LoadedKernel` runs end to end without a GPU; and a kernel binary to load with it."""

from __future__ import annotations

import ctypes

from runtime_fakes import PTX, binary_with

from asyncdsl.kernel_binary import KernelBinary, PointerParam
from asyncdsl.runtime import driver


class RecordingDriver:
    """`cuda.bindings.driver` with its enums and structs, but every call the loader and the launch
    path make answered here and recorded (so LoadedKernel runs end to end without a GPU)."""

    def __init__(self, static_shared=16, launch_results=(), local_bytes=0):
        self._real = driver.api()
        self.calls = []
        self.static_shared = static_shared
        self.local_bytes = local_bytes
        self.launch_results = list(launch_results)
        self.success = self._real.CUresult.CUDA_SUCCESS
        self.entry_points = {}  # name -> a ctypes function, what cuGetProcAddress finds
        self.elapsed = []  # what cuEventElapsedTime answers, in order
        self.events_created = 0
        self.images = []  # the descriptors cuTensorMapEncodeTiled made

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _record(self, name, *args):
        self.calls.append((name, args))

    def cuCtxSetCurrent(self, context):
        self._record("cuCtxSetCurrent", context)
        return (self.success,)

    def cuCtxGetCurrent(self):
        self._record("cuCtxGetCurrent")
        return (self.success, self._real.CUcontext(0))  # none yet

    def cuGetProcAddress(self, symbol, version, flags):
        name = symbol.decode()
        self._record("cuGetProcAddress", name, version, flags)
        found = self._real.CUdriverProcAddressQueryResult
        function = self.entry_points.get(name)
        if function is None:
            return (self.success, 0, found.CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
        return (self.success, ctypes.cast(function, ctypes.c_void_p).value, found.CU_GET_PROC_ADDRESS_SUCCESS)

    def cuModuleLoadData(self, image):
        self._record("cuModuleLoadData", image)
        return (self.success, self._real.CUmodule(0x100))

    def cuModuleLoadDataEx(self, image, count, options, values):
        """The driver's JIT: compiles and loads in one call (its logs stay empty here)."""
        self._record("cuModuleLoadDataEx", image)
        return (self.success, self._real.CUmodule(0x180))

    def cuModuleGetFunction(self, module, name):
        self._record("cuModuleGetFunction", name)
        return (self.success, self._real.CUfunction(0x200))

    def cuFuncGetAttribute(self, which, function):
        values = {"CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": self.static_shared, "CU_FUNC_ATTRIBUTE_NUM_REGS": 40,
                  "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 49152 - self.static_shared,
                  "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024,
                  "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES": self.local_bytes}
        return (self.success, values[which.name])

    def cuFuncSetAttribute(self, function, which, value):
        self._record("cuFuncSetAttribute", which.name, value)
        return (self.success,)

    # Memory, stream memory operations and events: what timed and profiled launches add.
    def cuMemAlloc(self, size):
        self._record("cuMemAlloc", size)
        return (self.success, self._real.CUdeviceptr(self.allocation_address(size)))

    def allocation_address(self, size):
        return 0x7F0000100000

    def cuMemFree(self, address):
        self._record("cuMemFree", int(address))
        return (self.success,)

    def cuMemsetD32(self, address, value, count):
        self._record("cuMemsetD32", int(address), value)
        return (self.success,)

    def cuMemsetD32Async(self, address, value, count, stream):
        self._record("cuMemsetD32Async", int(address), value, count, int(stream))
        return (self.success,)

    def cuMemcpyDtoDAsync(self, target, source, nbytes, stream):
        self._record("cuMemcpyDtoDAsync", int(target), int(source), nbytes, int(stream))
        return (self.success,)

    def cuMemcpyDtoH(self, destination, source, size):
        return (self.success,)

    def cuStreamCreate(self, flags):
        self._record("cuStreamCreate", int(flags))
        return (self.success, self._real.CUstream(0x55))

    def cuStreamWaitValue32(self, stream, address, value, flags):
        self._record("cuStreamWaitValue32", int(stream), int(address), value)
        return (self.success,)

    def cuStreamWriteValue32(self, stream, address, value, flags):
        self._record("cuStreamWriteValue32", int(stream), int(address), value)
        return (self.success,)

    def cuEventCreate(self, flags):
        self.events_created += 1
        return (self.success, self._real.CUevent(0x60 + self.events_created))

    def cuEventRecord(self, event, stream):
        self._record("cuEventRecord", int(event), int(stream))
        return (self.success,)

    def cuEventSynchronize(self, event):
        self._record("cuEventSynchronize")
        return (self.success,)

    def cuEventElapsedTime(self, start, end):
        """The next of `elapsed` (milliseconds), which a test sets."""
        return (self.success, self.elapsed.pop(0))

    def cuEventDestroy(self, event):
        self._record("cuEventDestroy", int(event))
        return (self.success,)

    def cuTensorMapEncodeTiled(self, dtype, rank, address, *rest):
        """A descriptor of 128 recognisable bytes naming `address` (kept alive by this driver)."""
        self._record("cuTensorMapEncodeTiled", address)
        image = ctypes.create_string_buffer(ctypes.c_uint64(address).value.to_bytes(8, "little") * 16, 128)
        self.images.append(image)
        return (self.success, _EncodedMap(ctypes.addressof(image)))

    def cuLaunchKernelEx(self, config, function, kernel_params, extra):
        grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
        cluster = tuple((a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z)
                        for a in config.attrs[:config.numAttrs])
        pointer = ctypes.c_void_p.from_address(kernel_params).value
        self._record("cuLaunchKernelEx", grid, int(config.hStream), config.sharedMemBytes, cluster,
                     ctypes.c_uint64.from_address(pointer).value)
        result = self.launch_results.pop(0) if self.launch_results else self.success
        return (self._real.CUresult(result),)


class _EncodedMap:
    """What `cuTensorMapEncodeTiled` returns: a `CUtensorMap` as far as `getPtr` goes."""

    def __init__(self, address):
        self._address = address

    def getPtr(self):  # noqa: N802 - cuda-python's spelling
        return self._address


def pointer_binary(**changes) -> KernelBinary:
    """A kernel binary taking one pointer `x`, changed."""
    binary = KernelBinary(name="touch", ptx=PTX, block=(128, 1, 1), descriptors=(), params=(PointerParam(0),),
                          arg_names=("x",))
    return binary_with(binary, **changes)
