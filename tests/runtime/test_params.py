"""Kernel parameter blocks (with a fake scratch pool and encode function), grids, binaries and
the runtime's import, without a GPU."""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import warnings

import numpy as np
import pytest
from runtime_fakes import PTX, binary_with, device_facts_of, fake_image, tiled_spec

from asyncdsl import dtypes
from asyncdsl.errors import (
    ArgumentError,
    ResourceError,
    UnsupportedTargetError,
)
from asyncdsl.kernel_binary import (
    DescriptorScratchParam,
    KernelBinary,
    PointerParam,
    TensorMapParam,
)
from asyncdsl.runtime import (
    DeviceArray,
    host_seconds_per_call,
    launch,
    launch_grid,
    params,
    tensormap,
)

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
        tiled_spec(arg_index=0, global_dims=(64, 32), global_strides=(128, 4), box_dims=(64, 32)),
        tiled_spec(arg_index=1, global_dims=(64, 32), global_strides=(128, 4), box_dims=(64, 32),
                   base_offset_bytes=256),
    )
    return KernelBinary(
        name="k", ptx=PTX, block=(128, 1, 1), descriptors=descriptors, arg_names=("src", "dst"),
        params=(PointerParam(1), TensorMapParam(0), DescriptorScratchParam((0, 128)), PointerParam(0)),
    )


def _packer(binary=None):
    binary = binary or _binary()
    caches = [tensormap.TensorMapCache(spec, lambda address, i=i: fake_image(i, address))
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
    assert map_address % 64 == 0 and map_bytes == fake_image(0, src.address)
    scratch_pointer = struct.unpack("<Q", _slot(block, 2, 8)[1])[0]
    assert scratch_pointer == pool.uploads[0].address
    assert (ctypes.string_at(scratch_pointer, 256)
            == fake_image(0, src.address) + fake_image(1, dst.address + 256))
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
    with pytest.raises(ArgumentError, match=r"argument 'dst' of kernel 'k' holds 8192 bytes .* but TMA "
                                             r"descriptor 1 \(tiled, argument 1\) reaches 8448 bytes"):
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
        ((5, 4), (2, 1, 1),
         r"grid \(5, 4, 1\) is not a whole number of clusters \(2, 1, 1\): 5 blocks along x"),
        ((1, 2, 3, 4), (1, 1, 1), "has 4 dimensions"),
        ("big", (1, 1, 1), "is not an int or a tuple"),
        ((1.5,), (1, 1, 1), "is not an int or a tuple"),
    ],
)
def test_launch_grid_errors(grid, cluster, message):
    with pytest.raises(ArgumentError, match=message):
        launch_grid(grid, cluster)


def test_check_binary():
    launch.check_binary(_binary())
    with pytest.raises(ResourceError, match=r"block \(2048, 1, 1\) has 2048 threads"):
        launch.check_binary(binary_with(_binary(), block=(2048, 1, 1)))
    with pytest.raises(ResourceError, match=r"cluster \(4, 4, 2\) has 32 blocks"):
        launch.check_binary(binary_with(_binary(), cluster=(4, 4, 2)))
    with pytest.raises(ValueError, match="scratch slots"):
        launch.check_binary(binary_with(_binary(), params=(DescriptorScratchParam((0, 64)),)))
    with pytest.raises(ValueError, match="2 scratch slots"):
        launch.check_binary(binary_with(_binary(), descriptors=_binary().descriptors[:1]))
    with pytest.raises(ValueError, match="no descriptors"):
        launch.check_binary(binary_with(_binary(), params=(DescriptorScratchParam(()),), descriptors=()))
    with pytest.raises(ValueError, match="names one of 2 descriptors"):
        launch.check_binary(binary_with(_binary(), params=(TensorMapParam(2),)))


def test_check_target():
    launch.check_target("sm_90a", device_facts_of(9, 0))
    launch.check_target("sm_90", device_facts_of(10, 0))
    with pytest.raises(UnsupportedTargetError, match=r"compiled for sm_90a, which needs a GPU of compute "
                                                      r"capability 9.0; cuda:0 \(Fake GPU, compute "
                                                      r"capability 8.0\)"):
        launch.check_target("sm_90a", device_facts_of(8, 0))
    with pytest.raises(UnsupportedTargetError, match="capability 9.0;"):
        launch.check_target("sm_90a", device_facts_of(10, 0))
    with pytest.raises(UnsupportedTargetError, match="unknown target"):
        launch.check_target("gfx90a", device_facts_of(9, 0))


def test_host_timing_helper():
    seconds = host_seconds_per_call(lambda: None, repeat=200, warmup=5)
    assert 0 < seconds < 1e-3


def test_runtime_import_stays_light():
    code = ("import sys, asyncdsl.runtime; "
            "assert not any(name.startswith(('cuda.bindings.driver', 'torch', 'cupy', 'jax')) for "
            "name in sys.modules)")
    assert os.system(f'{sys.executable} -c "{code}"') == 0


def test_no_warnings_on_import():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import asyncdsl.runtime  # noqa: F401
