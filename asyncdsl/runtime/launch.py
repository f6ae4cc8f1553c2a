"""Loading a `KernelBinary` onto a device and launching it.

`load_kernel` does everything that can be done once: check the binary against the device, get a
cubin (disk cache or compile), load it, set the function's shared-memory limit, validate every
descriptor spec, and build the launch configuration and parameter block.  `LoadedKernel.launch`
checks the arrays, refills the parameters (cached tensor maps, cached scratch uploads, the runtime
scalars' values), touches the launch configuration only where the grid or stream changed, and
calls `cuLaunchKernelEx`.  `LoadedKernel.prepare` makes a `PreparedLaunch`: a parameter block and
launch configuration of its own, which the warm path of kernel calls keeps per argument layout
and refills only where a call differs from the one before.
"""

from __future__ import annotations

import operator
import re
import threading
import warnings
from collections.abc import Sequence
from typing import Any, Literal

from asyncdsl.errors import (
    ArgumentError,
    CudaError,
    PerformanceWarning,
    ResourceError,
    UnsupportedTargetError,
    user_location,
)
from asyncdsl.hw.limits import (
    DESCRIPTOR_ALIGNMENT,
    DESCRIPTOR_BYTES,
    MAX_BLOCK,
    MAX_CLUSTER_SIZE,
    MAX_GRID,
    MAX_PORTABLE_CLUSTER_SIZE,
    MAX_THREADS_PER_BLOCK,
)
from asyncdsl.kernel_binary import (
    DescriptorScratchParam,
    ErrorBufferParam,
    KernelBinary,
    PointerParam,
    ScalarParam,
    TensorMapParam,
)
from asyncdsl.runtime import driver
from asyncdsl.runtime.arrays import DeviceArray
from asyncdsl.runtime.error_buffer import ErrorBuffer
from asyncdsl.runtime.jit_link import compiler_for, installed_compilers, load_image
from asyncdsl.runtime.module_cache import CubinCache, cache_directory, cached_compile
from asyncdsl.runtime.params import KernelParams, argument_count
from asyncdsl.runtime.profile import ProfiledLaunch, launch_profiled
from asyncdsl.runtime.scratch import DescriptorScratch, DeviceScratchPool
from asyncdsl.runtime.streams import DEFAULT_STREAM, stream_handle
from asyncdsl.runtime.tensormap import TensorMapCache, TensorMapEncoder


def launch_grid(grid: Any, cluster: tuple[int, int, int] = (1, 1, 1)) -> tuple[int, int, int]:
    """`grid` (an int or 1 to 3 ints, counting blocks) as (x, y, z), checked against the hardware
    limits and the cluster shape: a cluster launch needs whole clusters along every dimension."""
    try:
        dims = ((operator.index(grid),) if not isinstance(grid, (tuple, list))
                else tuple(map(operator.index, grid)))
    except TypeError:
        raise ArgumentError(f"grid {grid!r} is not an int or a tuple of 1 to 3 ints",
                            user_location()) from None
    if not 1 <= len(dims) <= 3:
        raise ArgumentError(f"grid {grid!r} has {len(dims)} dimensions; a grid has 1 to 3", user_location())
    x, y, z = dims + (1,) * (3 - len(dims))
    dims = (x, y, z)
    for axis, extent, limit in zip("xyz", dims, MAX_GRID):
        if not 1 <= extent <= limit:
            raise ArgumentError(f"grid {dims}: the {axis} extent {extent} is outside 1 .. {limit}",
                                user_location())
    for axis, extent, width in zip("xyz", dims, cluster):
        if extent % width:
            raise ArgumentError(
                f"grid {dims} is not a whole number of clusters {tuple(cluster)}: {extent} blocks along "
                f"{axis} is not a multiple of {width}",
                user_location(),
            )
    return x, y, z


def check_binary(binary: KernelBinary) -> None:
    """Reject a binary that cannot run on any Hopper GPU (block and cluster shapes), and one whose
    parts contradict each other (a compiler bug: plain ValueError)."""
    name = binary.name
    if len(binary.block) != 3 or any(extent < 1 for extent in binary.block):
        raise ValueError(f"kernel {name!r}: block {binary.block} is not three positive extents")
    threads = binary.block[0] * binary.block[1] * binary.block[2]
    if threads > MAX_THREADS_PER_BLOCK or any(e > m for e, m in zip(binary.block, MAX_BLOCK)):
        raise ResourceError(f"kernel {name!r}: block {binary.block} has {threads} threads; a block has at "
                            f"most {MAX_THREADS_PER_BLOCK} (and at most {MAX_BLOCK} per dimension)",
                            user_location())
    if len(binary.cluster) != 3 or any(extent < 1 for extent in binary.cluster):
        raise ValueError(f"kernel {name!r}: cluster {binary.cluster} is not three positive extents")
    cluster_size = binary.cluster[0] * binary.cluster[1] * binary.cluster[2]
    if cluster_size > MAX_CLUSTER_SIZE:
        raise ResourceError(f"kernel {name!r}: cluster {binary.cluster} has {cluster_size} blocks; Hopper "
                            f"clusters have at most {MAX_CLUSTER_SIZE}", user_location())
    if binary.dynamic_smem_bytes < 0:
        raise ValueError(f"kernel {name!r}: negative dynamic shared memory {binary.dynamic_smem_bytes}")
    descriptor_count = len(binary.descriptors)
    for param in binary.params:
        if isinstance(param, TensorMapParam) and not 0 <= param.descriptor_index < descriptor_count:
            raise ValueError(f"kernel {name!r}: {param} names one of {descriptor_count} descriptors")
        if isinstance(param, PointerParam) and param.arg_index < 0:
            raise ValueError(f"kernel {name!r}: {param} has a negative argument index")
        if isinstance(param, DescriptorScratchParam):
            offsets = param.slot_offsets
            if not offsets:
                raise ValueError(f"kernel {name!r}: a descriptor scratch parameter but no descriptors")
            if len(offsets) != descriptor_count:
                raise ValueError(
                    f"kernel {name!r}: {len(offsets)} scratch slots for {descriptor_count} descriptors")
            ordered = sorted(offsets)
            if any(offset % DESCRIPTOR_ALIGNMENT for offset in offsets) or any(
                    later - earlier < DESCRIPTOR_BYTES for earlier, later in zip(ordered, ordered[1:])):
                raise ValueError(f"kernel {name!r}: scratch slots {offsets} are not 64-byte aligned, "
                                 "disjoint 128-byte slots")
    scalars = [param for param in binary.params if isinstance(param, ScalarParam)]
    if [param.scalar_index for param in scalars] != list(range(len(scalars))):
        raise ValueError(f"kernel {name!r}: scalar parameters {scalars} are not numbered 0, 1, ... in order")
    if any(param.kind not in ("int", "float") for param in scalars):
        raise ValueError(f"kernel {name!r}: a scalar parameter of unknown kind in {scalars}")
    arg_count = argument_count(binary)
    if any(spec.arg_index >= arg_count for spec in binary.descriptors):
        raise ValueError(f"kernel {name!r}: a descriptor reads an argument beyond its {arg_count} arguments")


def check_target(arch: str, facts: driver.DeviceFacts) -> None:
    """`arch` must run on the device: an `a` target (sm_90a) only on exactly that compute capability."""
    match = re.fullmatch(r"sm_(\d+)(\d)(a?)", arch)
    if match is None:
        raise UnsupportedTargetError(f"unknown target architecture {arch!r}", user_location())
    needed = (int(match.group(1)), int(match.group(2)))
    exact = bool(match.group(3))
    if (facts.compute_capability != needed) if exact else (facts.compute_capability < needed):
        raise UnsupportedTargetError(
            f"the kernel is compiled for {arch}, which needs a GPU of compute capability "
            f"{needed[0]}.{needed[1]}{'' if exact else ' or newer'}; {facts} is not one",
            user_location(),
        )


class LoadedKernel:
    """A kernel loaded on one device, ready to launch.

    `cubin_source` says where its cubin came from: "compiled" or "disk" (the cubin cache).
    `tensor_maps` and `scratches` expose the descriptor caches (their `encode_count` and
    `upload_count` show that warm launches do no host work beyond filling parameters)."""

    def __init__(self, binary: KernelBinary, device: int):
        check_binary(binary)
        facts = driver.device_facts(device)
        check_target(binary.arch, facts)
        self.binary = binary
        self.name = binary.name
        self.device = device
        encoders = [TensorMapEncoder(spec, index) for index, spec in enumerate(binary.descriptors)]
        self.tensor_maps = [TensorMapCache(encoder.spec, encoder.encode, encoder.replace_address)
                            for encoder in encoders]
        cu = driver.api()
        driver.activate(device)
        image, from_disk = cached_compile(  # a cubin, or PTX for the driver's JIT (`jit_link.py`)
            binary.ptx, binary.arch, binary.name,
            lambda ptx, arch, name: compiler_for(device).compile(ptx, arch, name),
            installed_compilers(facts.driver_version), facts.driver_version, CubinCache(cache_directory()))
        self.cubin_source: Literal["compiled", "disk"] = "disk" if from_disk else "compiled"
        # Modules stay loaded for the life of the process: a queued launch may still need one.
        self._module = load_image(image, device)
        self._function = driver.check(cu.cuModuleGetFunction(self._module, binary.name.encode()),
                                      f"cuModuleGetFunction({binary.name!r})")
        self._configure_function(facts)
        reports = [param for param in binary.params if isinstance(param, ErrorBufferParam)]
        self._errors = ErrorBuffer(reports[0], binary.name, device) if reports else None
        self._params = self.new_params()
        self.scratches: list[DescriptorScratch] = self._params.scratches
        self._config = self.new_launch_config()
        self._launch = cu.cuLaunchKernelEx
        self._lock = threading.Lock()
        self._grid_argument: Any = None
        self._stream = DEFAULT_STREAM

    def _configure_function(self, facts: driver.DeviceFacts) -> None:
        cu = driver.api()
        attribute = cu.CUfunction_attribute

        def get(which: Any) -> int:
            return driver.check(cu.cuFuncGetAttribute(which, self._function), "cuFuncGetAttribute")

        def set_(which: Any, value: int) -> None:
            driver.check(cu.cuFuncSetAttribute(self._function, which, value),
                         f"cuFuncSetAttribute({which.name})")

        binary = self.binary
        dynamic = binary.dynamic_smem_bytes
        self.static_shared_bytes = get(attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        self.registers_per_thread = get(attribute.CU_FUNC_ATTRIBUTE_NUM_REGS)
        # Local memory a thread uses: spilled registers, or a stack; every access is a trip to memory.
        self.local_bytes_per_thread = get(attribute.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
        if self.local_bytes_per_thread:
            warnings.warn(f"kernel {self.name!r} uses {self.local_bytes_per_thread} bytes of local memory a "
                          f"thread (spilled registers, or a stack): each access is a trip to memory",
                          PerformanceWarning, stacklevel=2)
        limit = facts.max_shared_memory_per_block_optin
        if dynamic + self.static_shared_bytes > limit:
            raise ResourceError(
                f"kernel {self.name!r} needs {dynamic} bytes of dynamic shared memory (including 1024 bytes "
                f"of alignment slack) + {self.static_shared_bytes} static = "
                f"{dynamic + self.static_shared_bytes} bytes per block, but {facts} allows at most {limit}",
                user_location(),
            )
        # 48 KiB - static by default
        if dynamic > get(attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES):
            set_(attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic)
        threads = binary.block[0] * binary.block[1] * binary.block[2]
        max_threads = get(attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        if threads > max_threads:
            raise ResourceError(
                f"kernel {self.name!r} uses {self.registers_per_thread} registers per thread, so at most "
                f"{max_threads} threads fit in a block, but its block {binary.block} has {threads}",
                user_location(),
            )
        cluster_size = binary.cluster[0] * binary.cluster[1] * binary.cluster[2]
        if cluster_size > MAX_PORTABLE_CLUSTER_SIZE:
            set_(attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)

    def new_params(self) -> KernelParams:
        """A parameter block of this kernel (sharing its descriptor caches, with scratch buffers of
        its own)."""
        error_buffer = self._errors.address if self._errors else 0
        # A pool per block: a scratch cache that fills up frees every buffer of its pool, which
        # another block's cache would still hand out (and its launches read) after the free.
        return KernelParams(self.binary, self.device, self.tensor_maps, DeviceScratchPool(self.device),
                            error_buffer)

    def new_launch_config(self) -> Any:
        """A `CUlaunchConfig` of this kernel on the legacy default stream, its grid not set yet."""
        cu = driver.api()
        config = cu.CUlaunchConfig()
        config.blockDimX, config.blockDimY, config.blockDimZ = self.binary.block
        config.sharedMemBytes = self.binary.dynamic_smem_bytes
        config.hStream = DEFAULT_STREAM
        if self.binary.cluster != (1, 1, 1):
            cluster = cu.CUlaunchAttribute()
            cluster.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            dims = cluster.value.clusterDim
            dims.x, dims.y, dims.z = self.binary.cluster
            config.attrs = [cluster]
            config.numAttrs = 1
        else:
            config.numAttrs = 0
        return config

    def launch(
        self, grid: Any, arrays: Sequence[DeviceArray], stream: Any = None,
        scalars: Sequence[int | float] = ()
    ) -> None:
        """Launch on `grid` (blocks, not clusters) with `arrays` and the runtime `scalars` (ints
        and floats, in the order of the kernel's scalar parameters) as the kernel's arguments, on
        `stream` (None: the legacy default stream; an int handle; a `CUstream`; or an object with
        `__cuda_stream__`, `.cuda_stream` or `.ptr`).  Asynchronous, like any kernel launch."""
        if self._params.profile_buffer is not None and not self._params.profile_buffer.value:
            raise ArgumentError(
                f"kernel {self.name!r} was compiled for profiling: launch it with Kernel.profile, which "
                "gives it a profile buffer", user_location(),
            )
        handle = DEFAULT_STREAM if stream is None else stream_handle(stream)
        with self._lock:
            self._set_grid_and_stream(grid, handle)
            self.run(self._config, self._params.pack(arrays, handle, scalars))

    def prepare(self, grid: Any) -> PreparedLaunch:
        """A launch of this kernel on `grid` with a parameter block of its own (see `PreparedLaunch`)."""
        return PreparedLaunch(self, grid)

    def launch_profiled(
        self, grid: Any, arrays: Sequence[DeviceArray], stream: Any = None,
        scalars: Sequence[int | float] = ()
    ) -> ProfiledLaunch:
        """Launch a kernel compiled for profiling once with a profile buffer of its own, wait for
        it, and return the buffer and the kernel's time by CUDA events (`runtime/profile.py`)."""
        cell = self._params.profile_buffer
        if cell is None:
            raise ArgumentError(f"kernel {self.name!r} was not compiled for profiling: it has no profile "
                                "buffer", user_location())
        dims = launch_grid(grid, self.binary.cluster)
        return launch_profiled(self, cell, dims, arrays, stream, scalars)

    def _set_grid_and_stream(self, grid: Any, handle: int) -> None:
        config = self._config
        if grid != self._grid_argument:
            config.gridDimX, config.gridDimY, config.gridDimZ = launch_grid(grid, self.binary.cluster)
            # A list could be changed in place before the next launch: remember its value.
            self._grid_argument = tuple(grid) if isinstance(grid, list) else grid
        if handle != self._stream:
            config.hStream = handle
            self._stream = handle

    def run(self, config: Any, params: int) -> None:
        """`cuLaunchKernelEx` with `config` and the parameter block at `params`; in debug mode, the
        error buffer cleared before and read after."""
        if self._errors is not None:
            self._errors.reset(config.hStream)
        (err,) = self._launch(config, self._function, params, 0)
        if err:
            self.retry_failed_launch(err, config, params)
        if self._errors is not None:
            self._errors.raise_if_failed(config.hStream)

    def retry_failed_launch(self, err: Any, config: Any, params: int) -> None:
        """After a launch that failed with `err`: launch again if only the thread's current context
        was missing (a new thread, or someone popped ours); raise `CudaError` otherwise."""
        if err == driver.CUDA_ERROR_INVALID_CONTEXT:
            driver.activate(self.device)
            (err,) = self._launch(config, self._function, params, 0)
        if err:
            error = driver.cuda_error(err, "cuLaunchKernelEx")
            raise CudaError(f"{error.message} launching kernel {self.name!r} on grid "
                            f"({config.gridDimX}, {config.gridDimY}, {config.gridDimZ})",
                            error.location, code=error.code)

    def __repr__(self) -> str:
        return f"LoadedKernel({self.name!r}, device=cuda:{self.device}, cubin from {self.cubin_source})"


class PreparedLaunch:
    """One kernel on one grid with a parameter block and launch configuration of its own.

    The warm path of kernel calls keeps one per argument layout, so a call like the one before
    (same arrays, same stream) writes nothing but its runtime scalars before `cuLaunchKernelEx`,
    and one with arrays at other addresses only re-points the descriptor slots at cached images
    (or at images patched with `cuTensorMapReplaceAddress`).  The driver copies the parameters
    during the launch call, so the next launch may rewrite them at once; that also makes a launch
    captured in a CUDA graph keep the by-value descriptors it was captured with."""

    def __init__(self, loaded: LoadedKernel, grid: Any):
        self.loaded = loaded
        self._params = loaded.new_params()
        self._params_address = self._params.address
        self._config = loaded.new_launch_config()
        self._grid: Any = None
        self._set_grid(grid)
        self._addresses: tuple[int, ...] | None = None
        self._stream = DEFAULT_STREAM
        self._function = loaded._function
        self._launch = loaded._launch
        self._checks_errors = loaded._errors is not None
        self._lock = threading.Lock()

    def check(self, arrays: Sequence[DeviceArray], stream: int, scalars: Sequence[int | float] = ()) -> None:
        """Check `arrays` and `scalars` as a launch of the kernel does (their count, device and
        size, each scalar's value), filling the parameters; the next `launch` refills them."""
        self._params.pack(arrays, stream, scalars)
        self._addresses = None

    def _set_grid(self, grid: Any) -> None:
        config = self._config
        config.gridDimX, config.gridDimY, config.gridDimZ = launch_grid(grid, self.loaded.binary.cluster)
        self._grid = tuple(grid) if isinstance(grid, list) else grid

    def launch(
        self, addresses: tuple[int, ...], stream: int, scalars: Sequence[int | float] = (), grid: Any = None
    ) -> None:
        """Launch with the arrays at `addresses` (already checked against this layout), on the
        stream handle `stream`, with the runtime `scalars`, on `grid` (None: the grid it has)."""
        self._lock.acquire()  # half the cost of `with`, on every warm call
        try:
            if scalars:
                self._params.fill_scalars(scalars)
            if grid is not None and grid != self._grid:
                self._set_grid(grid)
            if addresses != self._addresses or stream != self._stream:
                if stream != self._stream:
                    self._config.hStream = stream
                    self._stream = stream
                self._addresses = None  # a fill that raises half way must be redone
                self._params.fill_addresses(addresses, stream)
                self._addresses = addresses
            if self._checks_errors:
                self.loaded.run(self._config, self._params_address)
                return
            (err,) = self._launch(self._config, self._function, self._params_address, 0)
            if err:
                self.loaded.retry_failed_launch(err, self._config, self._params_address)
        finally:
            self._lock.release()


_loaded: dict[tuple[KernelBinary, int], LoadedKernel] = {}
_loading = threading.Lock()


def load_kernel(binary: KernelBinary, device: int = 0) -> LoadedKernel:
    """`binary` loaded on `device`: the same object for the same binary and device for the life of
    the process (until `clear_loaded_kernels`)."""
    key = (binary, device)
    kernel = _loaded.get(key)
    if kernel is None:
        with _loading:
            kernel = _loaded.get(key)
            if kernel is None:
                kernel = LoadedKernel(binary, device)
                _loaded[key] = kernel
    return kernel


def clear_loaded_kernels() -> None:
    """Forget every loaded kernel, so that the next `load_kernel` starts again from the disk cache.

    Kernels already handed out keep working; their modules are never unloaded."""
    with _loading:
        _loaded.clear()
