"""The warm call path without a GPU: prepared launches, address-patched tensor maps, streams.

A stand-in loaded kernel records what `cuLaunchKernelEx` would receive (grid, stream, and the
bytes every parameter slot points at); descriptors are "encoded" and "patched" by functions that
write recognisable bytes, so the test sees which images a launch would pass.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import sys
import types

import pytest
from support import device_array

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError, CudaError
from asyncdsl.kernel_binary import KernelBinary, PointerParam, ScalarParam, TensorMapParam, TiledTensorMapSpec
from asyncdsl.runtime import launch, streams, tensormap
from asyncdsl.runtime.warm_path import WarmLaunches

pytest.importorskip("cuda.bindings")  # launch configurations are cuda-python objects (no GPU needed)


def _image(tag, address):
    """128 bytes standing for a descriptor encoded (tag 1) or patched (tag 2) at `address`."""
    return struct.pack("<QQ", tag, address) * 8


def _patch(image_address, global_address):
    ctypes.memmove(image_address, _image(2, global_address), 128)


def _spec(arg):
    return TiledTensorMapSpec(arg_index=arg, dtype_code=dtypes.TMA_FLOAT32, element_bytes=4,
                              global_dims=(64, 32), global_strides=(128, 4), box_dims=(64, 32))


BINARY = KernelBinary(
    name="k", ptx="", block=(128, 1, 1), descriptors=(_spec(0), _spec(1)), arg_names=("src", "dst"),
    params=(TensorMapParam(0), TensorMapParam(1), PointerParam(1), ScalarParam(0, "int", "n")),
)


class RecordingLoadedKernel:
    """The parts of `LoadedKernel` a prepared launch uses, with the driver call recorded."""

    new_params = launch.LoadedKernel.new_params
    new_launch_config = launch.LoadedKernel.new_launch_config
    prepare = launch.LoadedKernel.prepare
    retry_failed_launch = launch.LoadedKernel.retry_failed_launch

    def __init__(self, binary=BINARY, results=()):
        self.binary, self.device, self.name = binary, 0, binary.name
        self.tensor_maps = [tensormap.TensorMapCache(spec, functools.partial(_image, 1), _patch)
                            for spec in binary.descriptors]
        self._errors = None
        self._function = object()
        self.launches = []
        self._results = list(results)

    def _launch(self, config, function, params, extra):
        slots = [ctypes.c_void_p.from_address(params + 8 * i).value for i in range(len(self.binary.params))]
        self.launches.append({
            "grid": (config.gridDimX, config.gridDimY, config.gridDimZ),
            "stream": int(config.hStream),
            "maps": [ctypes.string_at(slots[i], 128) for i in (0, 1)],
            "pointer": ctypes.c_uint64.from_address(slots[2]).value,
            "n": ctypes.c_int32.from_address(slots[3]).value,
        })
        return (self._results.pop(0),) if self._results else (0,)


def _array(address, shape=(64, 32)):
    return device_array(shape, address)


def test_a_prepared_launch_refills_only_what_changed():
    loaded = RecordingLoadedKernel()
    prepared = loaded.prepare((2, 1))
    prepared.launch((0x10000, 0x20000), 0, (5,))
    prepared.launch((0x10000, 0x20000), 0, (7,))
    prepared.launch((0x30000, 0x20000), 0x99, (7,), grid=(4,))
    first, same, moved = loaded.launches
    assert first == {"grid": (2, 1, 1), "stream": 0, "maps": [_image(1, 0x10000), _image(1, 0x20000)],
                     "pointer": 0x20000, "n": 5}
    assert same == {**first, "n": 7}
    # The new source address is a copy of the first image with only its address replaced.
    assert moved == {"grid": (4, 1, 1), "stream": 0x99, "maps": [_image(2, 0x30000), _image(1, 0x20000)],
                     "pointer": 0x20000, "n": 7}
    source_map, _ = loaded.tensor_maps
    assert (source_map.encode_count, source_map.replace_count) == (1, 1)
    prepared.launch((0x10000, 0x20000), 0x99, (7,))  # back to the first address: its cached image
    assert loaded.launches[-1]["maps"][0] == _image(1, 0x10000) and source_map.replace_count == 1


def test_scalars_are_checked_on_every_launch():
    prepared = RecordingLoadedKernel().prepare((1,))
    with pytest.raises(ArgumentError, match="argument 'n' is 4294967296"):
        prepared.launch((0x10000, 0x20000), 0, (2**32,))


def test_images_a_launch_points_at_outlive_a_cache_that_starts_over(monkeypatch):
    loaded = RecordingLoadedKernel()
    prepared = loaded.prepare((1,))
    prepared.launch((0x10000, 0x20000), 0, (1,))
    source_map = loaded.tensor_maps[0]
    monkeypatch.setattr(source_map, "capacity", 1)
    other = loaded.prepare((1,))
    for address in range(0x40000, 0x40000 + 200 * 0x1000, 0x1000):  # past a slab, clearing every time
        other.launch((address, 0x20000), 0, (1,))
    prepared.launch((0x10000, 0x20000), 0, (1,))  # same addresses: nothing refilled
    assert loaded.launches[-1]["maps"][0] == _image(1, 0x10000)
    assert loaded.launches[-2]["maps"][0] == _image(2, 0x40000 + 199 * 0x1000)


def test_a_launch_without_a_current_context_activates_one_and_retries(monkeypatch):
    loaded = RecordingLoadedKernel(results=[201])
    activated = []
    monkeypatch.setattr(launch.driver, "activate", activated.append)
    loaded.prepare((1,)).launch((0x10000, 0x20000), 0, (1,))
    assert activated == [0] and len(loaded.launches) == 2


def test_a_failed_launch_is_a_cuda_error_naming_kernel_and_grid():
    loaded = RecordingLoadedKernel(results=[1])  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(CudaError, match=r"cuLaunchKernelEx failed: CUDA_ERROR_INVALID_VALUE.* kernel 'k' on "
                                        r"grid \(3, 1, 1\)"):
        loaded.prepare((3,)).launch((0x10000, 0x20000), 0, (1,))


# --------------------------------------------------------------------------------- WarmLaunches


def _warm(grid_function=None):
    return WarmLaunches(("src", "dst", "n", "B"), frozenset({"B"}), grid_function)


def test_a_remembered_layout_launches_warm_on_the_stream_of_its_source():
    loaded = RecordingLoadedKernel()
    warm = _warm()
    current = [0x51]
    warm.remember((_array(0x10000), _array(0x20000), 32, 64), {}, loaded, (2, 1, 1), lambda: current[0])
    assert warm.launch((_array(0x30000), _array(0x40000), 48, 64), {}, None)
    current[0] = 0x52  # the library's current stream changed (a stream context, graph capture)
    assert warm.launch((_array(0x30000),), {"dst": _array(0x40000), "n": 16, "B": 64}, None)
    assert warm.launch((_array(0x30000), _array(0x40000), 0, 64), {}, 0x77)  # an explicit stream wins
    assert [(call["stream"], call["n"]) for call in loaded.launches] == [(0x51, 48), (0x52, 16), (0x77, 0)]


@pytest.mark.parametrize("args, kwargs", [
    ((_array(0x10008), _array(0x20000), 32, 64), {}),  # misaligned: the full path names it
    ((_array(0x10000, (128, 32)), _array(0x20000), 32, 64), {}),  # another shape
    ((device_array((64, 32), 0x10000, dtypes.int32), _array(0x20000), 32, 64), {}),  # another dtype
    ((_array(0x10000), _array(0x20000), 31, 64), {}),  # an int of the other divisibility
    ((_array(0x10000), _array(0x20000), 32.0, 64), {}),  # a float where an int was
    ((_array(0x10000), _array(0x20000), 32, 32), {}),  # another constexpr
    ((_array(0x10000), _array(0x20000), 32), {}),  # a parameter left out
    ((_array(0x10000), _array(0x20000), 32, [64]), {}),  # an unhashable constexpr
    ((_array(0x10000), _array(0x20000), 32), {"src": _array(0x10000)}),  # given twice
])
def test_other_calls_take_the_full_path(args, kwargs):
    loaded = RecordingLoadedKernel()
    warm = _warm()
    warm.remember((_array(0x10000), _array(0x20000), 32, 64), {}, loaded, (2, 1, 1), None)
    assert not warm.launch(args, kwargs, None)
    assert loaded.launches == []


def test_a_float_constexpr_launches_warm_only_with_its_own_bits():
    loaded = RecordingLoadedKernel()
    warm = _warm()
    nan = float("nan")
    warm.remember((_array(0x10000), _array(0x20000), 32, 0.0), {}, loaded, (2, 1, 1), None)
    warm.remember((_array(0x10000), _array(0x20000), 32, nan), {}, loaded, (2, 1, 1), None)
    assert not warm.launch((_array(0x10000), _array(0x20000), 32, -0.0), {}, None)  # equal, not the same
    assert not warm.launch((_array(0x10000), _array(0x20000), 32, -nan), {}, None)  # the sign bit set
    assert warm.launch((_array(0x10000), _array(0x20000), 32, 0.0), {}, None)
    assert warm.launch((_array(0x10000), _array(0x20000), 32, float("nan")), {}, None)  # another object
    assert len(loaded.launches) == 2


def test_parameters_left_to_their_defaults_launch_warm():
    loaded = RecordingLoadedKernel()
    warm = WarmLaunches(("src", "dst", "n", "B"), frozenset({"B"}), None, {"B": 64})
    warm.remember((_array(0x10000), _array(0x20000), 32), {}, loaded, (2, 1, 1), None)
    assert warm.launch((_array(0x30000), _array(0x40000), 48), {}, None)  # B left to its default
    assert warm.launch((_array(0x30000), _array(0x40000)), {"n": 16, "B": 64}, None)  # the same layout
    assert not warm.launch((_array(0x30000), _array(0x40000), 48), {"B": 32}, None)  # another constexpr
    assert not warm.launch((_array(0x30000), _array(0x40000)), {}, None)  # n has no default
    assert [call["n"] for call in loaded.launches] == [48, 16]


def test_the_grid_function_sees_new_scalars():
    loaded = RecordingLoadedKernel()
    warm = _warm(lambda src, dst, n, B: (n // 16,))
    warm.remember((_array(0x10000), _array(0x20000), 32, 64), {}, loaded, (2, 1, 1), None)
    warm.launch((_array(0x10000), _array(0x20000), 64, 64), {}, None)
    assert loaded.launches[0]["grid"] == (4, 1, 1) and loaded.launches[0]["stream"] == 0


# ------------------------------------------------------------------ torch tensors (a stand-in module)


class _Tensor:
    def __init__(self, shape, address, contiguous=True, device=0):
        self.shape, self.dtype, self._address, self._contiguous = shape, "float32", address, contiguous
        self.is_cuda, self._device = device >= 0, device

    def is_contiguous(self):
        return self._contiguous

    def data_ptr(self):
        return self._address

    def get_device(self):
        return self._device


class _Parameter(_Tensor):
    pass


@pytest.fixture
def fake_torch(monkeypatch):
    module = types.ModuleType("torch")
    module.Tensor = _Tensor
    module._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0x700 + device)
    monkeypatch.setitem(sys.modules, "torch", module)
    return module


def test_torch_tensors_launch_warm_on_torch_current_stream(fake_torch):
    loaded = RecordingLoadedKernel()
    warm = _warm()
    first = (_Tensor((64, 32), 0x10000, device=1), _Tensor((64, 32), 0x20000, device=1), 32, 64)
    source = streams.current_stream_source(first)
    warm.remember(first, {}, loaded, (2, 1, 1), source)
    assert warm.launch(
        (_Tensor((64, 32), 0x30000, device=1), _Parameter((64, 32), 0x40000, device=1), 32, 64), {}, None)
    assert loaded.launches[0]["stream"] == 0x701 and loaded.launches[0]["pointer"] == 0x40000
    assert not warm.launch(
        (_Tensor((64, 32), 0x30000, contiguous=False, device=1), first[1], 32, 64), {}, None)
    assert not warm.launch((_Tensor((64, 32), 0x30000, device=0), first[1], 32, 64), {}, None)


def test_stream_sources(fake_torch, monkeypatch):
    assert streams.current_stream_source([_array(0x10000)]) is None
    assert streams.current_stream_source([_array(0x10000), _Tensor((4,), 0x10000, device=2)])() == 0x702
    assert streams.current_stream_source([_Tensor((4,), 0x10000, device=-1)]) is None  # a CPU tensor
    del fake_torch._C._cuda_getCurrentRawStream
    fake_torch.cuda = types.SimpleNamespace(
        current_stream=lambda device: types.SimpleNamespace(cuda_stream=0x800))
    assert streams.current_stream_source([_Tensor((4,), 0x10000)])() == 0x800

    class CupyArray:
        pass

    cupy = types.ModuleType("cupy")
    cupy.ndarray = CupyArray
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=0x900))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert streams.current_stream_source([CupyArray()])() == 0x900
    assert streams.current_stream_source([CupyArray(), _Tensor((4,), 0x10000)])() == 0x800  # torch first
