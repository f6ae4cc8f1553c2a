"""Host (numpy) copies of kernel arguments of any framework, and writing them back.

Under `ASYNCDSL_INTERPRET=1` an ordinary kernel call runs in the interpreter, which works on
numpy arrays: torch tensors, CuPy arrays and asyncdsl's own device arrays are copied to numpy (as
raw bits, so bfloat16 and fp8 survive) and copied back in place afterwards; a JAX array cannot be
written in place, so it is refused.  Like a GPU launch, a non-contiguous array is refused rather
than silently copied.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import ArgumentError, SourceLocation
from asyncdsl.runtime.arrays import DeviceArray, check_alignment, torch_dtype
from asyncdsl.runtime.buffers import copy_to_device, to_host

_NUMPY_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _not_contiguous(name: str, shape, location: SourceLocation | None) -> ArgumentError:
    return ArgumentError(
        f"argument {name!r} is not contiguous (row-major), shape {tuple(shape)}: kernels address "
        "their arguments as dense row-major buffers; pass a contiguous copy",
        location,
    )


def numpy_argument(name: str, value: Any, location: SourceLocation | None) -> np.ndarray:
    """`value` itself, checked to be an array `kernel.interpret` can run on."""
    if not isinstance(value, np.ndarray):
        raise ArgumentError(
            f"argument {name!r} is a {type(value).__module__}.{type(value).__qualname__}; "
            "kernel.interpret runs on numpy arrays (set ASYNCDSL_INTERPRET=1 to interpret ordinary "
            "calls on torch or CuPy arrays)",
            location,
        )
    if not value.flags.c_contiguous:
        raise _not_contiguous(name, value.shape, location)
    check_alignment(value.ctypes.data, name, location)
    return value


@dataclass
class HostCopy:
    """A numpy array standing for a kernel argument, and how to put its bytes back."""

    array: np.ndarray
    write_back: Callable[[], None]


def host_copy(name: str, value: Any, location: SourceLocation | None) -> HostCopy:
    """The numpy stand-in for an argument of any supported framework."""
    if isinstance(value, np.ndarray):
        return HostCopy(numpy_argument(name, value, location), lambda: None)
    if isinstance(value, DeviceArray):
        check_alignment(value.address, name, location)
        return _device_array_copy(value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _torch_copy(torch, name, value, location)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(value, cupy.ndarray):
        return _cupy_copy(cupy, name, value, location)
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(value, jax.Array):
        raise ArgumentError(
            f"argument {name!r} is a JAX array, which cannot be written in place: under "
            "ASYNCDSL_INTERPRET=1 pass numpy, torch or CuPy arrays, or call kernel.interpret on "
            "numpy copies",
            location,
        )
    raise ArgumentError(
        f"argument {name!r} is a {type(value).__module__}.{type(value).__qualname__}; "
        "ASYNCDSL_INTERPRET=1 runs kernels on numpy arrays and copies torch and CuPy arrays",
        location,
    )


def _torch_copy(torch, name: str, tensor, location: SourceLocation | None) -> HostCopy:
    if not tensor.is_contiguous():
        raise _not_contiguous(name, tensor.shape, location)
    check_alignment(tensor.data_ptr(), name, location)
    dtype = torch_dtype(tensor, name)  # the element type a GPU launch would see (bool as uint8)
    # Through a same-width integer view: numpy has no bfloat16/fp8, torch no ml_dtypes.
    bits_dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]
    bits = tensor.detach().view(bits_dtype)
    host = bits.cpu().numpy()  # shares memory with a CPU tensor, so writes land in place
    array = host.view(dtype.numpy)

    def write_back() -> None:
        if bits.device.type != "cpu":
            bits.copy_(torch.from_numpy(host))

    return HostCopy(array, write_back)


def _cupy_copy(cupy, name: str, array, location: SourceLocation | None) -> HostCopy:
    if not array.flags.c_contiguous:
        raise _not_contiguous(name, array.shape, location)
    check_alignment(array.data.ptr, name, location)
    dtype = as_dtype(array.dtype)
    host = cupy.asnumpy(array.view(_NUMPY_UINT[dtype.itemsize]))
    return HostCopy(host.view(dtype.numpy), lambda: array.view(host.dtype).set(host))


def _device_array_copy(array: DeviceArray) -> HostCopy:
    host = to_host(array)
    return HostCopy(host, lambda: copy_to_device(host, array))
