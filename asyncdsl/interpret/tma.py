"""The TMA copy engine on the CPU: boxes between a GMEM argument's bytes and shared memory.

A TMA copy is two independent steps, and so is its emulation:

1. GMEM side (`load_box`, `store_box`): a tensor map views a flat buffer as an array of
   `global_dims` elements with byte strides `global_strides` (array order, outermost first), and
   one instruction moves the box of `box_dims` elements whose origin is at `coords` in that view.
   Loads zero-fill what lies outside the view, negative coordinates included; stores skip what
   lies past the high end and fault at negative coordinates (docs/hardware.md §3.3).
2. SMEM side (`box_to_smem_bytes`, `smem_bytes_to_box`): where each byte of the box lands in
   shared memory.  Box rows are padded to the swizzle span and each 16-byte chunk moves by the
   swizzle of its absolute shared address (`asyncdsl.hw.swizzle`).

The tensor map is anything shaped like `TensorMapView`: a `kernel_binary.TiledTensorMapSpec` or a
`hw.tma.TmaCopyPlan`.  Buffers are numpy arrays; everything is vectorised.

The interpreter's copies take a faster road to the same bytes (`read_gmem_box`, `write_gmem_box`,
`write_smem_box`, `read_smem_box`; the test suite runs grids of thousands of CTAs): boxes travel
as raw bytes (shape `(*box, element_bytes)`) so that every dtype, NaN payloads included, moves
bit for bit; with unit element strides the in-bounds part of a box is a strided window of the
argument's bytes (a numpy view, no index arrays), and a swizzled box moves as 16-byte chunks whose
positions come from `smem_byte_offsets`, cached per layout.  Element strides and NaN fill go
through `load_box`/`store_box` themselves.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np
from numpy.lib.stride_tricks import as_strided
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.errors import ArgumentError, AsyncDSLError, CopyError, InterpretError, OutOfBoundsError
from asyncdsl.hw.limits import (
    MIN_INNER_BOX_BYTES,
    SWIZZLE_CHUNK,
    SWIZZLE_PERIOD,
    SWIZZLE_SPANS,
    TMA_SMEM_ALIGNMENT,
)
from asyncdsl.hw.swizzle import swizzled
from asyncdsl.hw.tma import view_extent_bytes
from asyncdsl.interpret.collective import multicast_destinations, pair_leader
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.distributed import peer_of
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import SmemBuffer
from asyncdsl.interpret.operands import barrier_address, operand_values, predicated_off
from asyncdsl.interpret.races import AsyncRead, AsyncWrite
from asyncdsl.interpret.reduction import combine
from asyncdsl.interpret.state import Warpgroup
from asyncdsl.kernel_binary import TiledTensorMapSpec
from asyncdsl.ir_locations import from_ir_location

_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_OOB_NAN_HALFWORD = b"\xf7\x7f"  # f32 out-of-bounds NaN reads back 0x7FF77FF7 [HW]


class TensorMapView(Protocol):
    """What the emulation needs of a tiled tensor map (all in array order), read-only: the specs
    are frozen dataclasses, hashable for the caches of their shapes."""

    @property
    def element_bytes(self) -> int: ...
    @property
    def global_dims(self) -> tuple[int, ...]: ...
    @property
    def global_strides(self) -> tuple[int, ...]: ...  # bytes
    @property
    def box_dims(self) -> tuple[int, ...]: ...
    @property
    def element_strides(self) -> tuple[int, ...]: ...  # empty means all ones
    @property
    def base_offset_bytes(self) -> int: ...
    @property
    def oob_nan(self) -> bool: ...
    def __hash__(self) -> int: ...


@lru_cache(maxsize=512)
def box_shape(tensor_map: TensorMapView) -> tuple[int, ...]:
    """The shape of the array one copy moves.

    Equal to `box_dims` unless element strides skip elements: a stride `s` keeps
    `ceil(box / s)` of them, except along the innermost dim, where the stride is ignored.
    """
    strides = tensor_map.element_strides or (1,) * len(tensor_map.box_dims)
    *outer, inner = tensor_map.box_dims
    return (*(-(-box // stride) for box, stride in zip(outer, strides)), inner)


def load_box(
    gmem: np.ndarray,
    tensor_map: TensorMapView,
    coords: Sequence[int],
    dtype: np.dtype | type | None = None,
) -> np.ndarray:
    """The box at `coords` (array order) of `tensor_map`'s view of the buffer `gmem`.

    `gmem` is the whole buffer of the kernel argument (any shape, C-contiguous); its bytes are
    what the descriptor views.  The result has `box_shape(tensor_map)` elements of `dtype`
    (default `gmem.dtype`, whose size must be the map's element size).  Elements outside the
    view are zeros, or NaN when the map asks for NaN fill.
    """
    elements = _element_buffer(gmem, tensor_map, gmem.dtype if dtype is None else dtype)
    offsets, in_bounds = _box_elements(tensor_map, coords)
    box = elements[np.where(in_bounds, offsets, 0)]
    box[~in_bounds] = _fill_value(tensor_map, elements.dtype)
    return box


def store_box(
    gmem: np.ndarray, tensor_map: TensorMapView, coords: Sequence[int], box: np.ndarray
) -> None:
    """Write `box` (elements of the map's size) at `coords` of `tensor_map`'s view of `gmem`.

    Elements past the high end of the view are skipped, as the hardware clips them.  A negative
    coordinate raises OutOfBoundsError: the H200 faults on such stores.
    """
    coords = tuple(operator.index(c) for c in coords)
    for dim, coord in enumerate(coords):
        if coord < 0:
            raise OutOfBoundsError(
                f"TMA store at coordinate {coord} along dim {dim} (coords {coords}): stores at "
                "negative coordinates fault on the H200 (CUDA_ERROR_ILLEGAL_INSTRUCTION)"
            )
    expected = box_shape(tensor_map)
    if box.shape != expected:
        raise ValueError(f"box of shape {box.shape} stored through a map whose box is {expected}")
    if not gmem.flags.writeable:
        raise ValueError("the GMEM buffer of a TMA store must be writable")
    elements = _element_buffer(gmem, tensor_map, box.dtype)
    offsets, in_bounds = _box_elements(tensor_map, coords)
    elements[offsets[in_bounds]] = box[in_bounds]


def _element_buffer(gmem: np.ndarray, tensor_map: TensorMapView, dtype) -> np.ndarray:
    """`gmem`'s bytes from the map's base as a flat array of `dtype` (a view, for stores)."""
    dtype = np.dtype(dtype)
    if dtype.itemsize != tensor_map.element_bytes:
        raise ValueError(
            f"{dtype} has {dtype.itemsize}-byte elements, the tensor map {tensor_map.element_bytes}"
        )
    if not gmem.flags.c_contiguous:
        raise ValueError("TMA emulation needs the whole GMEM buffer as a C-contiguous array")
    raw = gmem.reshape(-1).view(np.uint8)
    base = tensor_map.base_offset_bytes
    extent = view_extent_bytes(tensor_map)
    if extent > raw.size:
        raise OutOfBoundsError(
            f"the tensor map views bytes up to {extent} of a {raw.size}-byte GMEM buffer "
            f"(dims {tensor_map.global_dims}, byte strides {tensor_map.global_strides})"
        )
    usable = (raw.size - base) // dtype.itemsize * dtype.itemsize
    return raw[base : base + usable].view(dtype)


def _box_elements(
    tensor_map: TensorMapView, coords: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """(element offset, in bounds) of every element of the box, each of the box's shape."""
    rank = len(tensor_map.global_dims)
    coords = tuple(operator.index(c) for c in coords)
    if len(coords) != rank:
        raise ValueError(f"{len(coords)} coordinates given for a rank-{rank} tensor map")
    element_strides = tensor_map.element_strides or (1,) * rank
    offsets = np.zeros((), dtype=np.int64)
    in_bounds = np.ones((), dtype=bool)
    for dim in range(rank):
        step = 1 if dim == rank - 1 else element_strides[dim]
        index = coords[dim] + np.arange(0, tensor_map.box_dims[dim], step, dtype=np.int64)
        shape = (1,) * dim + (index.size,) + (1,) * (rank - dim - 1)
        stride = tensor_map.global_strides[dim] // tensor_map.element_bytes
        offsets = offsets + (index * stride).reshape(shape)
        in_bounds = in_bounds & ((index >= 0) & (index < tensor_map.global_dims[dim])).reshape(
            shape
        )
    return offsets, np.broadcast_to(in_bounds, offsets.shape)


def _fill_value(tensor_map: TensorMapView, dtype: np.dtype):
    if not tensor_map.oob_nan:
        return 0
    if dtype.itemsize < 2:
        raise ValueError(f"NaN out-of-bounds fill needs 16-, 32- or 64-bit floats, not {dtype}")
    # Observed for f32; other widths are assumed to repeat the same 16-bit NaN pattern.
    return np.frombuffer(_OOB_NAN_HALFWORD * (dtype.itemsize // 2), dtype=dtype)[0]


def smem_footprint_bytes(box_shape: Sequence[int], element_bytes: int, swizzle_bytes: int) -> int:
    """Shared-memory bytes a box occupies: rows are padded to the swizzle span."""
    rows = math.prod(box_shape[:-1])
    return rows * (swizzle_bytes or box_shape[-1] * element_bytes)


def smem_byte_offsets(
    box_shape: Sequence[int], element_bytes: int, swizzle_bytes: int, base_address: int
) -> np.ndarray:
    """Where each byte of the box lands, relative to `base_address`: shape (rows, row bytes).

    A row is one step of the non-innermost box dims (flattened, last fastest).
    """
    inner = box_shape[-1] * element_bytes
    _check_smem_layout(inner, swizzle_bytes, base_address)
    rows = math.prod(box_shape[:-1])
    pitch = swizzle_bytes or inner
    address = base_address + (
        np.arange(rows, dtype=np.int64)[:, None] * pitch + np.arange(inner, dtype=np.int64)
    )
    return swizzled(address, swizzle_bytes) - base_address


def _check_smem_layout(inner_bytes: int, swizzle_bytes: int, base_address: int) -> None:
    if swizzle_bytes not in SWIZZLE_SPANS:
        raise CopyError(f"swizzle must be 0, 32, 64 or 128 bytes, got {swizzle_bytes}")
    if inner_bytes % MIN_INNER_BOX_BYTES:
        raise CopyError(
            f"box rows of {inner_bytes} bytes: TMA needs a multiple of {MIN_INNER_BOX_BYTES}"
        )
    if swizzle_bytes and inner_bytes > swizzle_bytes:
        raise CopyError(
            f"box rows of {inner_bytes} bytes do not fit the {swizzle_bytes}-byte swizzle span"
        )
    _check_smem_alignment(base_address)


def _check_smem_alignment(address: int) -> None:
    if address % TMA_SMEM_ALIGNMENT:
        raise InterpretError(
            f"TMA shared-memory address {address} is not {TMA_SMEM_ALIGNMENT}-byte aligned: "
            "the H200 faults (CUDA_ERROR_MISALIGNED_ADDRESS)"
        )


def box_to_smem_bytes(
    box: np.ndarray, swizzle_bytes: int, base_address: int, smem: np.ndarray | None = None
) -> np.ndarray:
    """Lay `box` out in shared memory as a TMA load does; returns the bytes from `base_address`.

    `smem` (uint8, at least `smem_footprint_bytes` long) is shared memory starting at
    `base_address`, written in place: row padding is left untouched, as by the hardware.
    Without it a zeroed buffer of the footprint is returned.
    """
    offsets = smem_byte_offsets(box.shape, box.itemsize, swizzle_bytes, base_address)
    if smem is None:
        smem = np.zeros(smem_footprint_bytes(box.shape, box.itemsize, swizzle_bytes), np.uint8)
    smem[offsets] = np.ascontiguousarray(box).view(np.uint8).reshape(offsets.shape)
    return smem


def smem_bytes_to_box(
    smem: np.ndarray,
    box_shape: Sequence[int],
    dtype: np.dtype | type,
    swizzle_bytes: int,
    base_address: int,
) -> np.ndarray:
    """The box a TMA store reads from shared memory `smem` (uint8, starting at `base_address`)."""
    dtype = np.dtype(dtype)
    offsets = smem_byte_offsets(box_shape, dtype.itemsize, swizzle_bytes, base_address)
    return np.ascontiguousarray(smem[offsets]).view(dtype).reshape(tuple(box_shape))


# -- the interpreter's fast road ------------------------------------------------------------


@lru_cache(maxsize=512)
def descriptor_spec(descriptor: TmaDescriptorAttr) -> TiledTensorMapSpec:
    """The host encoding an IR descriptor stands for (cached: attributes are immutable)."""
    return descriptor.spec()


def box_bytes(spec: TiledTensorMapSpec) -> int:
    """Bytes one copy delivers to SMEM, and completes on its barrier, even out of bounds."""
    return math.prod(box_shape(spec)) * spec.element_bytes


def smem_footprint(spec: TiledTensorMapSpec) -> int:
    """Bytes of SMEM a box spans: rows are padded to the swizzle span."""
    return smem_footprint_bytes(box_shape(spec), spec.element_bytes, spec.swizzle_bytes)


def _fast(spec: TiledTensorMapSpec) -> bool:
    return not spec.oob_nan and all(stride == 1 for stride in spec.element_strides)


def check_view_fits(
    raw: np.ndarray, spec: TiledTensorMapSpec, argument: str, descriptor: str = "the TMA descriptor"
) -> None:
    """The descriptor's view lies inside `raw` (argument `argument`'s bytes), or the GPU faults."""
    last = view_extent_bytes(spec)
    if last > raw.size:
        raise OutOfBoundsError(
            f"{descriptor} views bytes up to {last} of argument {argument!r}, which has "
            f"{raw.size} (dims {spec.global_dims}, byte strides {spec.global_strides})"
        )


def _window(raw: np.ndarray, spec: TiledTensorMapSpec, lows, highs) -> np.ndarray:
    """The bytes of view elements [lows, highs) as an array of shape (*extent, element_bytes)."""
    start = spec.base_offset_bytes + sum(low * stride for low, stride in zip(lows, spec.global_strides))
    shape = tuple(high - low for low, high in zip(lows, highs)) + (spec.element_bytes,)
    return as_strided(raw[start:], shape=shape, strides=(*spec.global_strides, 1))


def _in_bounds(spec: TiledTensorMapSpec, coords) -> tuple[list[int], list[int]]:
    lows = [min(max(c, 0), d) for c, d in zip(coords, spec.global_dims)]
    highs = [max(min(c + b, d), low) for c, b, d, low in zip(coords, spec.box_dims, spec.global_dims, lows)]
    return lows, highs


def read_gmem_box(raw: np.ndarray, spec: TiledTensorMapSpec, coords, argument: str) -> np.ndarray:
    """The box at `coords` of the descriptor's view of `raw` (an argument's bytes), as bytes."""
    check_view_fits(raw, spec, argument)
    element = _UINT_OF_SIZE[spec.element_bytes]
    if not _fast(spec):
        box = load_box(raw, spec, coords, dtype=element)
        return box.view(np.uint8).reshape(*box.shape, spec.element_bytes)
    box = np.zeros((*spec.box_dims, spec.element_bytes), np.uint8)
    lows, highs = _in_bounds(spec, coords)
    if all(high > low for low, high in zip(lows, highs)):
        inside = tuple(slice(low - c, high - c) for low, high, c in zip(lows, highs, coords))
        box[inside] = _window(raw, spec, lows, highs)
    return box


def write_gmem_box(raw: np.ndarray, spec: TiledTensorMapSpec, coords, box: np.ndarray, argument: str) -> None:
    """Store `box` (bytes, as `read_gmem_box` returns) at `coords`, clipped at the high end."""
    check_view_fits(raw, spec, argument)
    if not raw.flags.writeable:
        raise ArgumentError(f"TMA store to argument {argument!r}, whose numpy array is read-only")
    for dim, coord in enumerate(coords):
        if coord < 0:
            raise OutOfBoundsError(
                f"TMA store to argument {argument!r} at coordinate {coord} along dim {dim} "
                f"(coordinates {tuple(coords)}): stores at negative coordinates fault on the H200 "
                "(CUDA_ERROR_ILLEGAL_INSTRUCTION)"
            )
    if not _fast(spec):
        element = _UINT_OF_SIZE[spec.element_bytes]
        store_box(raw, spec, coords, box.view(element).reshape(box.shape[:-1]))
        return
    lows, highs = _in_bounds(spec, coords)
    if all(high > low for low, high in zip(lows, highs)):
        inside = tuple(slice(low - c, high - c) for low, high, c in zip(lows, highs, coords))
        _window(raw, spec, lows, highs)[...] = box[inside]


@lru_cache(maxsize=256)
def _chunk_positions(rows: int, inner_bytes: int, swizzle: int, phase: int) -> np.ndarray:
    """Where each 16-byte chunk of a box lands, in chunks from the box's SMEM offset.

    `phase` is the offset modulo the swizzle period; the CTA's base is 1024-aligned, so it is
    all of the absolute address the pattern depends on.
    """
    offsets = smem_byte_offsets((rows, inner_bytes), 1, swizzle, phase)
    return (offsets[:, ::SWIZZLE_CHUNK] // SWIZZLE_CHUNK).reshape(-1)


def _smem_layout(spec: TiledTensorMapSpec, offset: int):
    _check_smem_alignment(offset)
    shape = box_shape(spec)
    rows = math.prod(shape[:-1])
    inner = shape[-1] * spec.element_bytes
    if not spec.swizzle_bytes:
        return rows, inner, None
    return rows, inner, _chunk_positions(rows, inner, spec.swizzle_bytes, offset % SWIZZLE_PERIOD)


def write_smem_box(smem: np.ndarray, offset: int, spec: TiledTensorMapSpec, box: np.ndarray) -> None:
    """Lay `box` (bytes) out in `smem` at `offset` as a TMA load does; padding stays untouched."""
    rows, inner, chunks = _smem_layout(spec, offset)
    if chunks is None:
        smem[offset : offset + rows * inner] = box.reshape(-1)
        return
    region = smem[offset : offset + rows * spec.swizzle_bytes].reshape(-1, SWIZZLE_CHUNK)
    region[chunks] = box.reshape(-1, SWIZZLE_CHUNK)


def read_smem_box(smem: np.ndarray, offset: int, spec: TiledTensorMapSpec) -> np.ndarray:
    """The box (bytes, shape `(*box, element_bytes)`) a TMA store reads from `smem` at `offset`."""
    rows, inner, chunks = _smem_layout(spec, offset)
    shape = (*box_shape(spec), spec.element_bytes)
    if chunks is None:
        return smem[offset : offset + rows * inner].reshape(shape)
    region = smem[offset : offset + rows * spec.swizzle_bytes].reshape(-1, SWIZZLE_CHUNK)
    return region[chunks].reshape(shape)


def write_smem_rows(smem: np.ndarray, start: int, end: int, spec, rows: np.ndarray) -> None:
    """Lay `rows` (bytes, shape `(*rows, columns, element_bytes)`) into `smem[start:end]` as a TMA
    load lays a tiled box of those rows: swizzled on their absolute address (im2col rows, gathered
    rows)."""
    elements = rows.view(np.dtype(f"u{spec.element_bytes}")).reshape(rows.shape[:-1])
    box_to_smem_bytes(elements, spec.swizzle_bytes, start, smem[start:end])


def smem_box_range(warpgroup: Warpgroup, buffer: SmemBuffer, spec: TiledTensorMapSpec,
                   what: str) -> tuple[int, int]:
    """The bytes [start, end) of shared memory a box of `spec` spans in `buffer`, checked."""
    length = smem_footprint(spec)
    if length > buffer.nbytes:
        raise OutOfBoundsError(
            f"{what} spans {length} bytes of shared memory but its buffer (allocated at "
            f"{buffer.origin}) holds {buffer.nbytes}"
        )
    warpgroup.cta.smem.check(buffer.offset, length, what)
    return buffer.offset, buffer.offset + length


def reduce_gmem_box(
    raw: np.ndarray, spec: TiledTensorMapSpec, coords, box: np.ndarray, op: str, argument: str
) -> None:
    """Combine `box` (bytes, as `read_smem_box` returns) into the box at `coords` of the
    descriptor's view of `raw` with reduction `op`: the copy engine's read-modify-write of each
    in-bounds element (past the high end skipped, negative coordinates faulting, as a store)."""
    current = read_gmem_box(raw, spec, coords, argument)  # zeros where out of bounds
    combined = combine(op, spec.dtype_code, current, box)
    result = np.ascontiguousarray(combined).view(np.uint8).reshape(box.shape)
    write_gmem_box(raw, spec, coords, result, argument)


@register_impls
class TmaFunctions(WarpgroupFunctions):
    """TMA tensor loads (plain, multicast and leader-tracked) and stores (and reductions).

    A multicast load (`multicast_mask`) reads its box once and, for every CTA of the mask, writes
    it at the same SMEM offset and completes its bytes on that CTA's barrier at the same offset.  A
    leader-tracked load (`partition`) completes every destination's bytes on the barrier of the
    pair's CTA at x = 0 instead; a partitioned one writes only its own CTA.  Each destination's race
    log records the write with the barrier phase that completes it.
    """

    @impl(ir.TmaLoadOp)
    @diagnosed
    def run_tma_load(self, interpreter: Interpreter, op: ir.TmaLoadOp, args: PythonValues):
        values = operand_values(op, args)
        if predicated_off(op, values):
            return ()
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        spec = descriptor_spec(op.descriptor)
        address = barrier_address(op, values)
        if op.expect_tx_bytes.value.data:
            warpgroup.mbarrier(address).arrive_expect_tx(
                op.expect_tx_bytes.value.data, warpgroup.clock,
                f"the TMA load at {origin(op)} in {warpgroup.label}")
        collective = op.multicast_mask is not None or op.partition is not None
        if op.multicast_mask is not None:
            what = "the multicast TMA load"
            destinations = multicast_destinations(cta, values[op.multicast_mask].value.data)
        else:
            what = "the partitioned TMA load" if collective else "the TMA load"
            destinations = [cta]
        tracker = pair_leader(cta) if op.partition is not None else None
        start, end = smem_box_range(warpgroup, values[op.smem], spec, what)
        for destination in destinations:
            target = f"{what} into {destination.label}" if collective else what
            destination.accesses.check_write(start, end, warpgroup.clock, target)
        argument = cta.launch.argument(spec.arg_index, peer_of(op, values))
        box = read_gmem_box(argument.raw, spec, [values[c].value.data for c in op.coords], argument.name)
        for destination in destinations:
            write_smem_box(destination.smem.bytes, start, spec, box)
            owner = tracker or destination
            barrier = owner.mbarriers[address]
            try:
                phase = barrier.complete_tx(box_bytes(spec))
            except AsyncDSLError as error:
                if not collective:
                    raise
                raise type(error)(f"in {owner.label}: {error.message}") from None
            name = barrier.name if owner is cta else f"{barrier.name} in {owner.label}"
            destination.accesses.record_write(AsyncWrite(start, end, barrier.key, phase, name, origin(op),
                                                         location=from_ir_location(op)))
        return ()

    @impl(ir.TmaStoreOp)
    @diagnosed
    def run_tma_store(self, interpreter: Interpreter, op: ir.TmaStoreOp, args: PythonValues):
        values = operand_values(op, args)
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        if predicated_off(op, values):
            # Skipped, but its commit still closes a (possibly empty) group, as on the GPU.
            if op.commit.value.data:
                warpgroup.committed_groups += 1
            return ()
        spec = descriptor_spec(op.descriptor)
        start, end = smem_box_range(warpgroup, values[op.smem], spec, "the TMA store")
        cta.accesses.check_read(start, end, warpgroup.clock, "the TMA store")
        argument = cta.launch.argument(spec.arg_index, peer_of(op, values))
        coords = [values[c].value.data for c in op.coords]
        box = read_smem_box(cta.smem.bytes, start, spec)
        if op.reduction is not None:
            reduce_gmem_box(argument.raw, spec, coords, box, op.reduction.data, argument.name)
        else:
            write_gmem_box(argument.raw, spec, coords, box, argument.name)
        # The store belongs to the group the next commit closes.
        group = warpgroup.committed_groups + 1
        cta.accesses.record_read(
            AsyncRead(start, end, warpgroup.bulk_key, group, warpgroup.label, origin(op)))
        if op.commit.value.data:
            warpgroup.committed_groups = group
        return ()
