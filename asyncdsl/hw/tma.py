"""Planning one tiled TMA copy: commute the slice with the user's transforms, then check TMA rules.

The user asks for `transforms(gmem[slice])`: index first, transform after.  The copy engine does
it the other way round: a descriptor views the whole GMEM array through the transforms, and one
instruction moves a box at some coordinates of that view.  So the slice is pushed through the
transforms: squeezed (integer-indexed) dims go to the front with a transpose, every user
transform is batched over them, and the window starts and sizes go through `transform_index` and
`transform_shape`.  Dims of size 1 in both the view and the box are then dropped, and if more
than 5 dims remain the squeezed dims are collapsed into one.  What is left must obey the
`cuTensorMapEncodeTiled` rules (docs/hardware.md §5.1), checked here so the user sees the rule
and the numbers instead of a bare CUDA_ERROR_INVALID_VALUE.

Everything is plain tuples: this runs at compile time for every copy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from asyncdsl.dtypes import DType, uint8
from asyncdsl.errors import CopyError
from asyncdsl.hw.gmem_runs import contiguous_strides
from asyncdsl.hw.limits import (
    GMEM_ADDRESS_ALIGNMENT,
    GMEM_STRIDE_ALIGNMENT,
    MAX_BOX_DIM,
    MAX_GLOBAL_DIM,
    MAX_GLOBAL_STRIDE,
    MAX_TMA_RANK,
    MIN_INNER_BOX_BYTES,
    SWIZZLE_SPANS,
    TMA_COORDINATE_BITS,
)
from asyncdsl.hw.packed import as_byte_copy, is_packed
from asyncdsl.hw.transforms import (
    CollapseLeadingIndicesTransform,
    DropUnitDimsTransform,
    Index,
    MemRefTransform,
    TileTransform,
    TransformChain,
    TransposeTransform,
    apply_chain_shape,
    batch_chain,
    divisor_of,
)
from asyncdsl.kernel_binary import TiledTensorMapSpec

# A slice entry: an index (int or traced; the dim is squeezed away) or a window (start, size).
SliceEntry = Any


@dataclass(frozen=True)
class TmaCopyPlan:
    """One tiled TMA copy: the descriptor's view of the GMEM buffer and the box to move.

    `global_dims`/`global_strides` (bytes) view the original, contiguous GMEM buffer from its
    base; `box_dims` is the box one instruction moves and `coords` its origin in that view (ints
    or traced values).  All in array order (outermost first); PTX wants the coordinates reversed.
    `smem_shape` is the transformed slice shape without squeezed dims: the SMEM buffer's shape,
    holding the box's elements in the same order.  `transforms` is the chain actually applied to
    the GMEM array: the squeezed-dims transpose, the batched user transforms, and the automatic
    unit-dim drop and collapse.  `assumed_in_range` lists the traced indices the plan merged
    into one dim (past 5 dims), with the size each must stay below (and at least 0): merged, an
    index outside its dim would alias another element instead of reading zeros, so the compiler
    checks them at run time.
    """

    dtype: DType
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dims: tuple[int, ...]
    coords: tuple[Index, ...]
    smem_shape: tuple[int, ...]
    transforms: TransformChain
    swizzle_bytes: int = 0
    assumed_in_range: tuple[tuple[Index, int], ...] = ()

    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def element_bytes(self) -> int:
        return self.dtype.itemsize

    @property
    def box_bytes(self) -> int:
        """Bytes one copy moves: what a load's barrier must expect, even partly out of bounds."""
        count = 1
        for dim in self.box_dims:
            count *= dim
        return count * self.element_bytes

    # The plan's view always starts at the buffer's base (transforms never offset it), steps by
    # one element in every dim and fills out-of-bounds loads with zeros; the interpreter reads
    # these like those of a TiledTensorMapSpec.
    base_offset_bytes: ClassVar[int] = 0
    element_strides: ClassVar[tuple[int, ...]] = ()
    oob_nan: ClassVar[bool] = False

    def tensor_map_spec(self, arg_index: int) -> TiledTensorMapSpec:
        """The host encoding of this copy's descriptor over kernel argument `arg_index`.

        Equal specs can share one descriptor, so the spec doubles as the dedupe key.
        """
        return TiledTensorMapSpec(
            arg_index=arg_index,
            dtype_code=self.dtype.tma_code,
            element_bytes=self.element_bytes,
            global_dims=self.global_dims,
            global_strides=self.global_strides,
            box_dims=self.box_dims,
            swizzle_bytes=self.swizzle_bytes,
        )


def view_extent_bytes(tensor_map) -> int:
    """One past the last byte of the argument the map's view reaches (its last element's end):
    the argument must hold that many bytes, or the hardware reads or writes past it."""
    return tensor_map.base_offset_bytes + tensor_map.element_bytes + sum(
        (size - 1) * stride for size, stride in zip(tensor_map.global_dims, tensor_map.global_strides)
    )


def plan_tiled_copy(
    gmem_shape: Sequence[int],
    dtype: DType,
    gmem_slice: Sequence[SliceEntry],
    transforms: Sequence[MemRefTransform] = (),
    swizzle_bytes: int = 0,
    smem_shape: Sequence[int] | None = None,
) -> TmaCopyPlan:
    """Plan the TMA copy of `transforms(gmem[gmem_slice])` to or from an SMEM buffer.

    `gmem_slice` has one entry per GMEM dim: an index (int or traced value; the dim is squeezed
    away) or a window `(start, size)` whose start may be traced and may run past either edge
    (TMA zero-fills loads and clips stores there).  `smem_shape` is checked against the
    transformed slice shape; pass None when there is no SMEM side (prefetch).  Raises CopyError
    naming the broken rule, or TransformError for transforms that do not fit the slice.
    """
    if is_packed(dtype):
        return _plan_packed_copy(gmem_shape, dtype, gmem_slice, transforms, swizzle_bytes, smem_shape)
    gmem_shape = tuple(gmem_shape)
    _check_swizzle(swizzle_bytes)
    starts, sizes, squeezed = _parse_slice(gmem_shape, gmem_slice)
    sliced_sizes = tuple(size for dim, size in enumerate(sizes) if dim not in squeezed)
    transformed_shape = apply_chain_shape(transforms, sliced_sizes)
    if smem_shape is not None and tuple(smem_shape) != transformed_shape:
        raise CopyError(
            f"SMEM buffer shape {tuple(smem_shape)} does not match the transformed slice shape "
            f"{transformed_shape}"
        )

    gmem_slice, transforms = _squeeze_dropped_windows(gmem_slice, transforms)
    starts, sizes, squeezed = _parse_slice(gmem_shape, gmem_slice)
    chain = _commute_squeezing(gmem_shape, squeezed, transforms)
    view = _View(gmem_shape, contiguous_strides(gmem_shape), starts, sizes, len(squeezed))
    for transform in chain:
        view = view.push(transform)
    _check_minor_start(gmem_shape, dtype, starts, squeezed)  # after the tile rule, which is more specific
    drop = view.unit_dims()
    if drop:
        chain += (drop,)
        view = view.push(drop)
    assumed_in_range: tuple[tuple[Index, int], ...] = ()
    if view.rank > MAX_TMA_RANK and view.squeezed > 1:
        collapse = _collapse_squeezed(view)
        assumed_in_range = tuple(
            (view.starts[dim], view.dims[dim]) for dim in range(view.squeezed)
            if type(view.starts[dim]) is not int
        )
        chain += (collapse,)
        view = view.push(collapse)
    _check_view(view, dtype, swizzle_bytes)
    return TmaCopyPlan(
        dtype=dtype,
        global_dims=view.dims,
        global_strides=tuple(s * dtype.itemsize for s in view.strides),
        box_dims=view.box,
        coords=view.starts,
        smem_shape=transformed_shape,
        transforms=chain,
        swizzle_bytes=swizzle_bytes,
        assumed_in_range=assumed_in_range,
    )


def _plan_packed_copy(
    gmem_shape: Sequence[int],
    dtype: DType,
    gmem_slice: Sequence[SliceEntry],
    transforms: Sequence[MemRefTransform],
    swizzle_bytes: int,
    smem_shape: Sequence[int] | None,
) -> TmaCopyPlan:
    """The plan of a copy of sub-byte elements: that of the same bytes as uint8."""
    byte_copy = as_byte_copy(gmem_shape, dtype, gmem_slice, transforms, smem_shape)
    try:
        return plan_tiled_copy(
            byte_copy.gmem_shape, uint8, byte_copy.gmem_slice, byte_copy.transforms,
            swizzle_bytes, byte_copy.smem_shape,
        )
    except CopyError as error:
        raise CopyError(f"{error.message} ({byte_copy.note})", error.location) from None


def _squeeze_dropped_windows(
    gmem_slice: Sequence[SliceEntry], transforms: Sequence[MemRefTransform]
) -> tuple[tuple[SliceEntry, ...], tuple[MemRefTransform, ...]]:
    """The same copy with the windows a leading `DropUnitDimsTransform` drops and whose start is
    not the constant 0 turned into indices (squeezed dims) and left out of the transform.

    Dropping a dim drops its coordinate with it: a window `ds(s, 1)` dropped from the view would
    be read at 0 whatever `s` is.  A squeezed dim keeps its coordinate in the tensor map, so a
    start past a GMEM dim of 1 (or a traced one that may be) still reads zeros and skips stores,
    and the SMEM layout is the same (a dim of 1 adds no elements).  A start that is the constant
    0 is the same element either way and stays dropped.
    """
    if not transforms or not isinstance(transforms[0], DropUnitDimsTransform):
        return tuple(gmem_slice), tuple(transforms)
    windows = [dim for dim, entry in enumerate(gmem_slice) if type(entry) is tuple]
    entries, kept = list(gmem_slice), []
    for position in transforms[0].unit_dims:
        if position >= len(windows):
            return tuple(gmem_slice), tuple(transforms)  # the transform's own rank error follows
        start, size = entries[windows[position]]
        if size == 1 and not (type(start) is int and start == 0):
            entries[windows[position]] = start
        else:
            kept.append(position)
    # Each kept position moves down by the windows squeezed before it.
    renumbered = tuple(p - sum(1 for q in transforms[0].unit_dims if q < p and q not in kept) for p in kept)
    rest = tuple(transforms[1:])
    return tuple(entries), ((DropUnitDimsTransform(renumbered),) if renumbered else ()) + rest


def _check_minor_start(gmem_shape: tuple[int, ...], dtype: DType, starts, squeezed) -> None:
    """A box must start on a 16-byte boundary of the minor dim: off it, the H200 faults
    (CUDA_ERROR_ILLEGAL_INSTRUCTION; docs/hardware.md §3.3).  A traced start must be provably
    aligned, or promised so with asyncdsl.multiple_of."""
    dim = len(gmem_shape) - 1
    if dim in squeezed:
        return  # a squeezed minor dim fails the 16-byte box rule instead
    start = starts[dim]
    step = GMEM_ADDRESS_ALIGNMENT // math.gcd(GMEM_ADDRESS_ALIGNMENT, dtype.itemsize)
    if type(start) is int and start % step:
        raise CopyError(
            f"the slice starts at element {start} of the minor dim ({start * dtype.itemsize} bytes): a TMA "
            f"box must start on a 16-byte boundary there (a multiple of {step} {dtype} elements); off it, "
            "the H200 faults"
        )
    known = divisor_of(start)
    if type(start) is not int and known % step:
        raise CopyError(
            f"the slice start along the minor dim is computed on the GPU and must be a multiple of {step} "
            f"{dtype} elements (a TMA box starts on a 16-byte boundary there; off it, the H200 faults), but "
            f"asyncdsl can only prove it a multiple of {known}; if it always is one, say so with "
            f"asyncdsl.multiple_of(start, {step})"
        )


def _check_coordinates(starts: Sequence[Index]) -> None:
    """A box's origin travels as signed 32-bit coordinates (docs/hardware.md §3.1): a static one
    that does not fit would wrap to another element."""
    low, high = -(1 << (TMA_COORDINATE_BITS - 1)), 1 << (TMA_COORDINATE_BITS - 1)
    for dim, start in enumerate(starts):
        if type(start) is int and not low <= start < high:
            raise CopyError(
                f"the TMA box starts at coordinate {start} along dim {dim} of its view, which does not fit "
                f"the signed {TMA_COORDINATE_BITS}-bit coordinates of TMA ({low} .. {high - 1})"
            )


def _check_swizzle(swizzle_bytes: int) -> None:
    if swizzle_bytes not in SWIZZLE_SPANS:
        raise CopyError(f"swizzle must be 0, 32, 64 or 128 bytes, got {swizzle_bytes}")


def _parse_slice(
    gmem_shape: tuple[int, ...], gmem_slice: Sequence[SliceEntry]
) -> tuple[tuple[Index, ...], tuple[int, ...], tuple[int, ...]]:
    """(starts, sizes, squeezed dims) of a slice; squeezed dims have size 1."""
    if any(type(size) is not int or size < 1 for size in gmem_shape):
        raise CopyError(f"GMEM shape {gmem_shape} has an empty dim: TMA cannot view it")
    if len(gmem_slice) != len(gmem_shape):
        raise CopyError(
            f"the slice has {len(gmem_slice)} entries but the GMEM array has "
            f"{len(gmem_shape)} dims (shape {gmem_shape})"
        )
    starts, sizes, squeezed = [], [], []
    for dim, entry in enumerate(gmem_slice):
        if type(entry) is tuple:
            start, size = entry
            if type(size) is not int or size < 1:
                raise CopyError(f"slice size along dim {dim} must be a positive int, got {size!r}")
        else:
            start, size = entry, 1
            squeezed.append(dim)
        starts.append(start)
        sizes.append(size)
    return tuple(starts), tuple(sizes), tuple(squeezed)


def _commute_squeezing(
    gmem_shape: tuple[int, ...], squeezed: tuple[int, ...], transforms: Sequence[MemRefTransform]
) -> TransformChain:
    """The user's chain rewritten to act on the whole array with squeezed dims moved in front."""
    if not squeezed:
        return tuple(transforms)
    sliced = tuple(dim for dim in range(len(gmem_shape)) if dim not in squeezed)
    permutation = squeezed + sliced
    front = (
        () if permutation == tuple(range(len(gmem_shape))) else (TransposeTransform(permutation),)
    )
    return front + batch_chain(transforms, len(squeezed))


@dataclass(frozen=True)
class _View:
    """The GMEM view and the box inside it, as they stand part way through the chain.

    `dims` and `strides` (elements) describe the transformed view of the whole array, `starts`
    and `box` the slice in it, and the first `squeezed` dims are squeezed (box size 1).
    """

    dims: tuple[int, ...]
    strides: tuple[int, ...]
    starts: tuple[Index, ...]
    box: tuple[int, ...]
    squeezed: int

    @property
    def rank(self) -> int:
        return len(self.dims)

    def push(self, transform: MemRefTransform) -> _View:
        if isinstance(transform, TileTransform):
            self._check_tile_aligned(transform)
        box = transform.transform_shape(self.box)
        # Batched user transforms leave the squeezed prefix alone; the automatic drop and
        # collapse are the ones that shrink it.
        squeezed = self.squeezed
        if isinstance(transform, DropUnitDimsTransform):
            self._check_dropped_starts(transform)
            squeezed -= sum(1 for dim in transform.unit_dims if dim < squeezed)
        elif isinstance(transform, CollapseLeadingIndicesTransform):
            if transform.batch_rank < squeezed:
                squeezed -= len(transform.strides) - 1
        return _View(
            dims=transform.transform_gmem_shape(self.dims),
            strides=transform.transform_strides(self.strides),
            starts=transform.transform_index(self.starts),
            box=box,
            squeezed=squeezed,
        )

    def _check_dropped_starts(self, drop: DropUnitDimsTransform) -> None:
        # A dropped dim takes its coordinate with it: only a start of 0 names the same elements.
        for dim in drop.unit_dims:
            start = self.starts[dim]
            if not (type(start) is int and start == 0):
                raise CopyError(
                    f"{drop} drops dim {dim} of the transformed slice, whose start there is "
                    f"{start if type(start) is int else 'computed on the GPU'}, not 0: the start would be "
                    "lost with the dim; put the DropUnitDimsTransform first in the chain, or index the "
                    "dim with an integer instead"
                )

    def _check_tile_aligned(self, tile: TileTransform) -> None:
        # A window that starts inside a tile would need two boxes; the instruction takes one.
        # A traced start must be provably aligned (or promised so with asyncdsl.multiple_of).
        first = self.rank - len(tile.tiling)
        for dim, (start, size) in enumerate(zip(self.starts[first:], tile.tiling), start=first):
            if type(start) is int and start % size:
                raise CopyError(
                    f"slice start {start} along dim {dim} is not a multiple of its tile {size}: "
                    "a tiled TMA box must start on a tile boundary"
                )
            known = divisor_of(start)
            if type(start) is not int and known % size:
                raise CopyError(
                    f"the slice start along dim {dim} is computed on the GPU and must be a multiple of "
                    f"its tile {size} (a tiled TMA box starts on a tile boundary), but asyncdsl can "
                    f"only prove it a multiple of {known}; if it always is one, say so with "
                    f"asyncdsl.multiple_of(start, {size})"
                )

    def unit_dims(self) -> DropUnitDimsTransform | None:
        """The dims of size 1 in both the view and the box that can be dropped, if any.

        Only a dim whose start is the constant 0 goes: any other start puts the whole box out of
        bounds, which only the dim itself can express (a traced start may be 1 at run time).
        Dropping every dim would leave no descriptor, so the innermost one is always kept.
        """
        dims = tuple(
            dim
            for dim in range(self.rank)
            if self.dims[dim] == 1 and self.box[dim] == 1 and type(self.starts[dim]) is int
            and self.starts[dim] == 0
        )
        if len(dims) == self.rank:
            dims = dims[:-1]
        return DropUnitDimsTransform(dims) if dims else None


def _collapse_squeezed(view: _View) -> CollapseLeadingIndicesTransform:
    """The transform merging the squeezed (leading) dims of `view` into one."""
    # Merged, an out-of-bounds index would alias another element instead of reading zeros.
    for dim in range(view.squeezed):
        index = view.starts[dim]
        if type(index) is int and not 0 <= index < view.dims[dim]:
            raise CopyError(
                f"index {index} of a squeezed dim of size {view.dims[dim]} is out of bounds; "
                f"a copy of more than {MAX_TMA_RANK} dims merges its squeezed dims, which "
                "needs their indices in bounds"
            )
    return CollapseLeadingIndicesTransform(view.strides[: view.squeezed])


def _check_view(view: _View, dtype: DType, swizzle_bytes: int) -> None:
    """The cuTensorMapEncodeTiled rules, on the final view and box."""
    if view.rank > MAX_TMA_RANK:
        raise CopyError(
            f"TMA copies move at most {MAX_TMA_RANK} dims, but the transformed copy has "
            f"{view.rank}: view {view.dims}, box {view.box}"
        )
    itemsize = dtype.itemsize
    for dim, size in enumerate(view.box):
        if size > MAX_BOX_DIM:
            raise CopyError(
                f"TMA box dimension {size} > {MAX_BOX_DIM} along dim {dim} (box {view.box}); "
                "tile the slice to split that dim"
            )
        if size < 1:
            raise CopyError(
                f"TMA box dimension {size} along dim {dim} is empty (box {view.box}): "
                "the slice is smaller than its tile"
            )
    for dim, size in enumerate(view.dims):
        if size >= MAX_GLOBAL_DIM:
            raise CopyError(f"TMA view dim {dim} has {size} elements, at least 2^32")
    _check_coordinates(view.starts)
    if view.strides[-1] != 1:
        raise CopyError(
            f"the innermost dim of the transformed GMEM view has stride {view.strides[-1]} "
            "elements; TMA needs stride 1 (transposes must keep the last dim last)"
        )
    for dim, stride in enumerate(view.strides[:-1]):
        stride_bytes = stride * itemsize
        if stride_bytes % GMEM_STRIDE_ALIGNMENT:
            raise CopyError(
                f"GMEM stride {stride_bytes} bytes along dim {dim} of the TMA view "
                f"{view.dims} is not a multiple of {GMEM_STRIDE_ALIGNMENT}"
            )
        if stride_bytes >= MAX_GLOBAL_STRIDE:
            raise CopyError(f"GMEM stride {stride_bytes} bytes along dim {dim} is at least 2^40")
    inner_bytes = view.box[-1] * itemsize
    if inner_bytes % MIN_INNER_BOX_BYTES:
        raise CopyError(
            f"the minor box dim spans {inner_bytes} bytes ({view.box[-1]} x {itemsize}-byte "
            f"elements); TMA needs a multiple of {MIN_INNER_BOX_BYTES}"
        )
    if swizzle_bytes and inner_bytes != swizzle_bytes:
        raise CopyError(
            f"swizzle {swizzle_bytes} needs the minor box dim to span exactly {swizzle_bytes} "
            f"bytes ({swizzle_bytes // itemsize} {dtype} elements), got {view.box[-1]} "
            f"elements ({inner_bytes} bytes)"
        )
