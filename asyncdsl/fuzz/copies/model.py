"""The reference model: what a case's kernel must leave in its output array, or that it must fail.

Written from the documented semantics (README, docs/, tracker), not from asyncdsl's planners or
its interpreter.  Per CTA, a load zero-fills the parts of its window outside the array (an array
cut short by a rounding-down tiling included), lays the window out through the transforms,
packs 4-bit elements, swizzles bytes by their SMEM address and lands in its buffer; a store
does the reverse and writes only the in-bounds elements (or combines them, for a reduction).
A bulk copy (oob "undefined"/"promise_in_bounds" on a window that is one contiguous run) moves
flat bytes, clamped at the end of the array under "undefined" (nothing for a run that starts
outside the array; the buffer keeps what it held past the clamp); what a load leaves in the
window's elements outside the array is undefined, so the model does not compare them.  A
collective load gives every CTA of its group the whole window.  A predicated-off copy does
nothing.  Which copies must fail instead (a store at a negative coordinate, a bulk store whose
clamped run would leave its window, ...) is `rules.py`'s.

`rules.py` says which cases must fail and which must succeed; this module computes results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import expr
from .cases import Case
from .layout import (
    byte_size,
    inverse_positions,
    packed_bytes,
    swizzle_permutation,
    transformed,
    transformed_shape,
    unpacked,
)
from .render import array_names
from .semantics import ORDER_DEPENDENT, poison, random_elements, reduce
from .window import Dim, UserError, window_shape


class Unmodelled(Exception):
    """The model has no answer for this case (a swizzle whose pattern leaves the buffer: the
    documented layouts have rows of exactly the swizzle's span); any run that ends is accepted."""


def swizzled(length: int, swizzle: int, offset: int) -> np.ndarray:
    permutation = swizzle_permutation(length, swizzle, offset)
    if permutation.size and (permutation.min() < 0 or permutation.max() >= length):
        raise Unmodelled(f"a {swizzle}-byte swizzle of a {length}-byte buffer at offset {offset}")
    return permutation


@dataclass
class Outcome:
    """What a run of the case may leave in its output array."""

    alternatives: list[np.ndarray] = field(default_factory=list)  # any one of them is right
    dont_care: np.ndarray | None = None  # output elements that may hold anything

    def accepts(self, output: np.ndarray) -> bool:
        got = element_bytes(output)
        care = None if self.dont_care is None else ~self.dont_care.reshape(-1)
        for expected in self.alternatives:
            want = element_bytes(expected)
            if care is None and np.array_equal(got, want):
                return True
            if care is not None and np.array_equal(got[care], want[care]):
                return True
        return False


def element_bytes(array: np.ndarray) -> np.ndarray:
    """One row of bytes per element."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).reshape(array.size, array.dtype.itemsize)


def make_inputs(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    """The kernel's array arguments in order (outputs included, poisoned)."""
    element = case.element
    buffer_slab = (case.num_ctas, *case.buffer_shape)
    if case.direction == "store":
        exact = case.reduction is not None
        src = random_elements(buffer_slab, element, rng, exact)
        return [src, random_elements(case.gmem_shape, element, rng, exact)]
    arrays = [random_elements(case.gmem_shape, element, rng), poison(buffer_slab, element)]
    if "fill" in array_names(case):
        arrays.append(random_elements(case.buffer_shape, element, rng))
    return arrays


# -- per-CTA geometry ---------------------------------------------------------------------------


def extents(case: Case, cut: dict[int, int]) -> list[int]:
    """The size of each GMEM dim as the copy sees it: rounding-down tilings cut partial tiles."""
    return [cut.get(d, size) for d, size in enumerate(case.gmem_shape)]


def starts_of(dims: tuple[Dim, ...], cta: expr.Cta) -> list[int]:
    return [expr.evaluate(d.start, cta) for d in dims]


def window_mask(dims: tuple[Dim, ...], starts: list[int], sizes: list[int]) -> tuple[np.ndarray, tuple]:
    """(which window elements lie inside the array, their GMEM index arrays)."""
    shape = window_shape(dims)
    inside = np.ones(shape, bool)
    index = []
    position = 0
    for dim, start, size in zip(dims, starts, sizes):
        if dim.size is None:  # squeezed
            if not 0 <= start < size:
                inside[...] = False
            index.append(np.full(shape, min(max(start, 0), size - 1), np.int64))
            continue
        coords = start + np.arange(dim.size)
        view = [1] * len(shape)
        view[position] = dim.size
        coords = coords.reshape(view)
        inside &= (coords >= 0) & (coords < size)
        index.append(np.broadcast_to(np.clip(coords, 0, size - 1), shape))
        position += 1
    return inside, tuple(index)


def slot_offset(case: Case, cta: expr.Cta) -> int:
    """Bytes from the buffer's start to the copy's SMEM side."""
    if not case.slots:
        return 0
    slot = expr.evaluate(case.slot, cta)
    if not 0 <= slot < case.slots:
        raise UserError(f"buffer slot {slot} outside 0 .. {case.slots - 1}", compile_time=False)
    return slot * byte_size(case.smem_shape, case.element)


def predicate_holds(case: Case, cta: expr.Cta) -> bool:
    if case.predicate is None:
        return True
    value = expr.evaluate(case.predicate.lhs, cta)
    rhs = case.predicate.rhs
    return {"==": value == rhs, "!=": value != rhs, "<": value < rhs, ">=": value >= rhs}[case.predicate.op]


# -- loads --------------------------------------------------------------------------------------


def smem_image(case: Case, window: np.ndarray, offset: int) -> np.ndarray:
    """The bytes a tensor (TMA or cp.async) load of `window` leaves at `offset` in the buffer."""
    logical = packed_bytes(transformed(case.transforms, window), case.element)
    return logical[swizzled(logical.size, case.swizzle or 0, offset)]


def tensor_load_window(case, dims, x, cta, sizes) -> np.ndarray:
    starts = starts_of(dims, cta)
    inside, index = window_mask(dims, starts, sizes)
    window = np.zeros(window_shape(dims), x.dtype)
    window[inside] = x[index][inside]
    return window


def flat_run(case: Case, dims, cta) -> int:
    """Byte offset of the window's first element in the array (starts may lie outside it)."""
    strides = [math.prod(case.gmem_shape[d + 1:]) for d in range(len(dims))]
    element_offset = sum(s * stride for s, stride in zip(starts_of(dims, cta), strides))
    return element_offset * case.element.numpy.itemsize


def bulk_moved(case: Case, dims, cta) -> tuple[int, int]:
    """(GMEM byte offset, bytes moved) of a bulk copy."""
    offset = flat_run(case, dims, cta)
    transfer = byte_size(case.smem_shape, case.element)
    total = byte_size(case.gmem_shape, case.element)
    if case.oob == "promise_in_bounds":
        return offset, transfer
    if not 0 <= offset < total:
        return offset, 0
    return offset, min(transfer, total - offset)


def undefined_elements(case: Case, dims, cta: expr.Cta) -> np.ndarray:
    """Which buffer elements a bulk load under oob="undefined" leaves undefined: those of window
    elements outside the array (the run of bytes holds other elements there, or nothing).  The
    buffer holds the transformed window, which is one contiguous run."""
    inside, _ = window_mask(dims, starts_of(dims, cta), list(case.gmem_shape))
    inside = np.ascontiguousarray(transformed(case.transforms, inside)).reshape(-1)
    undefined = np.zeros(math.prod(case.buffer_shape), bool)
    first = slot_offset(case, cta) // case.element.numpy.itemsize
    undefined[first: first + inside.size] = ~inside
    return undefined.reshape(case.buffer_shape)


def load_outcome(case: Case, dims, engine: str, arrays, cut: dict[int, int]) -> Outcome:
    x, dump = arrays[0], arrays[1].copy()
    element = case.element
    sizes = extents(case, cut)
    x_bytes = packed_bytes(x, element)
    dont_care = np.zeros(dump.shape, bool)
    for cta in expr.ctas(case.grid, case.cluster):
        if case.needs_fill:
            buffer = packed_bytes(arrays[2], element)
        else:
            buffer = np.zeros(byte_size(case.buffer_shape, element), np.uint8)
        if predicate_holds(case, cta):
            offset = slot_offset(case, cta)
            if engine == "bulk":
                start, moved = bulk_moved(case, dims, cta)
                buffer[offset: offset + moved] = x_bytes[start: start + moved]
                if case.oob == "undefined":
                    dont_care[cta.linear] = undefined_elements(case, dims, cta)
            else:
                image = smem_image(case, tensor_load_window(case, dims, x, cta, sizes), offset)
                buffer[offset: offset + image.size] = image
        dump[cta.linear] = unpacked(buffer, element, case.buffer_shape)
    return Outcome([dump], dont_care if dont_care.any() else None)


# -- stores -------------------------------------------------------------------------------------


def store_window(case: Case, dims, src_slab: np.ndarray, offset: int) -> np.ndarray:
    """The window's elements as a store reads them from the buffer bytes."""
    element = case.element
    raw = packed_bytes(src_slab, element)
    length = byte_size(case.smem_shape, element)
    physical = raw[offset: offset + length]
    logical = physical[swizzled(length, case.swizzle or 0, offset)]
    smem = unpacked(logical, element, transformed_shape(case.transforms, window_shape(dims)))
    shape = window_shape(dims)
    window = np.empty(math.prod(shape), element.numpy)
    window[inverse_positions(case.transforms, shape)] = smem.reshape(-1)
    return window.reshape(shape)


def store_outcome(case: Case, dims, engine: str, arrays, cut: dict[int, int]) -> Outcome:
    src, y = arrays
    element = case.element
    sizes = extents(case, cut)
    result = y.copy()
    flat = result.reshape(-1)
    writers = np.zeros(y.size, np.int64)
    contested = np.zeros(y.size, bool)
    for cta in expr.ctas(case.grid, case.cluster):
        if not predicate_holds(case, cta):
            continue
        offset = slot_offset(case, cta)
        if engine == "bulk":
            start, moved = bulk_moved(case, dims, cta)
            item = element.numpy.itemsize
            values = packed_bytes(src[cta.linear], element)[offset: offset + moved].view(element.numpy)
            targets = np.arange(start // item, start // item + values.size)
        else:
            starts = starts_of(dims, cta)
            inside, index = window_mask(dims, starts, sizes)
            window = store_window(case, dims, src[cta.linear], offset)
            targets = np.ravel_multi_index(tuple(i[inside] for i in index), y.shape)
            values = window[inside]
        previous = flat[targets].copy()
        if case.reduction:
            flat[targets] = reduce(case.reduction, element, previous, values)
            if case.reduction in ORDER_DEPENDENT:
                contested[targets] |= writers[targets] > 0
        else:
            differs = element_bytes(previous) != element_bytes(values)
            contested[targets] |= (writers[targets] > 0) & differs.any(axis=1)
            flat[targets] = values
        writers[targets] += 1
    return Outcome([result], contested.reshape(y.shape) if contested.any() else None)
