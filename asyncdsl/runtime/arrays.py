"""GPU arrays as kernel arguments: where their memory is, how it is laid out, and what we refuse.

`device_array` accepts torch tensors (read directly through `data_ptr()`/`stride()`, without
importing torch), and anything that speaks DLPack (`__dlpack__` + `__dlpack_device__`: CuPy, JAX,
torch, numpy on the host) or the CUDA Array Interface v2/v3 (numba, older libraries).  Kernels
address their arguments as dense row-major buffers whose base TMA can use, so every argument must
be a contiguous array on the kernel's device starting at a 16-byte aligned address.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from asyncdsl.dtypes import DType, as_dtype, from_dlpack
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.hw.gmem_runs import contiguous_strides
from asyncdsl.hw.limits import GMEM_ADDRESS_ALIGNMENT
from asyncdsl.runtime import dlpack, driver, streams

_torch_dtypes: dict[Any, DType] = {}


class DeviceArray:
    """A contiguous array in GPU memory, as one kernel argument.

    `strides` are in elements (row-major: the last is 1 unless that dimension has extent 1);
    `owner` keeps the memory alive for as long as this object lives (the original array, and the
    DLPack capsule when one was used)."""

    __slots__ = ("address", "shape", "strides", "dtype", "device", "nbytes", "owner")

    def __init__(
        self,
        address: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: DType,
        device: int,
        owner: Any = None,
    ):
        self.address = address
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.owner = owner
        count = 1
        for extent in shape:
            count *= extent
        self.nbytes = (count * dtype.bits + 7) // 8

    def __repr__(self) -> str:
        return (
            f"DeviceArray(address={self.address:#x}, shape={self.shape}, strides={self.strides}, "
            f"dtype={self.dtype}, device=cuda:{self.device})"
        )


def argument_label(name: str | int) -> str:
    """How errors name an argument: `argument 'x'` or, by position, `argument 2`."""
    return f"argument {name}" if isinstance(name, int) else f"argument {name!r}"


def device_array(value: Any, name: str | int = 0, *, stream: Any = None) -> DeviceArray:
    """The `DeviceArray` view of a GPU array passed as kernel argument `name`.

    `stream` is the stream the kernel will run on: a DLPack producer is asked to make its pending
    work visible there, and a CUDA Array Interface v3 producer stream is made to precede it.
    Raises `ArgumentError` for host arrays, non-contiguous or misaligned arrays and element types
    asyncdsl cannot move."""
    if isinstance(value, DeviceArray):
        _validated(value.address, value.shape, value.strides, value.dtype, value.device, name, value.owner)
        return value
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _from_torch(torch, value, name)
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        return _from_dlpack(value, name, stream)
    try:
        interface = value.__cuda_array_interface__
    except AttributeError:
        interface = None
    if interface is not None:
        return _from_cuda_array_interface(value, interface, name, stream)
    if (hasattr(value, "__array_interface__") or hasattr(value, "__array__")
            or isinstance(value, (list, tuple))):
        raise _host_array_error(value, name)
    raise ArgumentError(
        f"{argument_label(name)} is a {type(value).__qualname__}, not an array: pass a GPU array "
        "(torch, CuPy, JAX, or anything with __dlpack__ or __cuda_array_interface__)",
        user_location(),
    )


def _host_array_error(value: Any, name: str | int, where: str = "in host (CPU) memory") -> ArgumentError:
    return ArgumentError(
        f"{argument_label(name)} is a {type(value).__module__}.{type(value).__qualname__} {where}; "
        "pass a GPU array, or use kernel.interpret(...) to run the kernel on the CPU",
        user_location(),
    )


def _from_torch(torch: Any, tensor: Any, name: str | int) -> DeviceArray:
    if not tensor.is_cuda:
        raise _host_array_error(tensor, name, f"on device {tensor.device}")
    if tensor.layout is not torch.strided:  # sparse tensors have no data pointer nor strides to read
        raise ArgumentError(
            f"{argument_label(name)} is a {tensor.layout} tensor; kernels take dense (strided) tensors: "
            "pass x.to_dense()",
            user_location(),
        )
    return _validated(
        tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()), torch_dtype(tensor, name),
        tensor.get_device(), name, tensor
    )


def torch_dtype(tensor: Any, name: str | int) -> DType:
    """The element type of torch tensor `tensor`, passed as argument `name`: torch's of the same
    name, bool as uint8 (booleans travel as bytes, as numpy's do); `ArgumentError` for one
    asyncdsl cannot move."""
    dtype = _torch_dtypes.get(tensor.dtype)
    if dtype is None:
        # str(torch.bfloat16) == "torch.bfloat16"; as_dtype knows the part after the dot.
        text = str(tensor.dtype).rsplit(".", 1)[-1]
        dtype = _checked_dtype(lambda: as_dtype(np.bool_ if text == "bool" else text), tensor.dtype, name)
        if dtype.bits != 8 * tensor.element_size():
            # torch.uint4 and torch.int4 hold one value a byte, where asyncdsl's pack two a byte:
            # read as packed, a tensor would be taken for the first half of its bytes.
            raise ArgumentError(
                f"{argument_label(name)} has element type {tensor.dtype}, one {dtype.bits}-bit value a byte, "
                f"but asyncdsl's {dtype} is packed two a byte: pack the values (asyncdsl.hw.packed.pack) "
                f"and pass the bytes as a DeviceArray of {dtype}",
                user_location(),
            )
        _torch_dtypes[tensor.dtype] = dtype
    return dtype


def _from_dlpack(value: Any, name: str | int, stream: Any) -> DeviceArray:
    device_type, device_id = value.__dlpack_device__()
    if device_type not in (dlpack.DL_CUDA, dlpack.DL_CUDA_MANAGED):
        where = dlpack.DEVICE_TYPE_NAMES.get(int(device_type), f"DLPack device type {int(device_type)}")
        raise _host_array_error(value, name, f"in {where} memory")
    capsule = dlpack.export_capsule(value, streams.dlpack_stream(streams.stream_handle(stream)))
    view = dlpack.read_capsule(capsule)
    if view.lanes != 1:
        raise ArgumentError(
            f"{argument_label(name)} has vector elements ({view.lanes} lanes), which asyncdsl cannot move",
            user_location(),
        )
    shown = f"DLPack code {view.type_code}, {view.bits} bits"
    dtype = _checked_dtype(lambda: from_dlpack(view.type_code, view.bits), shown, name)
    strides = view.strides if view.strides is not None else contiguous_strides(view.shape)
    return _validated(view.address, view.shape, strides, dtype, view.device_id, name, (value, capsule))


def _from_cuda_array_interface(value: Any, interface: dict, name: str | int, stream: Any) -> DeviceArray:
    label = argument_label(name)
    if interface.get("mask") is not None:
        raise ArgumentError(f"{label} is a masked array, which asyncdsl cannot take", user_location())
    shape = tuple(int(extent) for extent in interface["shape"])
    address = int(interface["data"][0])
    typestr = interface["typestr"]
    dtype = _checked_dtype(lambda: _dtype_from_typestr(typestr), f"typestr {typestr!r}", name)
    byte_strides = interface.get("strides")
    if byte_strides is None:
        strides = contiguous_strides(shape)
    elif all(stride % dtype.itemsize == 0 for stride in byte_strides):
        strides = tuple(int(stride) // dtype.itemsize for stride in byte_strides)
    else:
        raise _layout_error(label, shape, f"byte strides {tuple(byte_strides)}")
    producer = interface.get("stream") if interface.get("version", 0) >= 3 else None
    if producer is not None:
        streams.wait_for_stream(streams.stream_handle(stream), streams.stream_handle(producer))
    device = driver.pointer_device(address) if address else 0
    return _validated(address, shape, strides, dtype, device, name, value)


def _dtype_from_typestr(typestr: str) -> DType:
    np_dtype = np.dtype(typestr)
    if np_dtype.byteorder == ">":
        raise ArgumentError(f"big-endian element type {typestr!r} is not supported")
    if np_dtype.kind == "V":
        # '<V2' is what bfloat16 and friends look like through the interface: ambiguous.
        raise ArgumentError(f"opaque element type {typestr!r} (pass the array through DLPack instead)")
    return as_dtype(np_dtype)


def _checked_dtype(make: Callable[[], DType], shown: Any, name: str | int) -> DType:
    """`make()`, with any failure reported as an unsupported element type of argument `name`."""
    try:
        return make()
    except (ArgumentError, TypeError) as error:
        reason = error.message if isinstance(error, ArgumentError) else str(error)
        raise ArgumentError(
            f"{argument_label(name)} has element type {shown}, which asyncdsl cannot move ({reason})",
            user_location(),
        ) from None


def _layout_error(label: str, shape: tuple[int, ...], found: str) -> ArgumentError:
    return ArgumentError(
        f"{label} is not contiguous (row-major): shape {shape} with {found}, expected element strides "
        f"{contiguous_strides(shape)}; pass a contiguous copy (e.g. x.contiguous() or "
        "cupy.ascontiguousarray(x))",
        user_location(),
    )


def _validated(
    address: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: DType,
    device: int,
    name: str | int,
    owner: Any,
) -> DeviceArray:
    if 0 not in shape:
        step = 1
        for extent, stride in zip(reversed(shape), reversed(strides)):
            if extent != 1 and stride != step:
                raise _layout_error(argument_label(name), shape, f"element strides {strides}")
            step *= extent
    check_alignment(address, name)
    return DeviceArray(address, shape, strides, dtype, device, owner)


def check_alignment(address: int, name: str | int, location=None) -> None:
    """An argument's base address must be 16-byte aligned (TMA and bulk copies need it): the same
    rule on the GPU and in the interpreter."""
    if address % GMEM_ADDRESS_ALIGNMENT:
        raise ArgumentError(
            f"{argument_label(name)} starts at address {address:#x}, which is not "
            f"{GMEM_ADDRESS_ALIGNMENT}-byte aligned (it is {address % GMEM_ADDRESS_ALIGNMENT} bytes past a "
            "boundary; the tensor memory accelerator needs 16): it is probably a view at an offset, pass a "
            "fresh array or a copy",
            location or user_location(),
        )
