"""The layout a shared-memory buffer carries: the logical shape kernel code indexes, the
transform chain that lays it out in memory (`hw.transforms`) and the swizzle of its bytes
(`hw.swizzle`).

    SmemLayout((4, 128, 64), (TileTransform((8, 64)),), 128)
    # physical shape (4, 16, 1, 8, 64): element [s, r, c] sits at physical index
    # [s, r // 8, c // 64, r % 8, c % 64], and its bytes move by the 128-byte swizzle of their
    # absolute shared address.

The physical shape is what the memory holds row-major (what a TMA copy with the same transforms
and swizzle fills); the logical shape is what register tiles and copies see.  A view indexing
leading dims (`buf.at[slot]`) has the chain unbatched from those dims, which therefore must be
dims the chain leaves in place.  A window of whole rows of the leading dim (`buf.at[ds(r, n)]`)
has the same chain over fewer rows: the layout expresses windows of whole blocks (the fewest
rows in which it repeats, contiguous and laid out as the chain lays out one block: a tiling's
tile rows) that start on a whole swizzle atom.  The same holds along the last dim where the
layout comes in contiguous blocks of columns (`buf.at[:, ds(64 * c, 64)]` of a (rows, 128)
buffer tiled (rows, 64): its 64-column tiles lie one after the other).  The layout is a
bijection: rounding tilings (which drop elements) are refused, so every logical element has its
own physical place and back.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asyncdsl.errors import TransformError
from asyncdsl.hw.limits import SWIZZLE_SPANS
from asyncdsl.hw.swizzle import repeat_bytes, swizzled
from asyncdsl.hw.transforms import (
    CollapseLeadingIndicesTransform,
    MemRefTransform,
    TileTransform,
    TransformChain,
    apply_chain_index,
    apply_chain_shape,
    unbatch_chain,
)


@dataclass(frozen=True)
class SmemLayout:
    """How a buffer of `logical_shape` lies in shared memory (see the module docstring)."""

    logical_shape: tuple[int, ...]
    transforms: TransformChain
    swizzle_bytes: int

    def __post_init__(self) -> None:
        for transform in self.transforms:
            if isinstance(transform, TileTransform) and transform.rounding is not None:
                raise TransformError(
                    f"{transform} drops elements; a shared-memory buffer's tiling must divide its shape")
            if isinstance(transform, CollapseLeadingIndicesTransform):
                raise TransformError(
                    f"{transform} merges squeezed dims of copies; a buffer's layout cannot use it")
        if self.swizzle_bytes not in SWIZZLE_SPANS:
            raise TransformError(f"swizzle must be one of {SWIZZLE_SPANS} bytes, got {self.swizzle_bytes}")
        apply_chain_shape(self.transforms, self.logical_shape)  # TransformError when the chain does not fit

    @property
    def physical_shape(self) -> tuple[int, ...]:
        return apply_chain_shape(self.transforms, self.logical_shape)

    def check_element(self, element_bits: int) -> None:
        """The rules that need the element size: whole bytes, and swizzled rows (the physical
        last dim) spanning exactly the swizzle, as TMA lays them."""
        if element_bits < 8:
            raise TransformError(
                f"{element_bits}-bit elements pack several to a byte; such a buffer cannot carry a layout")
        row_bytes = self.physical_shape[-1] * element_bits // 8
        if self.swizzle_bytes and row_bytes != self.swizzle_bytes:
            raise TransformError(
                f"swizzle {self.swizzle_bytes} needs rows of exactly {self.swizzle_bytes} bytes, but the "
                f"physical shape {self.physical_shape} has rows of {row_bytes} bytes (tile the last dim by "
                f"{self.swizzle_bytes * 8 // element_bits})"
            )

    @property
    def alignment(self) -> int:
        """The alignment the buffer needs so its swizzle pattern starts at its first row."""
        return repeat_bytes(self.swizzle_bytes) if self.swizzle_bytes else 1

    def view(self, leading_rank: int) -> SmemLayout:
        """The layout of the view indexing the first `leading_rank` logical dims."""
        if leading_rank == 0:
            return self
        return _view(self, leading_rank)

    def window(self, size: int, dim: int = 0) -> SmemLayout:
        """The layout of a window of `size` indices of `dim` (the leading dim, or the last),
        every other dim whole, that starts at a multiple of `window_step` indices
        (TransformError for one it cannot express)."""
        return _window(self, size, _windowed(self, dim))

    def window_step(self, element_bytes: int, dim: int = 0) -> int:
        """The indices of `dim` a window's start is a multiple of: whole periods of the layout
        (`window`), and a whole swizzle atom from the buffer's start, so the window starts its
        pattern."""
        dim = _windowed(self, dim)
        unit_bytes = math.prod(self.logical_shape) // self.logical_shape[dim] * element_bytes
        atom_units = self.alignment // math.gcd(self.alignment, unit_bytes)
        return math.lcm(_period(self, dim), atom_units)

    def element_offsets(self, indices: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """The physical (row-major) element offset of each logical index (one array per dim)."""
        physical = apply_chain_index(self.transforms, tuple(np.asarray(i) for i in indices))
        shape = self.physical_shape
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        terms = (np.asarray(i, dtype=np.int64) * s for i, s in zip(physical, strides, strict=True))
        return np.asarray(sum(terms))

    def byte_addresses(self, base: int, element_bytes: int) -> np.ndarray:
        """The absolute shared address of every byte of every logical element, for a buffer at
        `base`: shape `logical_shape + (element_bytes,)`."""
        offsets = self.element_offsets(np.indices(self.logical_shape))
        linear = base + offsets[..., None] * element_bytes + np.arange(element_bytes)
        return swizzled(linear, self.swizzle_bytes)


# A kernel views its few buffers many times, and tracing builds each view, then verifies it by
# building it again (layouts are immutable values, and a refused view raises and is not cached).
@functools.lru_cache(maxsize=1024)
def _view(layout: SmemLayout, leading_rank: int) -> SmemLayout:
    refusal = (
        f"the transforms {describe_chain(layout.transforms)} lay out the leading {leading_rank} dim(s) of "
        f"{layout.logical_shape} together with the others, so a view cannot index them"
    )
    try:
        chain = unbatch_chain(layout.transforms, leading_rank)
        view = SmemLayout(layout.logical_shape[leading_rank:], chain, layout.swizzle_bytes)
    except TransformError as error:
        raise TransformError(f"{refusal} ({error.message})") from None
    if view.physical_shape != layout.physical_shape[leading_rank:]:
        raise TransformError(refusal)
    return view


def _windowed(layout: SmemLayout, dim: int) -> int:
    """`dim` as a non-negative index: windows are taken of the leading dim or of the last."""
    dim = dim % len(layout.logical_shape)
    if dim not in (0, len(layout.logical_shape) - 1):
        raise TransformError(f"a window of dim {dim} of {layout.logical_shape}: windows are of the leading "
                             f"dim or of the last")
    return dim


def _by_dim(layout: SmemLayout, dim: int) -> np.ndarray:
    """The element offsets of the whole buffer, `dim` first: [index of dim, the rest row-major]."""
    offsets = layout.element_offsets(np.indices(layout.logical_shape))
    return np.moveaxis(offsets, dim, 0).reshape(layout.logical_shape[dim], -1)


@functools.lru_cache(maxsize=256)
def _period(layout: SmemLayout, dim: int = 0) -> int:
    """The fewest indices of `dim` in which the layout comes in blocks: each block of that many
    fills its own contiguous elements, laid out as the chain lays out a buffer of one block."""
    extent = layout.logical_shape[dim]
    offsets = _by_dim(layout, dim)
    unit = offsets.shape[1]  # elements of one index of dim
    for period in (p for p in range(1, extent) if extent % p == 0):
        blocks = offsets.reshape(extent // period, period * unit)
        shifts = np.arange(extent // period)[:, None] * period * unit
        if (blocks == blocks[:1] + shifts).all() and _lays_out(layout, period, dim):
            return period
    return extent  # the whole buffer, one block


def _lays_out(layout: SmemLayout, size: int, dim: int) -> bool:
    """Whether the layout's chain over a buffer of `size` indices of `dim` puts each element
    where the buffer's chain puts the same element of its first `size` indices."""
    shape = list(layout.logical_shape)
    shape[dim] = size
    try:
        window = SmemLayout(tuple(shape), layout.transforms, layout.swizzle_bytes)
    except TransformError:
        return False
    first = np.indices(window.logical_shape)
    return bool((window.element_offsets(first) == layout.element_offsets(first)).all())


@functools.lru_cache(maxsize=1024)
def _window(layout: SmemLayout, size: int, dim: int) -> SmemLayout:
    period = _period(layout, dim)
    shape = layout.logical_shape
    what = "row(s)" if dim == 0 else f"index(es) of dim {dim}"
    if size % period or size > shape[dim]:
        raise TransformError(
            f"a window of {size} {what}: the transforms {describe_chain(layout.transforms)} lay out "
            f"{shape} in blocks of {period} {what}, so a window is whole blocks "
            f"({period}, {2 * period}, ... of them)")
    if not _lays_out(layout, size, dim):
        raise TransformError(
            f"a window of {size} {what}: the transforms {describe_chain(layout.transforms)} lay out "
            f"that window otherwise than they lay out those {what} of {shape}")
    window = list(shape)
    window[dim] = size
    return SmemLayout(tuple(window), layout.transforms, layout.swizzle_bytes)


def describe_chain(chain: TransformChain) -> str:
    return "(" + ", ".join(str(t) for t in chain) + ")" if chain else "()"


def make_layout(
    logical_shape: Sequence[int], transforms: Sequence[MemRefTransform], swizzle_bytes: int
) -> SmemLayout | None:
    """The layout of a buffer allocated with these, or None for a plain row-major one."""
    if not transforms and not swizzle_bytes:
        return None
    return SmemLayout(tuple(logical_shape), tuple(transforms), swizzle_bytes)
