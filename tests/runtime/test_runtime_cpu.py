"""The runtime's host-side logic, without a GPU: driver errors, array intake, stream handles,
tensor-map spec checks, the cubin disk cache, parameter packing and grid checks.

Everything that would touch the driver is replaced by a fake at the module boundary it crosses
(`driver.pointer_device`, `streams.wait_for_stream`, the tensor-map encode function, the scratch
pool), so these tests pass the same with and without a GPU.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import types
import warnings

import numpy as np
import pytest

from asyncdsl import dtypes
from asyncdsl.errors import (
    ArgumentError,
    AsyncDSLError,
    CopyError,
    CudaError,
    ResourceError,
    UnsupportedTargetError,
)
from asyncdsl.hw.tma import view_extent_bytes
from asyncdsl.kernel_binary import (
    DescriptorScratchParam,
    Im2colTensorMapSpec,
    KernelBinary,
    PointerParam,
    TensorMapParam,
    TiledTensorMapSpec,
)
from asyncdsl.runtime import (
    DeviceArray,
    arrays,
    device_array,
    dlpack,
    driver,
    has_gpu,
    host_seconds_per_call,
    launch,
    launch_grid,
    module_cache,
    params,
    streams,
    tensormap,
)

F32 = dtypes.TMA_FLOAT32

# ----------------------------------------------------------------------------------------- driver


def test_has_gpu_answers_a_bool_and_caches_it():
    first = has_gpu()
    assert first in (True, False)
    assert has_gpu() is first


def test_has_gpu_is_false_and_silent_without_a_driver(monkeypatch):
    monkeypatch.setattr(driver, "_gpu_usable", None)

    def no_driver(device=0):
        raise CudaError("cuInit failed: the CUDA driver library could not be loaded")

    monkeypatch.setattr(driver, "activate", no_driver)
    assert driver.has_gpu() is False


def test_has_gpu_is_false_without_cuda_python(monkeypatch):
    monkeypatch.setattr(driver, "_gpu_usable", None)
    monkeypatch.setattr(driver, "_driver_module", None)
    monkeypatch.setattr(driver, "_initialized", False)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # makes the import fail
    assert driver.has_gpu() is False
    with pytest.raises(CudaError, match="cuda-python is not installed"):
        driver.api()


def test_check_unpacks_results_and_names_failures():
    cu = driver.api()
    success = cu.CUresult.CUDA_SUCCESS
    assert driver.check((success,), "cuFoo") is None
    assert driver.check((success, 7), "cuFoo") == 7
    assert driver.check((success, 7, 8), "cuFoo") == (7, 8)
    with pytest.raises(CudaError) as caught:
        driver.check((cu.CUresult.CUDA_ERROR_INVALID_VALUE, None), "cuTensorMapEncodeTiled")
    assert caught.value.message.startswith("cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE")
    assert caught.value.code == 1
    assert isinstance(caught.value, AsyncDSLError) and isinstance(caught.value, ValueError)


# ---------------------------------------------------------------------------------------- streams


class _TorchLikeStream:
    cuda_stream = 0x1234


class _CupyLikeStream:
    ptr = 0x5678


class _CoreLikeStream:
    def __cuda_stream__(self):
        return (0, 0x9ABC)


def test_stream_handles_from_every_spelling():
    cu = driver.api()
    assert streams.stream_handle(None) == 0
    assert streams.stream_handle(0) == 0
    assert streams.stream_handle(1) == 0  # CU_STREAM_LEGACY is the same stream as 0
    assert streams.stream_handle(2) == 2
    assert streams.stream_handle(0xABC) == 0xABC
    assert streams.stream_handle(np.uint64(0xABC)) == 0xABC
    assert streams.stream_handle(cu.CUstream(0xDEF)) == 0xDEF
    assert streams.stream_handle(_TorchLikeStream()) == 0x1234
    assert streams.stream_handle(_CupyLikeStream()) == 0x5678
    assert streams.stream_handle(_CoreLikeStream()) == 0x9ABC
    assert streams.dlpack_stream(0) == 1 and streams.dlpack_stream(0x1234) == 0x1234


def test_stream_handle_rejects_what_is_not_a_stream():
    with pytest.raises(ArgumentError, match="cannot use 'main' as a CUDA stream"):
        streams.stream_handle("main")
    with pytest.raises(ArgumentError, match="negative"):
        streams.stream_handle(-3)


def test_waiting_for_the_same_stream_does_nothing():
    streams.wait_for_stream(0, 0)  # no driver call: would fail on a machine without one
    streams.wait_for_stream(0x1234, 0x1234)


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
    monkeypatch.setattr(streams, "wait_for_stream", lambda consumer, producer: calls.append((consumer, producer)))
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
    device_array(_FakeCudaArray((16,), "<f4", stream=1), "x", stream=_TorchLikeStream())
    device_array(_FakeCudaArray((16,), "<f4", stream=None), "x")
    device_array(_FakeCudaArray((16,), "<f4", version=2, stream=0x77), "x")  # v2 has no stream
    assert stream_waits == [(0, 0x77), (0x1234, 0)]


def test_host_arrays_are_refused_with_a_way_out():
    with pytest.raises(ArgumentError, match=r"argument 'a' is a numpy.ndarray in CPU memory; pass a GPU array, "
                                             r"or use kernel.interpret\(...\)"):
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


class _FakeTensor:
    def __init__(self, shape, strides, dtype="float32", is_cuda=True, device=0, address=0x7F0000001000):
        self.shape, self._strides, self.dtype = shape, strides, _FakeTorchDtype(dtype)
        self.is_cuda, self._device, self._address = is_cuda, device, address
        self.device = f"cuda:{device}" if is_cuda else "cpu"

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._address

    def get_device(self):
        return self._device if self.is_cuda else -1


@pytest.fixture
def fake_torch(monkeypatch):
    module = types.ModuleType("torch")
    module.Tensor = _FakeTensor
    monkeypatch.setitem(sys.modules, "torch", module)
    monkeypatch.setattr(arrays, "_torch_dtypes", {})


def test_torch_fast_path(fake_torch):
    array = device_array(_FakeTensor((2, 3, 8), (24, 8, 1), "bfloat16", device=1), "w")
    assert (array.address, array.shape, array.strides) == (0x7F0000001000, (2, 3, 8), (24, 8, 1))
    assert array.dtype is dtypes.bfloat16 and array.device == 1 and array.nbytes == 96
    assert device_array(_FakeTensor((4,), (1,), "bool"), "w").dtype is dtypes.uint8
    assert device_array(_FakeTensor((4,), (1,), "float8_e4m3fn"), "w").dtype is dtypes.float8_e4m3fn


def test_torch_errors(fake_torch):
    with pytest.raises(ArgumentError, match=r"argument 'w' is a .*_FakeTensor on device cpu; pass a GPU array"):
        device_array(_FakeTensor((4,), (1,), is_cuda=False), "w")
    with pytest.raises(ArgumentError, match="not contiguous"):
        device_array(_FakeTensor((4, 8), (1, 4)), "w")
    with pytest.raises(ArgumentError, match="element type torch.complex64"):
        device_array(_FakeTensor((4,), (1,), "complex64"), "w")
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        device_array(_FakeTensor((4,), (1,), address=0x7F0000001002), "w")


# ------------------------------------------------------------------------------------ tensor maps


def _tiled(**changes):
    fields = dict(arg_index=1, dtype_code=F32, element_bytes=4, global_dims=(256, 192), global_strides=(768, 4),
                  box_dims=(64, 32), swizzle_bytes=128)
    fields.update(changes)
    return TiledTensorMapSpec(**fields)


def _im2col(**changes):
    fields = dict(arg_index=0, dtype_code=dtypes.TMA_BFLOAT16, element_bytes=2, global_dims=(2, 16, 16, 64),
                  global_strides=(16 * 16 * 64 * 2, 16 * 64 * 2, 64 * 2, 2), lower_corner=(-1, -1),
                  upper_corner=(-1, -1), channels_per_pixel=64, pixels_per_column=128, swizzle_bytes=128)
    fields.update(changes)
    return Im2colTensorMapSpec(**fields)


def test_valid_specs_pass():
    tensormap.validate_spec(_tiled())
    tensormap.validate_spec(_tiled(global_dims=(7,), global_strides=(4,), box_dims=(4,), swizzle_bytes=0))
    tensormap.validate_spec(_tiled(element_strides=(2, 1), oob_nan=True, l2_promotion_bytes=256))
    tensormap.validate_spec(_im2col())


@pytest.mark.parametrize(
    "spec, message",
    [
        (_tiled(global_dims=(1,) * 6, global_strides=(16,) * 5 + (4,), box_dims=(1,) * 6),
         "a tiled TMA descriptor has rank 1 to 5, not 6"),
        (_tiled(box_dims=(300, 32)), "TMA box dimension 300 > 256 along dim 0"),
        (_tiled(box_dims=(64, 0)), "TMA box dimension 0 < 1 along dim 1"),
        (_tiled(global_strides=(1000, 4)), "TMA global stride 1000 bytes along dim 0 is not a multiple of 16"),
        (_tiled(global_strides=(1 << 40, 4)), "outside 1 .. 2"),
        (_tiled(global_dims=(0, 192)), "TMA global dimension 0 along dim 0"),
        (_tiled(box_dims=(64, 64)), "spans 256 bytes, more than the 128-byte swizzle span"),
        (_tiled(box_dims=(64, 3), swizzle_bytes=0), "spans 12 bytes .3 x 4.; TMA needs a multiple of 16"),
        (_tiled(dtype_code=13), "TMA data type code 13 is not one Hopper supports"),
        (_tiled(element_bytes=2), "element size 2 bytes does not match TMA data type code 7"),
        (_tiled(global_strides=(768, 8)), "innermost global stride is 8 bytes"),
        (_tiled(global_strides=(4,)), "1 global strides for 2 dims"),
        (_tiled(box_dims=(64,)), "1 box dims for 2 global dims"),
        (_tiled(element_strides=(9, 1)), "TMA element stride 9 along dim 0 is outside 1 .. 8"),
        (_tiled(element_strides=(1,)), "1 element strides for 2 dims"),
        (_tiled(swizzle_bytes=16), "swizzle of 16 bytes"),
        (_tiled(l2_promotion_bytes=32), "L2 promotion of 32 bytes"),
        (_tiled(dtype_code=dtypes.TMA_UINT32, oob_nan=True), "NaN out-of-bounds fill needs a floating-point"),
        (_tiled(base_offset_bytes=8), "base offset 8 bytes is not a non-negative multiple of 16"),
        (_im2col(global_dims=(16, 64), global_strides=(128, 2)), "an im2col TMA descriptor has rank 3 to 5, not 2"),
        (_im2col(lower_corner=(-1,)), "the lower corner has 1 entries; a rank-4 im2col map has 2 spatial dims"),
        (_im2col(upper_corner=(0, 128)), r"upper corner offset 128 along spatial dim 1 is outside -128 .. 127"),
        (_im2col(channels_per_pixel=300), "300 channels per pixel is outside 1 .. 256"),
        (_im2col(pixels_per_column=2000), "2000 pixels per column is outside 1 .. 1024"),
        (_im2col(channels_per_pixel=128), "128 channels per pixel span 256 bytes, more than the 128-byte"),
    ],
)
def test_spec_rules_are_named(spec, message):
    with pytest.raises(CopyError, match=message) as caught:
        tensormap.validate_spec(spec, index=3)
    kind = "im2col" if isinstance(spec, Im2colTensorMapSpec) else "tiled"
    assert caught.value.message.startswith(f"TMA descriptor 3 ({kind}, argument {spec.arg_index}): ")


def test_footprint_is_the_reach_of_the_descriptor():
    assert view_extent_bytes(_tiled()) == 256 * 192 * 4
    assert view_extent_bytes(_tiled(global_dims=(4, 8), global_strides=(256, 4), base_offset_bytes=64)) \
        == 64 + 3 * 256 + 7 * 4 + 4


def test_encode_arguments_are_innermost_first():
    tiled = tensormap.encode_arguments(_tiled(element_strides=(2, 1), l2_promotion_bytes=128, oob_nan=True))
    assert (tiled.data_type, tiled.rank) == (F32, 2)
    assert tiled.global_dims == (192, 256) and tiled.global_strides == (768,) and tiled.box_dims == (32, 64)
    assert tiled.element_strides == (1, 2)
    assert (tiled.swizzle, tiled.l2_promotion, tiled.oob_fill) == (3, 2, 1)
    im2col = tensormap.encode_arguments(_im2col(lower_corner=(-2, -1), upper_corner=(1, 0)))
    assert im2col.global_dims == (64, 16, 16, 2)
    assert im2col.global_strides == (128, 16 * 64 * 2, 16 * 16 * 64 * 2)
    assert im2col.lower_corner == (-1, -2) and im2col.upper_corner == (0, 1)  # (W, H), as the driver wants
    assert (im2col.channels_per_pixel, im2col.pixels_per_column, im2col.element_strides) == (64, 128, (1, 1, 1, 1))


def test_encoder_builds_driver_arguments_and_checks_the_address():
    encoder = tensormap.TensorMapEncoder(_tiled(), index=2)
    with pytest.raises(CopyError, match=r"TMA descriptor 2 .*global address 0x7f0000000008 is not 16-byte aligned"):
        encoder.encode(0x7F0000000008)
    with pytest.raises(CopyError, match="box dimension 300"):
        tensormap.TensorMapEncoder(_tiled(box_dims=(300, 32)))


def test_a_rank_1_map_passes_the_driver_one_stride():
    # An empty list reaches the driver as a null pointer, which it refuses even at rank 1 (H200).
    encoder = tensormap.TensorMapEncoder(_tiled(global_dims=(20,), global_strides=(4,), box_dims=(16,)))
    dims, strides = encoder._tail[:2]
    assert [int(d) for d in dims] == [20] and [int(s) for s in strides] == [80]


def _fake_image(index, address):
    """128 recognisable bytes standing for descriptor `index` encoded at `address`."""
    return struct.pack("<QQ", index, address) * 8


def test_tensor_map_cache_encodes_each_address_once(monkeypatch):
    spec = _tiled(base_offset_bytes=256)
    cache = tensormap.TensorMapCache(spec, lambda address: _fake_image(5, address))
    first = cache.image(0x10000)
    assert first.address % 64 == 0 and first.data() == _fake_image(5, 0x10000 + 256)
    assert cache.image(0x10000) is first and cache.encode_count == 1
    cache.image(0x20000)
    assert cache.encode_count == 2
    monkeypatch.setattr(cache, "capacity", 2)
    cache.image(0x30000)
    assert set(cache.images) == {0x30000}


# ---------------------------------------------------------------------------------- cubin cache

PTX = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def test_cubin_key_is_stable_and_covers_every_input():
    key = module_cache.cubin_key(".version 8.0\n", "sm_90a", 13000, "nvjitlink-13.0")
    assert key == "b75be58f648c55056becbb70fccdf8326fbad13cd69d24fdd9a16feeadb174b5"
    variants = {
        module_cache.cubin_key(".version 8.1\n", "sm_90a", 13000, "nvjitlink-13.0"),
        module_cache.cubin_key(".version 8.0\n", "sm_90", 13000, "nvjitlink-13.0"),
        module_cache.cubin_key(".version 8.0\n", "sm_90a", 13010, "nvjitlink-13.0"),
        module_cache.cubin_key(".version 8.0\n", "sm_90a", 13000, "driver-linker-13000"),
    }
    assert key not in variants and len(variants) == 4


def test_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "c"))
    assert module_cache.cache_directory() == tmp_path / "c" / "cubin"
    monkeypatch.delenv("ASYNCDSL_CACHE_DIR")
    assert module_cache.cache_directory() == module_cache.Path.home() / ".cache" / "asyncdsl" / "cubin"


class _FakeCompiler:
    def __init__(self):
        self.calls = 0

    def compile(self, ptx, arch, name):
        self.calls += 1
        return b"\x7fELF" + f"{arch}:{name}:{len(ptx)}".encode()


def _compile(compiler, directory, ptx=PTX):
    return module_cache.cached_compile(ptx, "sm_90a", "k", compiler.compile, "fake-1", 13000,
                                       module_cache.CubinCache(directory))


def test_second_compile_hits_the_disk_cache(tmp_path):
    compiler = _FakeCompiler()
    cubin, hit = _compile(compiler, tmp_path)
    assert (cubin, hit, compiler.calls) == (b"\x7fELFsm_90a:k:45", False, 1)
    key = module_cache.cubin_key(PTX, "sm_90a", 13000, "fake-1")
    stored = (tmp_path / key[:2] / f"{key}.cubin").read_bytes()
    assert stored.endswith(cubin) and stored.startswith(b"asyncdsl-cubin-2")  # a checked header, then the cubin
    assert not [path for path in tmp_path.rglob("*") if path.suffix == ".tmp"]
    again, hit = _compile(compiler, tmp_path)  # a new CubinCache: no state but the files
    assert (again, hit, compiler.calls) == (cubin, True, 1)
    _, hit = _compile(compiler, tmp_path, PTX + "// changed\n")
    assert (hit, compiler.calls) == (False, 2)


def test_a_corrupt_cache_file_is_recompiled(tmp_path):
    compiler = _FakeCompiler()
    cubin, _ = _compile(compiler, tmp_path)
    key = module_cache.cubin_key(PTX, "sm_90a", 13000, "fake-1")
    (tmp_path / key[:2] / f"{key}.cubin").write_bytes(b"garbage")
    again, hit = _compile(compiler, tmp_path)
    assert (again, hit, compiler.calls) == (cubin, False, 2)
    assert _compile(compiler, tmp_path)[1] is True


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "extended", "bare ELF"])
def test_a_damaged_cache_file_is_a_miss_and_is_replaced(tmp_path, damage):
    compiler = _FakeCompiler()
    cubin, _ = _compile(compiler, tmp_path)
    key = module_cache.cubin_key(PTX, "sm_90a", 13000, "fake-1")
    path = tmp_path / key[:2] / f"{key}.cubin"
    stored = path.read_bytes()
    damaged = {
        "truncated": stored[:-3],  # still a header and the start of an ELF image
        "flipped byte": stored[:-1] + bytes([stored[-1] ^ 1]),
        "extended": stored + b"\0",
        "bare ELF": cubin,  # a file in the old format, no header
    }[damage]
    path.write_bytes(damaged)
    again, hit = _compile(compiler, tmp_path)
    assert (again, hit, compiler.calls) == (cubin, False, 2)
    assert path.read_bytes() == stored
    assert _compile(compiler, tmp_path)[1] is True


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def crash(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(module_cache.os, "replace", crash)
    compiler = _FakeCompiler()
    with pytest.warns(RuntimeWarning, match="could not cache a cubin.*disk full"):
        cubin, hit = _compile(compiler, tmp_path)
    assert cubin.startswith(b"\x7fELF") and hit is False
    assert [path for path in tmp_path.rglob("*") if path.is_file()] == []


def test_an_unwritable_cache_only_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="ASYNCDSL_CACHE_DIR"):
        cubin, hit = _compile(_FakeCompiler(), blocker / "cache")
    assert cubin.startswith(b"\x7fELF") and hit is False


# ------------------------------------------------------------------------------- parameter packing


class _FakeUpload:
    """A scratch 'upload' into host memory, so the test can read the bytes back."""

    def __init__(self, image, stream):
        self._buffer = ctypes.create_string_buffer(image, len(image))
        self.address = ctypes.addressof(self._buffer)
        self.streams = {stream}
        self.ordered = []

    def order_before(self, stream):
        self.ordered.append(stream)
        self.streams.add(stream)


class _FakePool:
    def __init__(self):
        self.uploads, self.releases = [], 0

    def upload(self, image, stream):
        self.uploads.append(_FakeUpload(image, stream))
        return self.uploads[-1]

    def release_all(self):
        self.releases += 1


def _binary():
    descriptors = (
        _tiled(arg_index=0, global_dims=(64, 32), global_strides=(128, 4), box_dims=(64, 32)),
        _tiled(arg_index=1, global_dims=(64, 32), global_strides=(128, 4), box_dims=(64, 32), base_offset_bytes=256),
    )
    return KernelBinary(
        name="k", ptx=PTX, block=(128, 1, 1), descriptors=descriptors, arg_names=("src", "dst"),
        params=(PointerParam(1), TensorMapParam(0), DescriptorScratchParam((0, 128)), PointerParam(0)),
    )


def _packer(binary=None):
    binary = binary or _binary()
    caches = [tensormap.TensorMapCache(spec, lambda address, i=i: _fake_image(i, address))
              for i, spec in enumerate(binary.descriptors)]
    pool = _FakePool()
    return params.KernelParams(binary, 0, caches, pool), caches, pool


def _array(address, nbytes=64 * 32 * 4 + 256, device=0):
    return DeviceArray(address, (nbytes // 4,), (1,), dtypes.float32, device)


def _slot(block_address, index, size):
    pointer = ctypes.c_void_p.from_address(block_address + 8 * index).value
    return pointer, ctypes.string_at(pointer, size)


def test_packed_parameter_bytes():
    packer, caches, pool = _packer()
    src, dst = _array(0x7F0000010000), _array(0x7F0000020000)
    block = packer.pack([src, dst], stream=0)
    assert block == packer.address
    assert _slot(block, 0, 8)[1] == struct.pack("<Q", dst.address)
    map_address, map_bytes = _slot(block, 1, 128)
    assert map_address % 64 == 0 and map_bytes == _fake_image(0, src.address)
    scratch_pointer = struct.unpack("<Q", _slot(block, 2, 8)[1])[0]
    assert scratch_pointer == pool.uploads[0].address
    assert ctypes.string_at(scratch_pointer, 256) == _fake_image(0, src.address) + _fake_image(1, dst.address + 256)
    assert _slot(block, 3, 8)[1] == struct.pack("<Q", src.address)


def test_warm_packs_encode_and_upload_nothing():
    packer, caches, pool = _packer()
    src, dst = _array(0x7F0000010000), _array(0x7F0000020000)
    packer.pack([src, dst], stream=0)
    cells = [_slot(packer.address, index, 8)[0] for index in range(4)]
    for _ in range(3):
        packer.pack([_array(src.address), _array(dst.address)], stream=0)
    assert [cache.encode_count for cache in caches] == [1, 1]
    assert len(pool.uploads) == 1 and packer.scratches[0].upload_count == 1
    assert [_slot(packer.address, index, 8)[0] for index in range(4)] == cells  # same storage, refilled
    other = _array(0x7F0000030000)
    packer.pack([src, other], stream=0)
    assert [cache.encode_count for cache in caches] == [1, 2] and len(pool.uploads) == 2
    assert _slot(packer.address, 0, 8)[1] == struct.pack("<Q", other.address)


def test_scratch_on_another_stream_waits_for_its_upload_once():
    packer, _, pool = _packer()
    arrays_ = [_array(0x7F0000010000), _array(0x7F0000020000)]
    packer.pack(arrays_, stream=0)
    packer.pack(arrays_, stream=0x55)
    packer.pack(arrays_, stream=0x55)
    assert pool.uploads[0].ordered == [0x55] and len(pool.uploads) == 1


def test_scratch_cache_starts_over_when_full(monkeypatch):
    packer, _, pool = _packer()
    monkeypatch.setattr(packer.scratches[0], "capacity", 2)
    for offset in range(3):
        packer.pack([_array(0x7F0000010000 + offset * 0x1000), _array(0x7F0000020000)], stream=0)
    assert pool.releases == 1 and len(pool.uploads) == 3


def test_pack_checks_arguments():
    packer, _, _ = _packer()
    src = _array(0x7F0000010000)
    with pytest.raises(ArgumentError, match=r"kernel 'k' takes 2 array\(s\) \(src, dst\), but 1 were given"):
        packer.pack([src], stream=0)
    with pytest.raises(ArgumentError, match=r"argument 'dst' of kernel 'k' is on cuda:1, but the kernel was "
                                             r"loaded on cuda:0"):
        packer.pack([src, _array(0x7F0000020000, device=1)], stream=0)
    with pytest.raises(ArgumentError, match=r"argument 'dst' of kernel 'k' holds 8192 bytes .* but TMA descriptor "
                                             r"1 \(tiled, argument 1\) reaches 8448 bytes"):
        packer.pack([src, _array(0x7F0000020000, nbytes=8192)], stream=0)


def test_argument_count_without_names():
    binary = _binary()
    assert params.argument_count(binary) == 2
    unnamed = KernelBinary(name="k", ptx=PTX, block=(128, 1, 1), descriptors=(), params=(PointerParam(3),))
    assert params.argument_count(unnamed) == 4


# ---------------------------------------------------------------------------------- grid, binary


def test_launch_grid_shapes():
    assert launch_grid(6) == (6, 1, 1)
    assert launch_grid((6, 4)) == (6, 4, 1)
    assert launch_grid([6, 4, 2], (2, 2, 1)) == (6, 4, 2)
    assert launch_grid((np.int64(3),)) == (3, 1, 1)


@pytest.mark.parametrize(
    "grid, cluster, message",
    [
        ((0, 1), (1, 1, 1), r"the x extent 0 is outside 1 .. 2147483647"),
        ((1, 65536), (1, 1, 1), r"the y extent 65536 is outside 1 .. 65535"),
        ((2**31, 1), (1, 1, 1), "the x extent 2147483648"),
        ((5, 4), (2, 1, 1), r"grid \(5, 4, 1\) is not a whole number of clusters \(2, 1, 1\): 5 blocks along x"),
        ((1, 2, 3, 4), (1, 1, 1), "has 4 dimensions"),
        ("big", (1, 1, 1), "is not an int or a tuple"),
        ((1.5,), (1, 1, 1), "is not an int or a tuple"),
    ],
)
def test_launch_grid_errors(grid, cluster, message):
    with pytest.raises(ArgumentError, match=message):
        launch_grid(grid, cluster)


def _with(binary, **changes):
    fields = {name: getattr(binary, name) for name in binary.__dataclass_fields__}
    fields.update(changes)
    return KernelBinary(**fields)


def test_check_binary():
    launch.check_binary(_binary())
    with pytest.raises(ResourceError, match=r"block \(2048, 1, 1\) has 2048 threads"):
        launch.check_binary(_with(_binary(), block=(2048, 1, 1)))
    with pytest.raises(ResourceError, match=r"cluster \(4, 4, 2\) has 32 blocks"):
        launch.check_binary(_with(_binary(), cluster=(4, 4, 2)))
    with pytest.raises(ValueError, match="scratch slots"):
        launch.check_binary(_with(_binary(), params=(DescriptorScratchParam((0, 64)),)))
    with pytest.raises(ValueError, match="2 scratch slots"):
        launch.check_binary(_with(_binary(), descriptors=_binary().descriptors[:1]))
    with pytest.raises(ValueError, match="no descriptors"):
        launch.check_binary(_with(_binary(), params=(DescriptorScratchParam(()),), descriptors=()))
    with pytest.raises(ValueError, match="names one of 2 descriptors"):
        launch.check_binary(_with(_binary(), params=(TensorMapParam(2),)))


def _facts(major, minor):
    return driver.DeviceFacts(0, "Fake GPU", (major, minor), 232448, 132, 13000)


def test_check_target():
    launch.check_target("sm_90a", _facts(9, 0))
    launch.check_target("sm_90", _facts(10, 0))
    with pytest.raises(UnsupportedTargetError, match=r"compiled for sm_90a, which needs a GPU of compute "
                                                      r"capability 9.0; cuda:0 \(Fake GPU, compute capability 8.0\)"):
        launch.check_target("sm_90a", _facts(8, 0))
    with pytest.raises(UnsupportedTargetError, match="capability 9.0;"):
        launch.check_target("sm_90a", _facts(10, 0))
    with pytest.raises(UnsupportedTargetError, match="unknown target"):
        launch.check_target("gfx90a", _facts(9, 0))


def test_host_timing_helper():
    seconds = host_seconds_per_call(lambda: None, repeat=200, warmup=5)
    assert 0 < seconds < 1e-3


def test_runtime_import_stays_light():
    code = ("import sys, asyncdsl.runtime; "
            "assert not any(name.startswith(('cuda.bindings.driver', 'torch', 'cupy', 'jax')) for name in sys.modules)")
    assert os.system(f'{sys.executable} -c "{code}"') == 0


def test_no_warnings_on_import():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import asyncdsl.runtime  # noqa: F401


# ------------------------------------------------------------- LoadedKernel against a fake driver


class _RecordingDriver:
    """`cuda.bindings.driver` with its enums and structs, but every call the loader and the launch
    path make answered here and recorded (so LoadedKernel runs end to end without a GPU)."""

    def __init__(self, static_shared=16, launch_results=()):
        self._real = driver.api()
        self.calls = []
        self.static_shared = static_shared
        self.launch_results = list(launch_results)
        self.success = self._real.CUresult.CUDA_SUCCESS

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _record(self, name, *args):
        self.calls.append((name, args))

    def cuCtxSetCurrent(self, context):
        self._record("cuCtxSetCurrent", context)
        return (self.success,)

    def cuModuleLoadData(self, image):
        self._record("cuModuleLoadData", image)
        return (self.success, self._real.CUmodule(0x100))

    def cuModuleGetFunction(self, module, name):
        self._record("cuModuleGetFunction", name)
        return (self.success, self._real.CUfunction(0x200))

    def cuFuncGetAttribute(self, which, function):
        values = {"CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": self.static_shared, "CU_FUNC_ATTRIBUTE_NUM_REGS": 40,
                  "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 49152 - self.static_shared,
                  "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024}
        return (self.success, values[which.name])

    def cuFuncSetAttribute(self, function, which, value):
        self._record("cuFuncSetAttribute", which.name, value)
        return (self.success,)

    def cuLaunchKernelEx(self, config, function, kernel_params, extra):
        grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
        cluster = tuple((a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z)
                        for a in config.attrs[:config.numAttrs])
        pointer = ctypes.c_void_p.from_address(kernel_params).value
        self._record("cuLaunchKernelEx", grid, int(config.hStream), config.sharedMemBytes, cluster,
                     ctypes.c_uint64.from_address(pointer).value)
        result = self.launch_results.pop(0) if self.launch_results else self.success
        return (self._real.CUresult(result),)


@pytest.fixture
def fake_driver(monkeypatch, tmp_path):
    def install(**options):
        fake = _RecordingDriver(**options)
        monkeypatch.setattr(driver, "_driver_module", fake)
        monkeypatch.setattr(driver, "_initialized", True)
        monkeypatch.setattr(driver, "_contexts", {0: fake.CUcontext(0x300)})
        monkeypatch.setattr(driver, "_facts", {0: _facts(9, 0)})
        monkeypatch.setattr(launch, "default_compiler", lambda device: _FakeCompiler())
        monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
        launch.clear_loaded_kernels()
        return fake

    yield install
    launch.clear_loaded_kernels()


def _pointer_binary(**changes):
    binary = KernelBinary(name="touch", ptx=PTX, block=(128, 1, 1), descriptors=(), params=(PointerParam(0),),
                          arg_names=("x",))
    return _with(binary, **changes)


def test_loaded_kernel_loads_configures_and_launches(fake_driver):
    fake = fake_driver()
    kernel = launch.load_kernel(_pointer_binary(dynamic_smem_bytes=205824, cluster=(2, 1, 1)))
    assert kernel.cubin_source == "compiled" and launch.load_kernel(_pointer_binary(
        dynamic_smem_bytes=205824, cluster=(2, 1, 1))) is kernel
    assert ("cuFuncSetAttribute", ("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 205824)) in fake.calls
    assert (kernel.static_shared_bytes, kernel.registers_per_thread) == (16, 40)
    x = DeviceArray(0x7F0000040000, (256,), (1,), dtypes.float32, 0)
    kernel.launch((6, 4), [x])
    kernel.launch((6, 4), [x], stream=_TorchLikeStream())
    launches = [args for name, args in fake.calls if name == "cuLaunchKernelEx"]
    assert launches == [((6, 4, 1), 0, 205824, ((2, 1, 1),), x.address),
                        ((6, 4, 1), 0x1234, 205824, ((2, 1, 1),), x.address)]
    with pytest.raises(ArgumentError, match="not a whole number of clusters"):
        kernel.launch((5, 4), [x])
    launch.clear_loaded_kernels()
    assert launch.load_kernel(_pointer_binary(dynamic_smem_bytes=205824, cluster=(2, 1, 1))).cubin_source == "disk"


def test_small_kernels_keep_the_default_shared_memory_limit(fake_driver):
    fake = fake_driver()
    kernel = launch.load_kernel(_pointer_binary(dynamic_smem_bytes=9216))
    assert not [call for call in fake.calls if call[0] == "cuFuncSetAttribute"]
    kernel.launch(3, [DeviceArray(0x7F0000040000, (4,), (1,), dtypes.float32, 0)])
    assert [args[3] for name, args in fake.calls if name == "cuLaunchKernelEx"] == [()]  # no cluster attribute


def test_big_clusters_are_allowed_explicitly(fake_driver):
    fake = fake_driver()
    launch.load_kernel(_pointer_binary(cluster=(16, 1, 1)))
    assert ("cuFuncSetAttribute", ("CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)) in fake.calls


def test_shared_memory_beyond_the_device_limit_is_a_resource_error(fake_driver):
    fake_driver(static_shared=1024)
    with pytest.raises(ResourceError, match=r"needs 232000 bytes of dynamic shared memory .* \+ 1024 static = "
                                            r"233024 bytes per block, but cuda:0 .* allows at most 232448"):
        launch.load_kernel(_pointer_binary(dynamic_smem_bytes=232000))


def test_a_launch_without_a_current_context_is_retried(fake_driver):
    fake = fake_driver(launch_results=[201])  # CUDA_ERROR_INVALID_CONTEXT, then success
    kernel = launch.load_kernel(_pointer_binary())
    fake.calls.clear()
    kernel.launch(1, [DeviceArray(0x7F0000040000, (4,), (1,), dtypes.float32, 0)])
    assert [name for name, _ in fake.calls] == ["cuLaunchKernelEx", "cuCtxSetCurrent", "cuLaunchKernelEx"]


def test_a_failed_launch_names_the_kernel(fake_driver):
    fake_driver(launch_results=[700])  # CUDA_ERROR_ILLEGAL_ADDRESS
    kernel = launch.load_kernel(_pointer_binary())
    with pytest.raises(CudaError, match=r"cuLaunchKernelEx failed: CUDA_ERROR_ILLEGAL_ADDRESS.* launching kernel "
                                        r"'touch' on grid \(2, 1, 1\)") as caught:
        kernel.launch(2, [DeviceArray(0x7F0000040000, (4,), (1,), dtypes.float32, 0)])
    assert caught.value.code == 700


def test_the_installed_compilers_are_named_without_loading_one(monkeypatch, tmp_path):
    """The cubin key names the compiler installation from the file system alone (loading
    nvJitLink costs tens of milliseconds a process); a new libnvJitLink changes the name."""
    from asyncdsl.runtime import jit_link

    library = tmp_path / "nvidia" / "cu13" / "lib" / "libnvJitLink.so.13"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"old")
    monkeypatch.setattr(jit_link.sys, "path", [str(tmp_path)])
    monkeypatch.setattr(jit_link, "_installed", {})
    monkeypatch.setattr(jit_link, "default_compiler", lambda device=0: pytest.fail("a compiler was loaded"))
    before = jit_link.installed_compilers(13000)
    assert str(library) in before and jit_link.installed_compilers(13000) is before  # once a process
    library.write_bytes(b"upgraded")
    monkeypatch.setattr(jit_link, "_installed", {})
    assert jit_link.installed_compilers(13000) not in (before, jit_link.installed_compilers(12080))


class _ProfilingDriver(_RecordingDriver):
    """The recording driver with what a profiled launch adds: memory, events, stream memory
    operations (the gate that holds the stream while the events and the launch are enqueued)."""

    def __init__(self, **options):
        super().__init__(**options)
        self.gate = None

    def cuMemAlloc(self, size):
        self._record("cuMemAlloc", size)
        return (self.success, self._real.CUdeviceptr(0x7000 if size == 4 else 0x9000))

    def cuMemsetD32(self, address, value, count):
        self._record("cuMemsetD32", int(address), value)
        return (self.success,)

    def cuMemsetD32Async(self, address, value, count, stream):
        self._record("cuMemsetD32Async", int(address))
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
        return (self.success, self._real.CUevent(0x60 + len(self.calls)))

    def cuEventRecord(self, event, stream):
        self._record("cuEventRecord", int(stream))
        return (self.success,)

    def cuEventSynchronize(self, event):
        self._record("cuEventSynchronize")
        return (self.success,)

    def cuEventElapsedTime(self, start, end):
        return (self.success, 1.5)

    def cuMemcpyDtoH(self, destination, source, size):
        return (self.success,)

    def cuEventDestroy(self, event):
        return (self.success,)

    def cuMemFree(self, address):
        self._record("cuMemFree", int(address))
        return (self.success,)


def test_a_profiled_launch_holds_its_stream_until_the_events_and_the_launch_are_enqueued(
        fake_driver, monkeypatch):
    from asyncdsl.kernel_binary import ProfileBufferParam
    from asyncdsl.runtime import profile

    fake_driver()  # the loader's calls, then the profiling driver for the launches
    profiling = _ProfilingDriver()
    monkeypatch.setattr(driver, "_driver_module", profiling)
    monkeypatch.setattr(profile, "_gates", {})
    kernel = launch.load_kernel(_pointer_binary(params=(ProfileBufferParam(("a",), 4),), arg_names=()))
    for number in (1, 2):
        profiling.calls.clear()
        launched = kernel.launch_profiled((1, 1, 1), [], stream=0x33)
        names = [name for name, _ in profiling.calls]
        start = names.index("cuStreamWaitValue32")
        assert names[start:start + 4] == ["cuStreamWaitValue32", "cuEventRecord", "cuLaunchKernelEx", "cuEventRecord"]
        assert names[start + 4:start + 6] == ["cuStreamWriteValue32", "cuEventSynchronize"]
        wait, write = profiling.calls[start][1], profiling.calls[start + 4][1]
        assert wait == (0x33, 0x7000, number) and write == (0x55, 0x7000, number)  # numbers only grow
        assert launched.event_ns == 1.5e6


def test_a_profiled_launch_that_fails_still_opens_its_stream(fake_driver, monkeypatch):
    from asyncdsl.kernel_binary import ProfileBufferParam
    from asyncdsl.runtime import profile

    fake_driver()
    failing = _ProfilingDriver(launch_results=[1])  # CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(driver, "_driver_module", failing)
    monkeypatch.setattr(profile, "_gates", {})
    kernel = launch.load_kernel(_pointer_binary(params=(ProfileBufferParam(("a",), 4),), arg_names=()))
    with pytest.raises(CudaError):
        kernel.launch_profiled((1, 1, 1), [], stream=0x33)
    names = [name for name, _ in failing.calls]
    assert "cuStreamWriteValue32" in names and names.index("cuStreamWriteValue32") > names.index("cuLaunchKernelEx")
    assert ("cuMemFree", (0x9000,)) in failing.calls


def test_the_compiler_knob_is_part_of_the_installed_compilers_name(monkeypatch):
    from asyncdsl.runtime import jit_link

    monkeypatch.setattr(jit_link, "_installed", {})
    names = set()
    for choice in ("auto", "nvjitlink", "driver"):
        monkeypatch.setenv("ASYNCDSL_PTX_COMPILER", choice)
        names.add(jit_link.installed_compilers(13000))
    assert len(names) == 3
