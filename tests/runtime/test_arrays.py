"""How kernel arguments become `DeviceArray`s without a GPU: `__cuda_array_interface__`, DLPack
capsules and torch tensors (a stand-in module), with `driver.pointer_device` and
`streams.wait_for_stream` replaced by fakes."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from runtime_fakes import TorchLikeStream

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError
from asyncdsl.runtime import (
    DeviceArray,
    arrays,
    device_array,
    dlpack,
    driver,
    streams,
)

# ----------------------------------------------------------------------------------------- arrays


def _aligned_numpy(shape, dtype, offset=0):
    """A numpy array whose data starts `offset` bytes past a 64-byte boundary."""
    count = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(count + 128, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + count].view(dtype).reshape(shape)


class _FakeCudaArray:
    """Exposes the CUDA Array Interface (v2 or v3) over made-up device addresses."""

    def __init__(self, shape, typestr="<f4", address=0x7F0000000000, strides=None, version=3, **extra):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": typestr, "data": (address, False), "strides": strides,
            "version": version, **extra,
        }


@pytest.fixture
def devices(monkeypatch):
    """`driver.pointer_device` answers from this dict (address -> ordinal), default device 0."""
    owners: dict[int, int] = {}
    monkeypatch.setattr(driver, "pointer_device", lambda address: owners.get(address, 0))
    return owners


@pytest.fixture
def stream_waits(monkeypatch):
    calls = []
    monkeypatch.setattr(streams, "wait_for_stream",
                        lambda consumer, producer: calls.append((consumer, producer)))
    return calls


def test_cuda_array_interface_contiguous(devices):
    source = _FakeCudaArray((4, 8), "<f4", version=2)
    array = device_array(source, "x")
    assert (array.address, array.shape, array.strides) == (0x7F0000000000, (4, 8), (8, 1))
    assert array.dtype is dtypes.float32 and array.device == 0 and array.nbytes == 128
    assert array.owner is source
    explicit = device_array(_FakeCudaArray((4, 8), "<u2", strides=(16, 2)), "x")
    assert explicit.strides == (8, 1) and explicit.dtype is dtypes.uint16
    unit_dim = device_array(_FakeCudaArray((4, 1, 8), "<f4", strides=(32, 4000, 4)), "x")
    assert unit_dim.strides == (8, 1000, 1)  # a unit dimension's stride does not matter


def test_cuda_array_interface_device_comes_from_the_pointer(devices):
    devices[0x7F0000000000] = 1
    assert device_array(_FakeCudaArray((16,), "<f4"), "x").device == 1


@pytest.mark.parametrize(
    "source, message",
    [
        (_FakeCudaArray((4, 8), "<f4", strides=(4, 16)),
         r"argument 'x' is not contiguous \(row-major\): shape \(4, 8\)"),
        (_FakeCudaArray((4, 8), "<f4", strides=(64, 4)), r"expected element strides \(8, 1\)"),
        (_FakeCudaArray((4, 8), "<f4", strides=(32, 6)), "byte strides"),
        (_FakeCudaArray((16,), "<f4", address=0x7F0000000008), "not 16-byte aligned"),
        (_FakeCudaArray((16,), "<c8"), "element type typestr '<c8'.*cannot move"),
        (_FakeCudaArray((16,), ">f4"), "big-endian"),
        (_FakeCudaArray((16,), "<V2"), "opaque element type"),
        (_FakeCudaArray((16,), "<f4", mask=object()), "masked array"),
    ],
)
def test_cuda_array_interface_errors(devices, source, message):
    with pytest.raises(ArgumentError, match=message):
        device_array(source, "x")


def test_positional_argument_names(devices):
    with pytest.raises(ArgumentError, match="argument 2 starts at address"):
        device_array(_FakeCudaArray((16,), "<f4", address=0x7F0000000004), 2)


def test_cuda_array_interface_v3_stream_is_waited_for(devices, stream_waits):
    device_array(_FakeCudaArray((16,), "<f4", stream=0x77), "x")
    device_array(_FakeCudaArray((16,), "<f4", stream=1), "x", stream=TorchLikeStream())
    device_array(_FakeCudaArray((16,), "<f4", stream=None), "x")
    device_array(_FakeCudaArray((16,), "<f4", version=2, stream=0x77), "x")  # v2 has no stream
    assert stream_waits == [(0, 0x77), (0x1234, 0)]


def test_host_arrays_are_refused_with_a_way_out():
    with pytest.raises(ArgumentError, match=r"argument 'a' is a numpy.ndarray in CPU memory; pass a GPU "
                                             r"array, or use kernel.interpret\(...\)"):
        device_array(np.zeros(16, np.float32), "a")
    with pytest.raises(ArgumentError, match="host"):
        device_array([1.0, 2.0], "a")
    with pytest.raises(ArgumentError, match="is a object, not an array"):
        device_array(object(), "a")


def test_device_arrays_pass_through():
    array = DeviceArray(0x1000, (4,), (1,), dtypes.int32, 0)
    assert device_array(array) is array
    assert "0x1000" in repr(array)


# ----------------------------------------------------------------------------------------- DLPack


@pytest.mark.parametrize("versioned", [True, False])
def test_read_capsule_of_a_strided_view(versioned):
    base = _aligned_numpy((6, 8), np.float32)
    view = base[1:, ::2]
    capsule = view.__dlpack__(max_version=(1, 0)) if versioned else view.__dlpack__()
    tensor = dlpack.read_capsule(capsule)
    assert tensor.address == view.ctypes.data
    assert tensor.shape == (5, 4)
    assert tensor.strides == (8, 2)
    assert (tensor.type_code, tensor.bits, tensor.lanes) == (2, 32, 1)
    assert (tensor.device_type, tensor.device_id) == (dlpack.DL_CPU, 0)


def test_read_capsule_rejects_other_objects():
    with pytest.raises(TypeError, match="not an unconsumed DLPack capsule"):
        dlpack.read_capsule(object())


class _FakeDLPackGpuArray:
    """Claims to live on cuda:`device` while exporting a numpy array's capsule: enough to drive
    the DLPack intake without a GPU (no memory is ever touched)."""

    def __init__(self, host, device=0, legacy=False):
        self.host, self.device, self.legacy, self.streams = host, device, legacy, []

    def __dlpack_device__(self):
        return (dlpack.DL_CUDA, self.device)

    def __dlpack__(self, *, stream=None, **versioning):
        if self.legacy and versioning:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.streams.append(stream)
        return self.host.__dlpack__(**versioning)


@pytest.mark.parametrize("legacy", [False, True])
def test_dlpack_intake(legacy):
    host = _aligned_numpy((4, 8), np.int16)
    source = _FakeDLPackGpuArray(host, device=0, legacy=legacy)
    array = device_array(source, "x")
    assert (array.address, array.shape, array.strides) == (host.ctypes.data, (4, 8), (8, 1))
    assert array.dtype is dtypes.int16 and array.device == 0 and array.nbytes == 64
    assert array.owner[0] is source and type(array.owner[1]).__name__ == "PyCapsule"
    device_array(source, "x", stream=0x1234)
    assert source.streams == [1, 0x1234]  # the consumer's stream, 0 spelled as DLPack's 1


def test_dlpack_intake_errors():
    with pytest.raises(ArgumentError, match="not contiguous"):
        device_array(_FakeDLPackGpuArray(_aligned_numpy((4, 8), np.float32)[:, ::2]), "x")
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        device_array(_FakeDLPackGpuArray(_aligned_numpy((8,), np.float32, offset=4)), "x")
    with pytest.raises(ArgumentError, match="element type DLPack code 5"):
        device_array(_FakeDLPackGpuArray(_aligned_numpy((8,), np.complex64)), "x")

    class Rocm(_FakeDLPackGpuArray):
        def __dlpack_device__(self):
            return (10, 0)

    with pytest.raises(ArgumentError, match="ROCm memory"):
        device_array(Rocm(_aligned_numpy((8,), np.float32)), "x")


# ------------------------------------------------------------------------ torch (a stand-in module)


class _FakeTorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


# Bytes a torch element takes (torch's 4-bit integer types hold one value a byte).
_ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "bool": 1, "float8_e4m3fn": 1, "complex64": 8, "uint4": 1,
                  "int4": 1}


class _FakeTensor:
    layout = "torch.strided"

    def __init__(self, shape, strides, dtype="float32", is_cuda=True, device=0, address=0x7F0000001000):
        self.shape, self._strides, self.dtype = shape, strides, _FakeTorchDtype(dtype)
        self.is_cuda, self._device, self._address = is_cuda, device, address
        self.device = f"cuda:{device}" if is_cuda else "cpu"

    def stride(self):
        return self._strides

    def element_size(self):
        return _ELEMENT_BYTES[self.dtype.name]

    def data_ptr(self):
        return self._address

    def get_device(self):
        return self._device if self.is_cuda else -1


@pytest.fixture
def fake_torch(monkeypatch):
    module = types.ModuleType("torch")
    module.Tensor = _FakeTensor
    module.strided = _FakeTensor.layout
    monkeypatch.setitem(sys.modules, "torch", module)
    monkeypatch.setattr(arrays, "_torch_dtypes", {})


def test_torch_fast_path(fake_torch):
    array = device_array(_FakeTensor((2, 3, 8), (24, 8, 1), "bfloat16", device=1), "w")
    assert (array.address, array.shape, array.strides) == (0x7F0000001000, (2, 3, 8), (24, 8, 1))
    assert array.dtype is dtypes.bfloat16 and array.device == 1 and array.nbytes == 96
    assert device_array(_FakeTensor((4,), (1,), "bool"), "w").dtype is dtypes.uint8
    assert device_array(_FakeTensor((4,), (1,), "float8_e4m3fn"), "w").dtype is dtypes.float8_e4m3fn


def test_torch_errors(fake_torch):
    with pytest.raises(ArgumentError,
                       match=r"argument 'w' is a .*_FakeTensor on device cpu; pass a GPU array"):
        device_array(_FakeTensor((4,), (1,), is_cuda=False), "w")
    with pytest.raises(ArgumentError, match="not contiguous"):
        device_array(_FakeTensor((4, 8), (1, 4)), "w")
    with pytest.raises(ArgumentError, match="element type torch.complex64"):
        device_array(_FakeTensor((4,), (1,), "complex64"), "w")
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        device_array(_FakeTensor((4,), (1,), address=0x7F0000001002), "w")


def test_torch_sparse_tensors_are_refused(fake_torch):
    class SparseTensor(_FakeTensor):
        layout = "torch.sparse_coo"

        def data_ptr(self):  # as torch's sparse tensors do
            raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    with pytest.raises(ArgumentError, match=r"argument 'w' is a torch.sparse_coo tensor; kernels take dense"):
        device_array(SparseTensor((4, 4), (0, 0)), "w")


@pytest.mark.parametrize("name", ["uint4", "int4"])
def test_torch_4_bit_integers_are_refused(fake_torch, name):
    # torch holds them one a byte: described as asyncdsl's packed type, the kernel would read the
    # first half of the tensor's bytes as all of its values.
    with pytest.raises(ArgumentError, match=rf"argument 'q' has element type torch.{name}, one 4-bit value "
                                            rf"a byte, but asyncdsl's {name} is packed two a byte"):
        device_array(_FakeTensor((64,), (1,), name), "q")
