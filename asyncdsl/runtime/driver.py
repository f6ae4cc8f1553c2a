"""The CUDA driver as the runtime uses it: imported and initialised on first use, one retained
primary context per device, failed calls turned into `CudaError`, and the device facts that
loading and launching depend on.

Primary contexts (not `cuCtxCreate`, whose signature changed in CUDA 13) are what torch, CuPy and
JAX use too, so pointers they hand us are valid in the context our kernels run in.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from asyncdsl.errors import ArgumentError, CudaError, user_location

CUDA_ERROR_INVALID_CONTEXT = 201  # the calling thread has no current context

_lock = threading.RLock()
_driver_module: ModuleType | None = None
_initialized = False
_contexts: dict[int, Any] = {}
_facts: dict[int, DeviceFacts] = {}
_gpu_usable: bool | None = None


def api() -> ModuleType:
    """`cuda.bindings.driver`, imported on first use (the import alone takes ~80 ms)."""
    global _driver_module
    if _driver_module is None:
        try:
            from cuda.bindings import driver
        except ImportError as error:
            raise CudaError(
                f"cuda-python is not installed ({error}); install it with pip install 'asyncdsl[gpu]'",
                user_location(),
            ) from error
        _driver_module = driver
    return _driver_module


def cuda_error(code: Any, call: str) -> CudaError:
    """A `CudaError` for a failed driver call, naming the call and the CUresult."""
    cu = api()
    name = description = None
    try:
        err, raw = cu.cuGetErrorName(code)
        if not err and raw:
            name = raw.decode()
        err, raw = cu.cuGetErrorString(code)
        if not err and raw:
            description = raw.decode()
    except Exception:  # noqa: BLE001 - the driver library itself may be missing; fall back below
        pass
    if name is None:
        try:
            name = cu.CUresult(int(code)).name
        except ValueError:
            name = f"CUresult {int(code)}"
    text = f"{call} failed: {name}" + (f" ({description})" if description else "")
    return CudaError(text, user_location(), code=int(code))


def check(result: tuple, call: str) -> Any:
    """Unpack a cuda-python result tuple `(CUresult, *values)`; raise `CudaError` on failure.

    Returns None, the single value, or the tuple of values."""
    if result[0]:
        raise cuda_error(result[0], call)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


_entry_points: dict[str, Any] = {}


def entry_point(symbol: str, *argtypes: Any) -> Any:
    """The driver function `symbol` (found with `cuGetProcAddress`, as the CUDA 12.0 header
    declares it) as a ctypes function of `argtypes` returning its CUresult as an int.

    For calls made per launch, where cuda-python's conversion of the arguments costs several
    times the call itself (a cuda-python `cuTensorMapReplaceAddress` takes a few microseconds;
    benchmarks/launch_paths.py).  ctypes releases the GIL during the call, as cuda-python does."""
    function = _entry_points.get(symbol)
    if function is None:
        initialize()
        cu = api()
        default = cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
        err, address, status = cu.cuGetProcAddress(symbol.encode(), 12000, default)
        if err:
            raise cuda_error(err, f"cuGetProcAddress({symbol})")
        if not address or status != cu.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SUCCESS:
            raise CudaError(f"the CUDA driver has no {symbol} ({status!r})", user_location())
        function = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(int(address))
        _entry_points[symbol] = function
    return function


def initialize() -> None:
    """`cuInit(0)`, once per process."""
    global _initialized
    if _initialized:
        return
    with _lock:
        if _initialized:
            return
        cu = api()
        try:
            result = cu.cuInit(0)
        except Exception as error:  # cuda-pathfinder raises when libcuda.so cannot be found
            raise CudaError(
                f"cuInit failed: the CUDA driver library could not be loaded ({error})", user_location()
            ) from error
        check(result, "cuInit")
        _initialized = True


def device_count() -> int:
    initialize()
    return check(api().cuDeviceGetCount(), "cuDeviceGetCount")


def primary_context(device: int = 0) -> Any:
    """The primary context of `device`, retained once and kept for the life of the process."""
    context = _contexts.get(device)
    if context is not None:
        return context
    with _lock:
        context = _contexts.get(device)
        if context is None:
            count = device_count()
            if not 0 <= device < count:
                raise ArgumentError(
                    f"CUDA device {device} does not exist; this machine has {count} device(s)",
                    user_location(),
                )
            cu = api()
            handle = check(cu.cuDeviceGet(device), "cuDeviceGet")
            context = check(cu.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
            _contexts[device] = context
    return context


def activate(device: int = 0) -> Any:
    """Make `device`'s primary context current on the calling thread and return it."""
    context = primary_context(device)
    check(api().cuCtxSetCurrent(context), "cuCtxSetCurrent")
    return context


def has_gpu() -> bool:
    """True when the CUDA driver loads and device 0's primary context can be made current.

    Never raises: no cuda-python, no driver library, no device or a broken one all give False.
    The answer is computed once per process."""
    global _gpu_usable
    if _gpu_usable is None:
        try:
            activate(0)
            _gpu_usable = True
        except Exception:  # noqa: BLE001 - the contract is "never raises"
            _gpu_usable = False
    return _gpu_usable


@dataclass(frozen=True)
class DeviceFacts:
    """What the runtime needs to know about one device (queried once, then cached)."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    max_shared_memory_per_block_optin: int
    multiprocessor_count: int
    driver_version: int  # 1000 * major + 10 * minor, e.g. 13000 for CUDA 13.0
    l2_cache_bytes: int = 0

    def __str__(self) -> str:
        major, minor = self.compute_capability
        return f"cuda:{self.ordinal} ({self.name}, compute capability {major}.{minor})"


def driver_version() -> int:
    """The CUDA version the driver supports, as 1000 * major + 10 * minor."""
    initialize()
    return check(api().cuDriverGetVersion(), "cuDriverGetVersion")


def device_facts(device: int = 0) -> DeviceFacts:
    facts = _facts.get(device)
    if facts is not None:
        return facts
    primary_context(device)  # validates the ordinal
    cu = api()
    handle = check(cu.cuDeviceGet(device), "cuDeviceGet")
    attribute = cu.CUdevice_attribute

    def query(name: str) -> int:
        return check(cu.cuDeviceGetAttribute(getattr(attribute, name), handle), "cuDeviceGetAttribute")

    raw_name = check(cu.cuDeviceGetName(256, handle), "cuDeviceGetName")
    facts = DeviceFacts(
        ordinal=device,
        name=raw_name.split(b"\0", 1)[0].decode(),
        compute_capability=(
            query("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            query("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        ),
        max_shared_memory_per_block_optin=query("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        multiprocessor_count=query("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        driver_version=driver_version(),
        l2_cache_bytes=query("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
    )
    _facts[device] = facts
    return facts


def pointer_device(address: int) -> int:
    """The ordinal of the device that owns the memory at `address`.

    Raises `ArgumentError` when the driver does not know the address (it is not CUDA memory)."""
    activate_if_none()
    cu = api()
    err, ordinal = cu.cuPointerGetAttribute(
        cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, cu.CUdeviceptr(address)
    )
    if err:
        raise ArgumentError(
            f"address {address:#x} is not CUDA memory ({cuda_error(err, 'cuPointerGetAttribute').message})",
            user_location(),
        )
    return int(ordinal)


def activate_if_none() -> None:
    """Make device 0's primary context current if the calling thread has no current context
    (pointer queries and event calls need one; an existing current context is left alone)."""
    cu = api()
    initialize()
    context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if context is None or int(context) == 0:
        activate(0)
