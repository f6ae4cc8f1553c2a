"""What the compiler hands the runtime: PTX text plus everything needed to launch it.

This is the contract between `passes/` (which decide) and `asyncdsl/runtime` (which executes).
Shapes in descriptor specs are in array order (outermost dimension first, like numpy); the
runtime reverses them into the innermost-first order of `cuTensorMapEncode*`.
"""

from __future__ import annotations

import ctypes
import math
import numbers
import struct
from dataclasses import dataclass, field

from asyncdsl.errors import ArgumentError, user_location


@dataclass(frozen=True)
class TiledTensorMapSpec:
    """The host-side encoding of one tiled TMA descriptor (`cuTensorMapEncodeTiled`).

    The descriptor views the memory of kernel argument `arg_index` (plus `base_offset_bytes`) as
    an array of `global_dims` elements with byte strides `global_strides`; the innermost stride
    must equal the element size.  `box_dims` is the box one TMA instruction moves.
    """

    arg_index: int
    dtype_code: int  # CUtensorMapDataType
    element_bytes: int
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]  # bytes, one per dim, innermost == element_bytes
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...] = ()  # empty means all ones
    swizzle_bytes: int = 0  # 0, 32, 64 or 128
    oob_nan: bool = False  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA instead of zeros
    l2_promotion_bytes: int = 0  # 0, 64, 128 or 256
    base_offset_bytes: int = 0
    # -1: the argument's own memory.  pe >= 0: the same symmetric array on device pe, at the
    # address its NVSHMEM heap is mapped to here (`runtime/symmetric.py`); a copy that names a
    # peer uses descriptors for pe = 0 .. devices - 1 in consecutive scratch slots.
    peer: int = -1

    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def box_bytes(self) -> int:
        count = 1
        for d in self.box_dims:
            count *= d
        return count * self.element_bytes


@dataclass(frozen=True)
class Im2colTensorMapSpec:
    """The host-side encoding of one im2col TMA descriptor (`cuTensorMapEncodeIm2col`).

    `global_dims` is (N, [D,] [H,] W, C) in array order; the corners have one entry per spatial
    dim in array order (D, H, W).
    """

    arg_index: int
    dtype_code: int
    element_bytes: int
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]
    lower_corner: tuple[int, ...]
    upper_corner: tuple[int, ...]
    channels_per_pixel: int
    pixels_per_column: int
    element_strides: tuple[int, ...] = ()
    swizzle_bytes: int = 0
    oob_nan: bool = False
    l2_promotion_bytes: int = 0
    base_offset_bytes: int = 0

    @property
    def rank(self) -> int:
        return len(self.global_dims)


TensorMapSpec = TiledTensorMapSpec | Im2colTensorMapSpec


@dataclass(frozen=True)
class PointerParam:
    """A `.u64` kernel parameter: the device address of kernel argument `arg_index`."""

    arg_index: int


@dataclass(frozen=True)
class TensorMapParam:
    """A 128-byte by-value kernel parameter holding descriptor `descriptor_index`
    (the `__grid_constant__ CUtensorMap` convention)."""

    descriptor_index: int


@dataclass(frozen=True)
class DescriptorScratchParam:
    """A `.u64` kernel parameter: a device buffer holding every descriptor of the kernel, each
    in a 128-byte slot at `slot_offsets[i]` (64-byte aligned), encoded by the host before launch."""

    slot_offsets: tuple[int, ...]

    @property
    def size_bytes(self) -> int:
        return (max(self.slot_offsets) + 128) if self.slot_offsets else 0


@dataclass(frozen=True)
class RuntimeCheck:
    """An assumption a debug-mode kernel checks at run time: what its failure means, and where."""

    message: str
    file: str
    line: int


@dataclass(frozen=True)
class ErrorBufferParam:
    """A `.u64` kernel parameter of a debug-mode kernel: 16 bytes of device memory, zeroed before
    each launch, where the first failing check writes its number (1 + its index in `checks`) and
    the CTA's x, y, z (four u32)."""

    checks: tuple[RuntimeCheck, ...]


@dataclass(frozen=True)
class ProfileBufferParam:
    """A `.u64` kernel parameter of a profiled kernel: the GMEM buffer its warpgroups record region
    entries and exits in (`asyncdsl.hw.profile` has the layout), allocated and zeroed for each
    launch by the runtime, `events_per_warpgroup` events per (CTA, warpgroup) record.
    `region_names[i]` is the region that events tag with number i."""

    region_names: tuple[str, ...]
    events_per_warpgroup: int


@dataclass(frozen=True)
class PeerTableParam:
    """A `.u64` kernel parameter of a kernel that uses `device_id` or addresses a peer: the
    device address of this device's peer table, `devices + 1` 64-bit words: its rank, then for
    every device pe the byte offset from a symmetric array's address here to the address device
    pe's copy is mapped at (`runtime/symmetric.py` builds it).  `arg_indices` are the arguments
    the kernel addresses on peers (signals through the offsets, TMA copies through descriptors
    encoded on the peers' addresses): the runtime checks they lie on the symmetric heap."""

    devices: int
    arg_indices: tuple[int, ...]


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Kernels are specialized on whether each int argument is a multiple of this (Triton's choice: 16
# bytes is what TMA and bulk copies need of addresses), never on the value.
INT_SPECIALIZATION_DIVISOR = 16


def constexpr_key(value: object) -> tuple:
    """What a kernel is specialised on for constexpr `value`: its type with it (1, 1.0 and True
    are equal but trace different kernels), a float by its bits (0.0 and -0.0 are equal but not
    the same constant, and a NaN equals nothing, not even itself), a tuple item by item.
    `constexpr_value` turns a key back into the value."""
    kind = type(value)
    if kind is float:
        return float, struct.pack("<d", value)
    if kind is tuple:
        return tuple, tuple(constexpr_key(item) for item in value)  # type: ignore[attr-defined]
    return kind, value


def constexpr_value(key: tuple) -> object:
    """The constexpr `constexpr_key` made `key` of."""
    kind, part = key
    if kind is float:
        return struct.unpack("<d", part)[0]
    if kind is tuple:
        return tuple(constexpr_value(item) for item in part)
    return part


# The least magnitude that rounds to infinity in float32 (halfway past the largest finite value).
_FLOAT32_OVERFLOW = 2.0**128 - 2.0**103
# A NaN argument is the canonical float32 NaN, 0x7fffffff, as the interpreter takes it: the
# parameter's bits reach memory unchanged through `mov`, `selp` and stores, and `ctypes.c_float`
# would pass 0x7fc00000 for float("nan") (0xffc00000 for its negation, a numpy NaN's payload).
_CANONICAL_NAN = struct.unpack("<f", struct.pack("<I", 0x7FFFFFFF))[0]


def scalar_argument(kind: str, value: object, name: str) -> int | float:
    """`value` as kernel `int`/`float` argument `name` receives it: an int in the signed 32-bit
    range (the lowering's index registers), or a float rounded to float32.  Anything else, or a
    number that does not fit, is an `ArgumentError` naming the argument."""
    # `type(...) is` first: this runs on every warm launch, and the ABC checks are slower.
    number: int | float
    if kind == "int":
        if type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
            number = int(value)
            if INT32_MIN <= number <= INT32_MAX:
                return number
            raise ArgumentError(
                f"argument {name!r} is {number}, outside the kernel's 32-bit int parameters "
                f"({INT32_MIN} .. {INT32_MAX})",
                user_location(),
            )
    elif type(value) is float or (isinstance(value, numbers.Real) and not isinstance(value, bool)):
        try:
            number = float(value)
        except OverflowError:  # an integer (or a fraction) past every float
            size = "a number"
            if isinstance(value, numbers.Integral):
                size = f"an int of {int(value).bit_length()} bits"
            raise ArgumentError(f"argument {name!r} is {size}, beyond the float32 range of the kernel's "
                                "float parameters", user_location()) from None
        if math.isfinite(number) and abs(number) >= _FLOAT32_OVERFLOW:
            raise ArgumentError(
                f"argument {name!r} is {number!r}, beyond the float32 range of the kernel's float "
                "parameters (it would round to infinity)",
                user_location(),
            )
        if math.isnan(number):
            return _CANONICAL_NAN
        return ctypes.c_float(number).value
    shown = f" {value!r}" if isinstance(value, numbers.Number) else ""
    raise ArgumentError(
        f"argument {name!r} of the kernel is a runtime {kind}, but got {type(value).__name__}{shown}",
        user_location(),
    )


@dataclass(frozen=True)
class ScalarParam:
    """A 4-byte by-value kernel parameter: runtime scalar `scalar_index` of a launch (the kernel's
    argument `name`), `.s32` for kind "int" and `.f32` for kind "float"."""

    scalar_index: int
    kind: str  # "int" or "float"
    name: str


KernelParam = (
    PointerParam | TensorMapParam | DescriptorScratchParam | ErrorBufferParam
    | ProfileBufferParam | ScalarParam
    | PeerTableParam
)


@dataclass(frozen=True)
class KernelBinary:
    """A compiled kernel: PTX for one entry point and how to launch it."""

    name: str
    ptx: str
    params: tuple[KernelParam, ...]
    descriptors: tuple[TensorMapSpec, ...]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int] = (1, 1, 1)
    dynamic_smem_bytes: int = 0  # includes the slack for run-time 1024-byte alignment
    arch: str = "sm_90a"
    arg_names: tuple[str, ...] = field(default=())  # the array arguments' (a ScalarParam names its own)
