"""Runtime scalar parameters on the host, without a GPU: what values a kernel's int and float
parameters take (`scalar_argument`), their bytes in the parameter block, refilled on every launch
without re-encoding a descriptor, and the errors that name the parameter."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError
from asyncdsl.kernel_binary import (
    KernelBinary,
    PointerParam,
    ScalarParam,
    TensorMapParam,
    TiledTensorMapSpec,
    scalar_argument,
)
from asyncdsl.runtime import DeviceArray, launch, params, tensormap

FLOAT32_MAX = float(np.finfo(np.float32).max)


@pytest.mark.parametrize("value", [0, -5, 2**31 - 1, -(2**31), np.int64(7), np.uint32(2**31 - 1)])
def test_ints_in_the_signed_32_bit_range_pass_as_python_ints(value):
    result = scalar_argument("int", value, "n")
    assert type(result) is int and result == int(value)


@pytest.mark.parametrize(
    "value, message",
    [
        (2**31, r"argument 'n' is 2147483648, outside the kernel's 32-bit int parameters \(-2147483648 "
                r"\.\. 2147483647\)"),
        (np.int64(-(2**31) - 1), "argument 'n' is -2147483649, outside"),
        (True, "argument 'n' of the kernel is a runtime int, but got bool True"),
        (2.0, "argument 'n' of the kernel is a runtime int, but got float 2.0"),
        ("3", "argument 'n' of the kernel is a runtime int, but got str$"),
    ],
)
def test_ints_that_do_not_fit_are_refused_naming_the_argument(value, message):
    with pytest.raises(ArgumentError, match=message):
        scalar_argument("int", value, "n")


def test_floats_are_rounded_to_float32_and_refused_beyond_its_range():
    assert scalar_argument("float", 0.1, "s") == float(np.float32(0.1))
    assert scalar_argument("float", 3, "s") == 3.0 and scalar_argument("float", np.float16(0.5), "s") == 0.5
    # Just below the midpoint to infinity rounds to the largest float32; the midpoint itself to infinity.
    assert scalar_argument("float", float(np.nextafter(2.0**128 - 2.0**103, 0)), "s") == FLOAT32_MAX
    with pytest.raises(ArgumentError,
                       match=r"argument 's' is 3.4028235677973366e\+38, beyond the float32 range"):
        scalar_argument("float", 2.0**128 - 2.0**103, "s")
    with pytest.raises(ArgumentError, match="beyond the float32 range"):
        scalar_argument("float", -1e300, "s")
    assert scalar_argument("float", float("-inf"), "s") == float("-inf")
    assert np.isnan(scalar_argument("float", float("nan"), "s"))
    assert scalar_argument("float", 1e-46, "s") == 0.0  # below the smallest subnormal
    with pytest.raises(ArgumentError,
                       match="argument 's' of the kernel is a runtime float, but got bool False"):
        scalar_argument("float", False, "s")



PAYLOAD_NAN = np.array(0x7FA00001, np.uint32).view(np.float32)[()]


@pytest.mark.parametrize("value", [float("nan"), -float("nan"), PAYLOAD_NAN])
def test_a_nan_float_argument_passes_as_the_canonical_nan_the_interpreter_gives_it(value):
    # A splat of the parameter reaches memory with its bits; the interpreter takes any NaN
    # argument as 0x7fffffff, and ctypes would pass 0x7fc00000, 0xffc00000 or the payload.
    cell = ctypes.c_float(scalar_argument("float", value, "s"))
    assert bytes(cell) == struct.pack("<I", 0x7FFFFFFF)

# -- the parameter block ---------------------------------------------------------------------------


def _binary(params_=None):
    spec = TiledTensorMapSpec(arg_index=0, dtype_code=dtypes.TMA_FLOAT32, element_bytes=4,
                              global_dims=(64, 32), global_strides=(128, 4), box_dims=(64, 32))
    return KernelBinary(
        name="k", ptx="", block=(128, 1, 1), descriptors=(spec,), arg_names=("x",),
        params=params_ or (PointerParam(0), ScalarParam(0, "int", "n"), ScalarParam(1, "float", "s"),
                           TensorMapParam(0)),
    )


def _packer(binary=None):
    binary = binary or _binary()
    caches = [tensormap.TensorMapCache(spec, lambda address: struct.pack("<Q", address) * 16)
              for spec in binary.descriptors]
    return params.KernelParams(binary, 0, caches, None), caches


def _slot(block_address, index, size):
    pointer = ctypes.c_void_p.from_address(block_address + 8 * index).value
    return pointer, ctypes.string_at(pointer, size)


def _array(address):
    return DeviceArray(address, (64 * 32,), (1,), dtypes.float32, 0)


def test_scalars_are_four_byte_parameters_refilled_on_every_launch():
    packer, caches = _packer()
    block = packer.pack([_array(0x7F0000010000)], stream=0, scalars=[-5, 0.1])
    assert _slot(block, 1, 4)[1] == struct.pack("<i", -5)
    assert _slot(block, 2, 4)[1] == struct.pack("<f", 0.1)
    cells = [_slot(block, index, 4)[0] for index in (1, 2)]
    packer.pack_addresses([0x7F0000010000], stream=0, scalars=[2**31 - 1, -2.5])
    assert [_slot(block, index, 4)[0] for index in (1, 2)] == cells  # the same cells, new values
    assert (_slot(block, 1, 4)[1] == struct.pack("<i", 2**31 - 1)
            and _slot(block, 2, 4)[1] == struct.pack("<f", -2.5))
    assert caches[0].encode_count == 1  # a new scalar re-encodes no descriptor
    assert packer.scalar_names == ("n", "s")


def test_packing_checks_the_scalars_and_names_them():
    packer, _ = _packer()
    x = _array(0x7F0000010000)
    with pytest.raises(ArgumentError, match=r"kernel 'k' takes 2 scalar\(s\) \(n, s\), but 1 were given"):
        packer.pack([x], stream=0, scalars=[1])
    with pytest.raises(ArgumentError, match="argument 'n' is 4294967296, outside"):
        packer.pack([x], stream=0, scalars=[2**32, 1.0])
    with pytest.raises(ArgumentError, match=r"argument 's' is 1e\+300, beyond the float32 range"):
        packer.pack_addresses([x.address], stream=0, scalars=[1, 1e300])
    with pytest.raises(ArgumentError, match="argument 'n' of the kernel is a runtime int, but got float 1.5"):
        packer.pack_addresses([x.address], stream=0, scalars=[1.5, 1.0])


def test_check_binary_refuses_misnumbered_or_unknown_scalars():
    launch.check_binary(_binary())
    with pytest.raises(ValueError, match="are not numbered 0, 1, ... in order"):
        launch.check_binary(_binary((PointerParam(0), ScalarParam(1, "int", "n"), TensorMapParam(0))))
    with pytest.raises(ValueError, match="a scalar parameter of unknown kind"):
        launch.check_binary(_binary((PointerParam(0), ScalarParam(0, "double", "n"), TensorMapParam(0))))
