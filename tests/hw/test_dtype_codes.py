"""TMA element type codes for every dtype the reference knows, and 4-bit types travelling packed
two per byte (planned as uint8 with the minor dim halved); 2-bit integers are refused."""

from __future__ import annotations

import ctypes
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packed_kernels import PACKED, dump_tiled, random_4bit, through_second_slot, tile_round_trip
from support import examples, line_of

import asyncdsl as ad
from asyncdsl import dtypes
from asyncdsl.hw import packed
from asyncdsl.hw.tma import plan_tiled_copy

# CUtensorMapDataType each dtype's plain copies use (cuda.h: UINT8 0, UINT16 1, UINT32 2, INT32 3,
# UINT64 4, INT64 5, FLOAT16 6, FLOAT32 7, FLOAT64 8, BFLOAT16 9), with its element size.
EXPECTED_CODES = {
    "int8": (0, 1), "uint8": (0, 1), "int16": (1, 2), "uint16": (1, 2),
    "int32": (2, 4), "uint32": (2, 4), "int64": (4, 8), "uint64": (4, 8),
    "float16": (6, 2), "bfloat16": (9, 2), "float32": (7, 4), "float64": (8, 8),
    # fp8 moves as bytes, like the reference's 8-bit integer code.
    "float8_e4m3fn": (0, 1), "float8_e5m2": (0, 1), "float8_e8m0fnu": (0, 1),
    # 4-bit types move as their packed bytes: Hopper has no 4-bit TMA type.
    "float4_e2m1fn": (0, 1), "int4": (0, 1), "uint4": (0, 1),
}








# -- type codes -------------------------------------------------------------------------------


def test_every_dtype_has_an_expected_code():
    assert sorted(EXPECTED_CODES) == sorted(d.name for d in dtypes.ALL)


@pytest.mark.parametrize("dtype", dtypes.ALL, ids=str)
def test_copies_encode_the_dtypes_tensor_map_type(dtype, ptxas):
    cols = 128
    spec = ad.ArraySpec((32, cols), dtype)
    compiled = tile_round_trip.compile(spec, spec, BM=16, BN=cols)
    code, element_bytes = EXPECTED_CODES[dtype.name]
    assert {(d.dtype_code, d.element_bytes) for d in compiled.binary.descriptors} == {(code, element_bytes)}
    ptxas(compiled.ptx)


def test_signed_codes_are_used_by_signed_min_and_max_only():
    assert (dtypes.int32.tma_code, dtypes.int32.signed_tma_code) == (dtypes.TMA_UINT32, dtypes.TMA_INT32)
    assert (dtypes.int64.tma_code, dtypes.int64.signed_tma_code) == (dtypes.TMA_UINT64, dtypes.TMA_INT64)


@pytest.mark.parametrize("name", ["int2", "uint2"])
def test_2_bit_integers_are_refused_by_name(name):
    message = r"2-bit integers \(int2/uint2\) cannot be moved: Hopper's TMA has no 2-bit element type"
    with pytest.raises(ad.ArgumentError, match=message):
        dtypes.as_dtype(getattr(ml_dtypes, name))
    with pytest.raises(ad.ArgumentError, match=message):
        dtypes.as_dtype(name)
    with pytest.raises(ad.ArgumentError, match=message):
        tile_round_trip.compile(np.zeros((16, 64), getattr(ml_dtypes, name)),
                                np.zeros((16, 64), np.uint8), BM=16, BN=64)


# -- packing ----------------------------------------------------------------------------------


def test_packed_layout_puts_the_first_element_in_the_low_nibble():
    values = np.array([[0.5, -2.0, 6.0], [1.0, 0.0, -0.5]], ml_dtypes.float4_e2m1fn)
    packed_bytes = packed.pack(values)
    codes = values.reshape(-1).view(np.uint8)  # 0x1, 0xC, 0x7, 0x2, 0x0, 0x9
    assert (packed_bytes.tolist()
            == [codes[0] | codes[1] << 4, codes[2] | codes[3] << 4, codes[4] | codes[5] << 4])
    assert packed.unpack(packed_bytes, ad.float4_e2m1fn, values.shape).tobytes() == values.tobytes()


@settings(max_examples=examples(50), deadline=None)
@given(st.sampled_from(PACKED), st.lists(st.integers(1, 7), min_size=1, max_size=3))
def test_pack_and_unpack_round_trip(dtype, shape):
    values = random_4bit(tuple(shape), dtype, seed=sum(shape))
    packed_bytes = packed.pack(values)
    assert packed_bytes.size == packed.packed_nbytes(shape, dtype) == (values.size + 1) // 2
    assert packed.unpack(packed_bytes, dtype, shape).tobytes() == values.tobytes()


def test_a_4_bit_copy_is_planned_as_a_byte_copy():
    plan = plan_tiled_copy((64, 256), ad.float4_e2m1fn, ((8, 16), (64, 128)), (), 0, (16, 128))
    assert plan.dtype == ad.uint8
    assert plan.global_dims == (64, 128) and plan.box_dims == (16, 64) and plan.coords == (8, 32)
    tiled = plan_tiled_copy((64, 256), ad.int4, ((0, 64), (0, 256)), (ad.TileTransform((8, 128)),), 64,
                            (8, 2, 8, 128))
    assert tiled.box_dims == (8, 2, 8, 64) and tiled.swizzle_bytes == 64


def test_the_descriptor_views_the_packed_bytes():
    spec = ad.ArraySpec((64, 256), ad.float4_e2m1fn)
    resolved = tile_round_trip.ir(spec, spec, BM=16, BN=128, after="resolve-transforms")
    load = next(line for line in resolved.splitlines() if '"asyncdsl.tma_load"' in line)
    assert "dtype = 0, elem_bytes = 1, dims = [64, 128], strides = [128, 1], box = [16, 64]" in load
    assert "expect_tx_bytes = 1024" in load  # 16 x 128 elements, half a byte each


@pytest.mark.parametrize("dtype", PACKED, ids=str)
@pytest.mark.parametrize("bm, bn, tile, swizzle",
                         [(16, 64, None, 0), (16, 256, (8, 256), 128), (32, 128, (8, 64), 32)])
def test_4_bit_tiles_round_trip_in_the_interpreter(dtype, bm, bn, tile, swizzle, ptxas):
    x = random_4bit((64, 256), dtype, seed=bm + bn)
    y = np.zeros_like(x)
    tile_round_trip.interpret(x, y, BM=bm, BN=bn, TILE=tile, SWIZZLE=swizzle)
    assert y.tobytes() == x.tobytes()
    spec = ad.ArraySpec((64, 256), dtype)
    ptxas(tile_round_trip.ptx(spec, spec, BM=bm, BN=bn, TILE=tile, SWIZZLE=swizzle))


def test_4_bit_tiles_land_in_smem_in_the_tiled_layout():
    x = random_4bit((32, 128), ad.float4_e2m1fn, seed=3)
    y = np.zeros((4, 2, 8, 64), ml_dtypes.float4_e2m1fn)
    dump_tiled.interpret(x, y, TILE=(8, 64))
    expected = x.reshape(4, 8, 2, 64).transpose(0, 2, 1, 3)
    assert y.tobytes() == np.ascontiguousarray(expected).tobytes()


@pytest.mark.parametrize(
    "args, message",
    [
        (((64, 255), ((0, 8), (0, 32))),
         "the minor dim of the GMEM array (size 255) must be a multiple of 2"),
        (((64, 256), ((0, 8), (0, 33))), "the slice's minor window (size 33) must be a multiple of 2"),
        (((64, 256), ((0, 8), (3, 32))), "the slice's start along the minor dim (3) must be a multiple of 2"),
        (((64, 256), ((0, 8), 5)), "must take a window of the minor dim, not index it"),
        (((64, 256), ((0, 8), (0, 18)), (ad.TileTransform((8, 9)),)),
         "the innermost tile of tile(8, 9) (9) must be"),
        (((8, 64, 256), ((0, 8), (0, 8), (0, 32)), (ad.TransposeTransform((0, 2, 1)),)),
         "moves the minor dim"),
        (((64, 256), ((0, 8), (0, 32)), (), 0, (8, 16)),
         "SMEM buffer shape (8, 16) does not match the transformed"),
        (((64, 256), ((0, 8), (0, 16))), "spans 8 bytes (8 x 1-byte elements); TMA needs a multiple of 16 "
                                         "(float4_e2m1fn elements are copied as uint8 bytes, 2 per byte"),
    ],
)
def test_4_bit_copies_that_are_not_whole_bytes_are_refused(args, message):
    shape, gmem_slice, *rest = args
    with pytest.raises((ad.CopyError, ad.TransformError), match=re.escape(message)):
        plan_tiled_copy(shape, ad.float4_e2m1fn, gmem_slice, *rest)


def test_an_odd_4_bit_window_is_a_copy_error_at_the_users_line():
    spec = ad.ArraySpec((64, 256), ad.int4)
    with pytest.raises(ad.CopyError, match="must be a multiple of 2 elements") as caught:
        tile_round_trip.compile(spec, spec, BM=16, BN=33)
    assert caught.value.location.line == line_of(tile_round_trip.fn, "# the load")




def test_views_of_4_bit_buffers_step_by_packed_bytes():
    x = random_4bit((16, 64), ad.uint4, seed=9)
    y = np.zeros_like(x)
    through_second_slot.interpret(x, y)  # the interpreter checks the view against the planned SMEM
    assert y.tobytes() == x.tobytes()
    spec = ad.ArraySpec((16, 64), ad.uint4)
    assert re.search(r"add\.s32 %r\d+, %r\d+, 512;", through_second_slot.ptx(spec, spec))  # 16 x 64 / 2 bytes


class _FakeDeviceMemory:
    """The few driver calls `to_device`/`to_host` make, over a dict of host byte buffers."""

    def __init__(self):
        self.blocks: dict[int, np.ndarray] = {}

    def cuMemAlloc(self, nbytes):  # noqa: N802 - the driver's names
        address = 4096 * (len(self.blocks) + 1)
        self.blocks[address] = np.zeros(nbytes, np.uint8)
        return (0, address)

    def cuMemFree(self, address):  # noqa: N802
        return (0,)

    def cuMemcpyHtoD(self, address, source, nbytes):  # noqa: N802
        assert nbytes <= self.blocks[address].size, "copy past the allocation"
        self.blocks[address][:nbytes] = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(source))
        return (0,)

    def cuMemcpyDtoH(self, destination, address, nbytes):  # noqa: N802
        assert nbytes <= self.blocks[address].size, "copy past the allocation"
        (ctypes.c_uint8 * nbytes).from_address(destination)[:] = self.blocks[address][:nbytes].tobytes()
        return (0,)

    def cuCtxSynchronize(self):  # noqa: N802
        return (0,)


def test_device_copies_of_4_bit_arrays_are_packed(monkeypatch):
    from asyncdsl.runtime import buffers, to_device, to_host

    memory = _FakeDeviceMemory()
    monkeypatch.setattr(buffers.driver, "api", lambda: memory)
    monkeypatch.setattr(buffers.driver, "activate", lambda device=0: None)
    values = random_4bit((3, 6), ad.float4_e2m1fn, seed=12)
    device = to_device(values)
    assert device.nbytes == 9 and memory.blocks[device.address].tobytes() == packed.pack(values).tobytes()
    back = to_host(device)
    assert back.dtype == values.dtype and back.shape == (3, 6) and back.tobytes() == values.tobytes()
