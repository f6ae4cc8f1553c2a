"""TMA descriptors: check a spec against the rules of `cuTensorMapEncode*`, encode it for a base
address, and remember the result so a repeated launch with the same arrays encodes nothing; an
array at a new address gets a copy of the first encoding with only its address replaced.

Specs are in array order (outermost dimension first); the driver wants innermost first, with the
innermost stride implied.  The rules below are CUDA 13.0's (`cuda.h`), re-checked on an H200 where
the driver only ever answers CUDA_ERROR_INVALID_VALUE: we say which rule broke instead.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

from asyncdsl.errors import CopyError, CudaError, user_location
from asyncdsl.hw.im2col import corner_range
from asyncdsl.hw.limits import (
    DESCRIPTOR_ALIGNMENT,
    DESCRIPTOR_BYTES,
    GMEM_ADDRESS_ALIGNMENT,
    IM2COL_MAX_CHANNELS,
    IM2COL_MAX_PIXELS,
    MAX_BOX_DIM,
    MAX_ELEMENT_STRIDE,
    MAX_GLOBAL_DIM,
    MAX_GLOBAL_STRIDE,
)
from asyncdsl.hw.tma import view_extent_bytes
from asyncdsl.kernel_binary import Im2colTensorMapSpec, TensorMapSpec, TiledTensorMapSpec
from asyncdsl.runtime import driver, symmetric

# CUtensorMapDataType -> element bytes (the Blackwell-era packed 4/6-bit codes 13..15 are left out).
_ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
_FLOAT_CODES = frozenset({6, 7, 8, 9, 10, 11, 12})
_SWIZZLE_CODES = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
_L2_PROMOTION_CODES = {0: 0, 64: 1, 128: 2, 256: 3}  # bytes -> CUtensorMapL2promotion


def describe(spec: TensorMapSpec, index: int) -> str:
    kind = "im2col" if isinstance(spec, Im2colTensorMapSpec) else "tiled"
    return f"TMA descriptor {index} ({kind}, argument {spec.arg_index})"


def validate_spec(spec: TensorMapSpec, index: int = 0) -> None:
    """Raise `CopyError` naming the broken rule if the driver would reject `spec`."""
    where = describe(spec, index)

    def fail(rule: str) -> None:
        raise CopyError(f"{where}: {rule}", user_location())

    if isinstance(spec, TiledTensorMapSpec):
        if not 1 <= spec.rank <= 5:
            fail(f"a tiled TMA descriptor has rank 1 to 5, not {spec.rank} (global dims {spec.global_dims})")
    elif not 3 <= spec.rank <= 5:
        fail(f"an im2col TMA descriptor has rank 3 to 5, not {spec.rank} (global dims {spec.global_dims})")
    if spec.dtype_code not in _ELEMENT_BYTES:
        fail(f"TMA data type code {spec.dtype_code} is not one Hopper supports (0 to 12)")
    if spec.element_bytes != _ELEMENT_BYTES[spec.dtype_code]:
        fail(f"element size {spec.element_bytes} bytes does not match TMA data type code {spec.dtype_code} "
             f"({_ELEMENT_BYTES[spec.dtype_code]} bytes)")
    if len(spec.global_strides) != spec.rank:
        fail(f"{len(spec.global_strides)} global strides for {spec.rank} dims")
    if spec.global_strides[-1] != spec.element_bytes:
        fail(f"the innermost global stride is {spec.global_strides[-1]} bytes, but TMA needs it to be the "
             f"element size ({spec.element_bytes})")
    for dim, extent in enumerate(spec.global_dims):
        if not 1 <= extent <= MAX_GLOBAL_DIM:
            fail(f"TMA global dimension {extent} along dim {dim} is outside 1 .. 2^32")
    for dim, stride in enumerate(spec.global_strides[:-1]):
        if stride % 16:
            fail(f"TMA global stride {stride} bytes along dim {dim} is not a multiple of 16")
        if not 0 < stride < MAX_GLOBAL_STRIDE:
            fail(f"TMA global stride {stride} bytes along dim {dim} is outside 1 .. 2^40 - 1")
    if spec.element_strides:
        if len(spec.element_strides) != spec.rank:
            fail(f"{len(spec.element_strides)} element strides for {spec.rank} dims")
        for dim, stride in enumerate(spec.element_strides):
            if not 1 <= stride <= MAX_ELEMENT_STRIDE:
                fail(f"TMA element stride {stride} along dim {dim} is outside 1 .. 8")
    if spec.swizzle_bytes not in _SWIZZLE_CODES:
        fail(f"swizzle of {spec.swizzle_bytes} bytes; TMA swizzles 0, 32, 64 or 128 bytes")
    if spec.l2_promotion_bytes not in _L2_PROMOTION_CODES:
        fail(f"L2 promotion of {spec.l2_promotion_bytes} bytes; TMA promotes 0, 64, 128 or 256 bytes")
    if spec.oob_nan and spec.dtype_code not in _FLOAT_CODES:
        fail(f"NaN out-of-bounds fill needs a floating-point data type, not code {spec.dtype_code}")
    if spec.base_offset_bytes < 0 or spec.base_offset_bytes % GMEM_ADDRESS_ALIGNMENT:
        fail(f"base offset {spec.base_offset_bytes} bytes is not a non-negative multiple of "
             f"{GMEM_ADDRESS_ALIGNMENT} (TMA global addresses are 16-byte aligned)")
    if isinstance(spec, TiledTensorMapSpec):
        _validate_box(spec, fail)
    else:
        _validate_im2col(spec, fail)


def _validate_box(spec: TiledTensorMapSpec, fail: Callable[[str], None]) -> None:
    if len(spec.box_dims) != spec.rank:
        fail(f"{len(spec.box_dims)} box dims for {spec.rank} global dims")
    for dim, extent in enumerate(spec.box_dims):
        if not 1 <= extent <= MAX_BOX_DIM:
            fail(f"TMA box dimension {extent} {'> 256' if extent > MAX_BOX_DIM else '< 1'} along dim {dim}")
    inner_bytes = spec.box_dims[-1] * spec.element_bytes
    if inner_bytes % 16:
        fail(f"the innermost box dimension spans {inner_bytes} bytes ({spec.box_dims[-1]} x "
             f"{spec.element_bytes}); TMA needs a multiple of 16")
    if spec.swizzle_bytes and inner_bytes > spec.swizzle_bytes:
        fail(f"the innermost box dimension spans {inner_bytes} bytes, more than the "
             f"{spec.swizzle_bytes}-byte swizzle span; split the box or use a wider swizzle")


def _validate_im2col(spec: Im2colTensorMapSpec, fail: Callable[[str], None]) -> None:
    spatial = spec.rank - 2
    lowest, highest = corner_range(spec.rank)
    for which, corner in (("lower", spec.lower_corner), ("upper", spec.upper_corner)):
        if len(corner) != spatial:
            fail(f"the {which} corner has {len(corner)} entries; a rank-{spec.rank} im2col map has {spatial} "
                 "spatial dims")
        for dim, offset in enumerate(corner):
            if not lowest <= offset <= highest:
                fail(f"{which} corner offset {offset} along spatial dim {dim} is outside {lowest} .. "
                     f"{highest} (the range of a rank-{spec.rank} im2col map)")
    if not 1 <= spec.channels_per_pixel <= IM2COL_MAX_CHANNELS:
        fail(f"{spec.channels_per_pixel} channels per pixel is outside 1 .. 256")
    if not 1 <= spec.pixels_per_column <= IM2COL_MAX_PIXELS:
        fail(f"{spec.pixels_per_column} pixels per column is outside 1 .. 1024")
    inner_bytes = spec.channels_per_pixel * spec.element_bytes
    if spec.swizzle_bytes and inner_bytes > spec.swizzle_bytes:
        fail(f"{spec.channels_per_pixel} channels per pixel span {inner_bytes} bytes, more than the "
             f"{spec.swizzle_bytes}-byte swizzle span")


@dataclass(frozen=True)
class EncodeArguments:
    """The arguments of `cuTensorMapEncodeTiled`/`Im2col` except the address, as plain ints in
    the driver's innermost-first order."""

    data_type: int
    rank: int
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]  # rank - 1 entries: dim 0's stride is implied
    box_dims: tuple[int, ...]  # tiled only
    lower_corner: tuple[int, ...]  # im2col only
    upper_corner: tuple[int, ...]  # im2col only
    channels_per_pixel: int  # im2col only
    pixels_per_column: int  # im2col only
    element_strides: tuple[int, ...]
    swizzle: int
    l2_promotion: int
    oob_fill: int


def encode_arguments(spec: TensorMapSpec) -> EncodeArguments:
    tiled = spec if isinstance(spec, TiledTensorMapSpec) else None
    im2col = spec if isinstance(spec, Im2colTensorMapSpec) else None
    return EncodeArguments(
        data_type=spec.dtype_code,
        rank=spec.rank,
        global_dims=tuple(reversed(spec.global_dims)),
        global_strides=tuple(reversed(spec.global_strides[:-1])),
        box_dims=tuple(reversed(tiled.box_dims)) if tiled else (),
        lower_corner=tuple(reversed(im2col.lower_corner)) if im2col else (),
        upper_corner=tuple(reversed(im2col.upper_corner)) if im2col else (),
        channels_per_pixel=im2col.channels_per_pixel if im2col else 0,
        pixels_per_column=im2col.pixels_per_column if im2col else 0,
        element_strides=tuple(reversed(spec.element_strides)) if spec.element_strides else (1,) * spec.rank,
        swizzle=_SWIZZLE_CODES[spec.swizzle_bytes],
        l2_promotion=_L2_PROMOTION_CODES[spec.l2_promotion_bytes],
        oob_fill=1 if spec.oob_nan else 0,
    )


class TensorMapEncoder:
    """Encodes one validated spec for any base address.  The cuda-python argument objects
    (`cuuint64_t`/`cuuint32_t` lists: plain ints are rejected) are built once, here."""

    def __init__(self, spec: TensorMapSpec, index: int = 0):
        validate_spec(spec, index)
        self.spec = spec
        self._where = describe(spec, index)
        cu = driver.api()
        args = encode_arguments(spec)
        self._args = args
        shape_of_box: tuple[object, ...]
        if isinstance(spec, Im2colTensorMapSpec):
            self._call_name, self._encode = "cuTensorMapEncodeIm2col", cu.cuTensorMapEncodeIm2col
            shape_of_box = (list(args.lower_corner), list(args.upper_corner), args.channels_per_pixel,
                            args.pixels_per_column)
        else:
            self._call_name, self._encode = "cuTensorMapEncodeTiled", cu.cuTensorMapEncodeTiled
            shape_of_box = ([cu.cuuint32_t(extent) for extent in args.box_dims],)
        # The driver's argument order: data type, rank, address, then everything below.
        self._head = (cu.CUtensorMapDataType(args.data_type), args.rank)
        # A rank-1 map has no strides to pass, but cuda-python turns an empty list into a null
        # pointer, which the driver refuses (CUDA_ERROR_INVALID_VALUE, seen on the H200): pass one
        # stride it does not read, the array's whole extent rounded to 16 bytes.
        strides = (args.global_strides
                   or (-(-args.global_dims[0] * _ELEMENT_BYTES[args.data_type] // 16) * 16,))
        self._tail = (
            [cu.cuuint64_t(extent) for extent in args.global_dims],
            [cu.cuuint64_t(stride) for stride in strides],
            *shape_of_box,
            [cu.cuuint32_t(stride) for stride in args.element_strides],
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle(args.swizzle),
            cu.CUtensorMapL2promotion(args.l2_promotion),
            cu.CUtensorMapFloatOOBfill(args.oob_fill),
        )

    def encode(self, global_address: int) -> bytes:
        """The 128 bytes of the descriptor for a tensor starting at `global_address`."""
        if global_address % GMEM_ADDRESS_ALIGNMENT:
            raise CopyError(f"{self._where}: global address {global_address:#x} is not 16-byte aligned",
                            user_location())
        driver.activate_if_none()  # encoding needs an initialised driver and, to be safe, a context
        err, tensor_map = self._encode(*self._head, global_address, *self._tail)
        if err:
            error = driver.cuda_error(err, self._call_name)
            raise CudaError(f"{error.message} for {self._where} at {global_address:#x}: {self._args}",
                            error.location, code=error.code)
        return ctypes.string_at(tensor_map.getPtr(), DESCRIPTOR_BYTES)

    def replace_address(self, image_address: int, global_address: int) -> None:
        """Point the encoded descriptor at `image_address` (64-byte aligned host memory) at
        `global_address`, in place (`cuTensorMapReplaceAddress`: nothing else changes)."""
        if global_address % GMEM_ADDRESS_ALIGNMENT:
            raise CopyError(f"{self._where}: global address {global_address:#x} is not 16-byte aligned",
                            user_location())
        replace = driver.entry_point("cuTensorMapReplaceAddress", ctypes.c_void_p, ctypes.c_void_p)
        err = replace(image_address, global_address)
        if err == driver.CUDA_ERROR_INVALID_CONTEXT:  # a thread with no current context yet
            driver.activate_if_none()
            err = replace(image_address, global_address)
        if err:
            error = driver.cuda_error(err, "cuTensorMapReplaceAddress")
            raise CudaError(f"{error.message} for {self._where} at {global_address:#x}", error.location,
                            code=error.code)


class _ImageSlab:
    """Host memory for `SLAB_IMAGES` descriptors, each in a 64-byte aligned 128-byte slot (the
    alignment of `CUtensorMap`, which `cuTensorMapReplaceAddress` checks).  A slot is written once
    and never again: a parameter block may point at it for as long as it holds the slab."""

    __slots__ = ("_storage", "base", "skip", "view", "used")

    def __init__(self):
        self._storage = (ctypes.c_ubyte * (SLAB_IMAGES * DESCRIPTOR_BYTES + DESCRIPTOR_ALIGNMENT - 1))()
        start = ctypes.addressof(self._storage)
        self.base = (start + DESCRIPTOR_ALIGNMENT - 1) & ~(DESCRIPTOR_ALIGNMENT - 1)
        self.skip = self.base - start  # where the first slot starts in `view`
        self.view = memoryview(self._storage).cast("B")  # slice assignment: a third of a memmove call
        self.used = 0


SLAB_IMAGES = 64


class TensorMapImage:
    """One encoded descriptor at `address` in host memory; holds the slab it lives in."""

    __slots__ = ("slab", "address")

    def __init__(self, slab: _ImageSlab, address: int):
        self.slab = slab
        self.address = address

    def data(self) -> bytes:
        return ctypes.string_at(self.address, DESCRIPTOR_BYTES)


class TensorMapCache:
    """The encoded images of one descriptor, keyed by the base address of its argument.

    The spec fixes everything but the address, so an address seen before needs no driver call,
    and a new one only `cuTensorMapReplaceAddress` on a copy of the first image (a few hundred
    nanoseconds against several microseconds for a full encode).  `images` is read directly by
    the launch path; `encode_count` and `replace_count` let tests and benchmarks check how often
    each happened."""

    capacity = 4096  # distinct addresses kept before the cache starts over

    def __init__(
        self,
        spec: TensorMapSpec,
        encode: Callable[[int], bytes],
        replace_address: Callable[[int, int], None] | None = None,
    ):
        self.spec = spec
        self.footprint = view_extent_bytes(spec)
        self.images: dict[int, TensorMapImage] = {}
        self.encode_count = 0
        self.replace_count = 0
        self._encode = encode
        self._replace_address = replace_address
        self._template: bytes | None = None  # the first encoding, which new addresses start from
        self._slab = _ImageSlab()

    def image(self, array_address: int) -> TensorMapImage:
        image = self.images.get(array_address)
        if image is None:
            image = self.encode(array_address)
        return image

    def encode(self, array_address: int) -> TensorMapImage:
        """The image for an address not seen yet (the cold path of `image`)."""
        if len(self.images) >= self.capacity:
            self.images.clear()  # images still pointed at stay alive through their slabs
        spec = self.spec
        peer = spec.peer if isinstance(spec, TiledTensorMapSpec) else -1
        located = array_address if peer < 0 else symmetric.peer_address(
            array_address, peer, f"argument {spec.arg_index}")
        global_address = located + spec.base_offset_bytes
        template = self._template
        if template is None or self._replace_address is None:
            image = self._new_image(self._encode(global_address))
            self.encode_count += 1
            self._template = template or image.data()
        else:
            image = self._new_image(template)
            self._replace_address(image.address, global_address)
            self.replace_count += 1
        self.images[array_address] = image
        return image

    def _new_image(self, data: bytes) -> TensorMapImage:
        """`data` in the next free slot."""
        slab = self._slab
        if slab.used == SLAB_IMAGES:
            slab = self._slab = _ImageSlab()
        offset = slab.used * DESCRIPTOR_BYTES
        slab.used += 1
        start = slab.skip + offset
        slab.view[start:start + DESCRIPTOR_BYTES] = data
        return TensorMapImage(slab, slab.base + offset)
