"""Reading DLPack capsules with ctypes: enough of the DLPack ABI to learn where an array lives.

We take a capsule from `__dlpack__`, read its `DLTensor`, and keep the capsule alive next to the
array instead of consuming it: the producer's capsule destructor then releases the tensor when our
reference goes away, so ownership never passes to us and no deleter is ever called by hand.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

# DLDeviceType values.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
DEVICE_TYPE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA pinned host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                     10: "ROCm", 13: "CUDA managed", 14: "oneAPI"}

_VERSIONED = b"dltensor_versioned"
_LEGACY = b"dltensor"


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


# Private prototypes, so that nobody else's `ctypes.pythonapi` restype settings matter.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


@dataclass(frozen=True)
class DLTensorView:
    """What a DLPack capsule says about its tensor (strides in elements, None when compact)."""

    address: int  # data + byte_offset
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    type_code: int
    bits: int
    lanes: int
    device_type: int
    device_id: int


def export_capsule(value: Any, stream: int | None) -> Any:
    """`value.__dlpack__(...)`, asking for a versioned (DLPack 1.x) capsule where the producer
    supports it; `stream` is the consumer's stream as DLPack spells it."""
    try:
        return value.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0 does not know `max_version`
        return value.__dlpack__(stream=stream)


def read_capsule(capsule: Any) -> DLTensorView:
    """Read the tensor description out of a `dltensor` or `dltensor_versioned` capsule."""
    if _capsule_is_valid(capsule, _VERSIONED):
        managed = _DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, _VERSIONED))
        tensor = managed.dl_tensor
    elif _capsule_is_valid(capsule, _LEGACY):
        tensor = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, _LEGACY)).dl_tensor
    else:
        raise TypeError(f"{capsule!r} is not an unconsumed DLPack capsule")
    ndim = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(ndim))
    strides = tuple(tensor.strides[i] for i in range(ndim)) if tensor.strides else None
    return DLTensorView(
        address=(tensor.data or 0) + tensor.byte_offset,
        shape=shape,
        strides=strides,
        type_code=tensor.dtype.code,
        bits=tensor.dtype.bits,
        lanes=tensor.dtype.lanes,
        device_type=tensor.device.device_type,
        device_id=tensor.device.device_id,
    )
